"""Asynchronous copies: cp.async (global -> shared, sm_80), its completion (commit/wait groups,
mbarrier arrive), createpolicy, and the sm_90 bulk copies (cp.async.bulk, .tensor).

cp.async moves BYTES: cp-size is 4, 8 or 16 (`.cg`: only 16) and src-size (zero-fill) is a
byte count too.  Element-count helpers live in :mod:`ptxforge.copy`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_pred, check_value, describe, int_arg, int_or_val, make
from .operands import Addr, Imm, NegPred, Symbol, TensorAddr, Vec
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

#: cp-size (bytes) each cache operator allows.
CP_ASYNC_SIZES = {"ca": (4, 8, 16), "cg": (16,)}
PREFETCH_SIZES = ("L2::64B", "L2::128B", "L2::256B")

REQ_CP_ASYNC = Requirement(80, V("7.0"))
REQ_HINTS = Requirement(80, V("7.4"))
REQ_IGNORE_SRC = Requirement(80, V("7.5"))


@dataclass(frozen=True)
class CpAsyncInfo:
    """Semantics of one cp.async: cache level, bytes written, bytes read (the rest zero-filled), the
    ignore-source predicate, the L2 prefetch size and whether a cache policy is given.
    """
    cache: str  # "ca" / "cg"
    cp_size: int  # bytes written to shared memory
    src_size: object = None  # Imm or Reg: bytes read from global (rest zero-filled)
    ignore_src: object = None  # pred Reg or NegPred: when true, write zeros
    prefetch: str | None = None
    cache_hint: bool = False


def _static_align_check(a: Addr, size: int, what: str):
    """The constant part of an address is known here: it must keep the copy's alignment."""
    if isinstance(a.base, Symbol) and a.base.align < size:
        raise ValidationError(f"{what}: {a.base.name} is only {a.base.align}-byte aligned; a {size}-byte "
                              f"cp.async needs {size}-byte aligned addresses (declare it with align={size})")
    if a.offset % size:
        raise ValidationError(f"{what}: constant offset {a.offset} is not a multiple of {size}; a {size}-byte "
                              "cp.async needs both addresses aligned to its size")


def cp_async(dst, src, cp_size, cache=None, src_size=None, ignore_src=None, prefetch=None,
             cache_policy=None, dst_space="shared"):
    """Build and check `cp.async.{ca,cg}.shared.global{.L2::cache_hint}{.L2::Nb} [dst], [src], size{, src_size}{,
    ignore_src}{, policy}` (pure: no builder; sm_80).

    Args:
        dst: the shared-memory address.
        src: the global address.
        cp_size: bytes copied, 4, 8 or 16 (16 only for .cg).
        cache: "ca" or "cg"; by default cg for 16 bytes, ca otherwise.
        src_size: bytes read from `src` (an int or .u32 register); the rest of `cp_size` is zero-filled.
        ignore_src: a predicate (or its negation): where it holds, zeros are written.
        prefetch: an L2 prefetch size ("L2::64B", "L2::128B", "L2::256B").
        cache_policy: a .b64 policy register from `createpolicy` (``.L2::cache_hint``).
    """
    size = int_arg(cp_size.value if isinstance(cp_size, Imm) else cp_size, "cp.async cp-size")
    if cache is None:
        cache = "cg" if size == 16 else "ca"
    if cache not in CP_ASYNC_SIZES:
        raise ValidationError(f"cp.async cache operator must be .ca or .cg, got {cache!r}")
    if size not in CP_ASYNC_SIZES[cache]:
        if cache == "cg":
            raise ValidationError(f"cp.async.cg copies exactly 16 bytes, not {size}; use .ca for 4 or 8 bytes")
        raise ValidationError(f"cp.async copies 4, 8 or 16 bytes, not {size} (cp-size counts bytes, "
                              "not elements: 32 int4 or 16 int8 values are 16 bytes)")
    if src_size is not None and ignore_src is not None:
        raise ValidationError("cp.async takes either src-size (zero-fill) or ignore-src, not both")
    req = REQ_CP_ASYNC
    ops = []
    if dst_space not in ("shared", "shared::cta"):
        raise ValidationError(f"cp.async writes shared memory; destination space {dst_space!r} is not legal")
    d = check_addr(dst, "shared", "cp.async destination")
    s = check_addr(src, "global", "cp.async source")
    _static_align_check(d, size, "cp.async destination")
    _static_align_check(s, size, "cp.async source")
    ops = [d, s, Imm(size)]
    if src_size is not None:
        v = int_arg(src_size.value if isinstance(src_size, Imm) else src_size, "cp.async src-size", ".u32")
        if v is not None:
            if not 0 <= v <= size:
                raise ValidationError(f"cp.async src-size {v} is outside 0..{size}: it counts the bytes read "
                                      f"from global memory and may not exceed cp-size ({size})")
            src_size = Imm(v)
        else:
            check_value(src_size, T.u32, "cp.async src-size", imm_ok=False)
        ops.append(src_size)
    if ignore_src is not None:
        check_pred(ignore_src.reg if isinstance(ignore_src, NegPred) else ignore_src, "cp.async ignore-src")
        ops.append(ignore_src)
        req = req.merge(REQ_IGNORE_SRC)
    if prefetch is not None:
        if prefetch not in PREFETCH_SIZES:
            raise ValidationError(f"cp.async prefetch must be one of {PREFETCH_SIZES}, got {prefetch!r}")
        req = req.merge(REQ_HINTS)
    if cache_policy is not None:
        check_value(cache_policy, T.b64, "cp.async cache policy", imm_ok=False)
        ops.append(cache_policy)
        req = req.merge(REQ_HINTS)
    parts = ("cp.async", cache, "shared" if dst_space == "shared" else "shared::cta", "global",
             "L2::cache_hint" if cache_policy is not None else None, prefetch)
    info = CpAsyncInfo(cache, size, src_size, ignore_src, prefetch, cache_policy is not None)
    return make("cp.async", parts, ops, n_dst=0, req=req, info=info, mods=(cache,))


def commit_group():
    """Build `cp.async.commit_group` (pure: no builder): close this thread's pending cp.asyncs into a group.
    """
    return make("cp.async.commit_group", ("cp.async", "commit_group"), req=REQ_CP_ASYNC)


def wait_group(n: int):
    """Build `cp.async.wait_group n` (pure: no builder): wait until at most `n` of this thread's newest groups
    are pending.
    """
    n = int_arg(n, "cp.async.wait_group")
    if n < 0:
        raise ValidationError(f"cp.async.wait_group takes a non-negative immediate, got {n!r}")
    return make("cp.async.wait_group", ("cp.async", "wait_group"), (Imm(n),), req=REQ_CP_ASYNC, info=n)


def wait_all():
    """Build `cp.async.wait_all` (pure: no builder): wait for every cp.async of this thread."""
    return make("cp.async.wait_all", ("cp.async", "wait_all"), req=REQ_CP_ASYNC)


#: where cp.async.mbarrier.arrive finds its mbarrier: a shared address (.shared, or .shared::cta from PTX 7.8) or
#: a generic one (no space written: a 64-bit address inside the shared window, or a 32-bit register, which
#: ptxas 13.0 takes as the shared offset: its SASS arrives at the register's value either way, and libcu++
#: passes the 32-bit shared address)
CP_ARRIVE_SPACES = {"shared": REQ_CP_ASYNC, "shared::cta": Requirement(80, V("7.8")), "generic": REQ_CP_ASYNC}


def cp_async_mbarrier_arrive(mbar, noinc=False, space="shared"):
    """Build `cp.async.mbarrier.arrive{.noinc}{.space}.b64 [mbar]` (pure: no builder): the mbarrier sees one
    arrival when this thread's earlier cp.asyncs complete; with `noinc` that arrival is counted in the
    barrier's expected count.  `space`: one of `CP_ARRIVE_SPACES` ('generic': the mbarrier named by a generic
    address, no space written).
    """
    if space not in CP_ARRIVE_SPACES:
        raise ValidationError(f"cp.async.mbarrier.arrive finds its mbarrier by a {', '.join(CP_ARRIVE_SPACES)} "
                              f"address, not {space!r}")
    a = check_addr(mbar, "shared", "cp.async.mbarrier.arrive")  # (generic: a 64-bit address or a 32-bit offset)
    return make("cp.async.mbarrier.arrive", ("cp.async", "mbarrier", "arrive", "noinc" if noinc else None,
                                             None if space == "generic" else space, "b64"), (a,),
                req=CP_ARRIVE_SPACES[space], info=noinc, mods=("noinc",) if noinc else ())


CREATEPOLICY = ("L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged")


def createpolicy(d, primary="L2::evict_last", fraction=1.0):
    """Build `createpolicy.fractional.primary.b64 d, fraction` (pure: no builder): an L2 eviction policy for
    `fraction` of the accessed lines (sm_80, PTX 7.4).

    Args:
        d: the .b64 destination.
        primary: one of `CREATEPOLICY` ("L2::evict_last" ...).
        fraction: a number in (0, 1] (written as an .f32 immediate), or an .f32 or .b32 register holding one.
    """
    if primary not in CREATEPOLICY:
        raise ValidationError(f"createpolicy priority must be one of {CREATEPOLICY}, got {primary!r}")
    check_value(d, T.b64, "createpolicy destination", imm_ok=False)
    if isinstance(fraction, Imm):
        fraction = fraction.value
    if isinstance(fraction, numbers.Real) and not isinstance(fraction, bool):
        if not 0.0 < float(fraction) <= 1.0:
            raise ValidationError(f"createpolicy fraction must be in (0, 1], got {fraction}")
        frac = Imm(float(fraction), T.f32)
    elif getattr(getattr(fraction, "type", None), "name", None) in ("f32", "b32") and not isinstance(fraction, Imm):
        frac = fraction  # a register holding the fraction (ptxas takes .f32 and .b32, not .u32 or .s32)
    else:
        raise ValidationError(f"createpolicy fraction must be a number in (0, 1] or an .f32 (or .b32) register, got "
                              f"{describe(fraction)}")
    return make("createpolicy", ("createpolicy", "fractional", primary, "b64"), (d, frac), n_dst=1, req=REQ_HINTS)


# ---------------------------------------------------------------- bulk copies (sm_90)

REQ_BULK = Requirement(90, V("8.0"))


@dataclass(frozen=True)
class BulkInfo:
    """Semantics of one bulk copy: its kind (g2s, s2g, prefetch, tensor_g2s, tensor_s2g, tensor_prefetch),
    size in bytes and tensor dimensions.
    """
    kind: str  # "g2s", "s2g", "prefetch", "tensor_g2s", "tensor_s2g", "tensor_prefetch"
    size: object = None
    dims: int = 0
    multicast: bool = False
    im2col: bool = False  # .im2col load mode: the operand after the mbarrier is the offsets vector


#: The largest immediate byte count of a 1-D bulk copy, store, prefetch or reduction: 2^20 - 16 (ptxas: "out of
#: range, expected to be in range [0..1048560]"; a count of 2^32 or more wraps silently).  A count is a multiple
#: of 16; ptxforge refuses 0, which moves nothing.
BULK_SIZE_MAX = (1 << 20) - 16


def _bulk_size(size):
    """A 1-D bulk copy's byte count: an immediate multiple of 16 in 16..`BULK_SIZE_MAX`, or a .u32 register."""
    v = int_arg(size.value if isinstance(size, Imm) else size, "cp.async.bulk size", ".u32")
    if v is not None:
        if not 0 < v <= BULK_SIZE_MAX or v % 16:
            raise ValidationError(f"cp.async.bulk size must be a positive multiple of 16 bytes in "
                                  f"16..{BULK_SIZE_MAX}, got {v}")
        return Imm(v)
    check_value(size, T.u32, "cp.async.bulk size", imm_ok=False)
    return size


#: where a bulk or tensor load from global memory may land: .shared::cluster (this CTA's shared memory, or with
#: multicast the cluster's) or .shared::cta (this CTA's only, named so: PTX ISA 8.6; no multicast)
LOAD_DESTINATIONS = {"shared::cluster": REQ_BULK, "shared::cta": REQ_BULK.merge(Requirement(90, V("8.6")))}


def _load_destination(what, dst_space, multicast):
    """What a global -> shared load into `dst_space` needs (refused: another space, or multicast into .shared::cta)."""
    if dst_space not in LOAD_DESTINATIONS:
        raise ValidationError(f"{what} lands in one of {', '.join(LOAD_DESTINATIONS)}, got {dst_space!r}")
    if multicast and dst_space == "shared::cta":
        raise ValidationError(f"{what}: a multicast lands in the cluster's CTAs, so its destination is "
                              ".shared::cluster (ptxas: illegal .multicast::cluster with .shared::cta.global)")
    return LOAD_DESTINATIONS[dst_space]


def bulk_g2s(dst, src, size, mbar, dst_space="shared::cluster", cta_mask=None):
    """cp.async.bulk.dst_space.global.mbarrier::complete_tx::bytes{.multicast::cluster} [dst], [src], size, [mbar]
    {, ctaMask} (`dst_space`: one of `LOAD_DESTINATIONS`).  With `cta_mask` (a non-zero 16-bit mask of cluster
    ranks: an int or .b16 register) the bytes land at the same offset in every CTA it names, each completing
    on its own mbarrier at `mbar`'s offset (ptxas advises sm_90a for it)."""
    req = _load_destination("cp.async.bulk", dst_space, cta_mask is not None)
    d = check_addr(dst, "shared", "cp.async.bulk destination")
    s = check_addr(src, "global", "cp.async.bulk source")
    m = check_addr(mbar, "shared", "cp.async.bulk mbarrier")
    size = _bulk_size(size)
    ops = (d, s, size, m) if cta_mask is None else (d, s, size, m, _cta_mask(cta_mask))
    return make("cp.async.bulk", ("cp.async", "bulk", dst_space, "global", "mbarrier::complete_tx::bytes",
                                  "multicast::cluster" if cta_mask is not None else None),
                ops, req=req, info=BulkInfo("g2s", size, multicast=cta_mask is not None))


def _cta_mask(cta_mask):
    """A multicast ctaMask operand: a non-zero 16-bit mask of cluster ranks (an int) or a .b16 register."""
    if (n := int_arg(cta_mask, "multicast ctaMask", ".b16")) is not None:
        if not 0 < n < (1 << 16):
            raise ValidationError(f"multicast ctaMask {n:#x} must be a non-zero 16-bit mask of CTA ranks")
        return Imm(n)
    check_value(cta_mask, T.b16, "multicast ctaMask", imm_ok=False)
    return cta_mask


def check_cluster_mask(mask: int, directives) -> None:
    """Raise a ValidationError when the immediate multicast ctaMask `mask` names a rank past the cluster a kernel
    with `directives` ((name, value) pairs) declares: .reqnctapercluster's CTAs, or .maxclusterrank.  (ptxas takes
    any 16-bit mask; the builder and the PTX reader both ask this.)"""
    declared = dict(directives)
    dims = declared.get("reqnctapercluster")
    ctas = dims[0] * dims[1] * dims[2] if dims else declared.get("maxclusterrank")
    if ctas and mask >> ctas:
        said = f".reqnctapercluster {dims}" if dims else f".maxclusterrank {ctas}"
        raise ValidationError(f"multicast ctaMask {mask:#x} names rank {mask.bit_length() - 1}, but the kernel's "
                              f"clusters have {ctas} CTAs ({said}): legal masks are 0x1..{(1 << ctas) - 1:#x}")


def bulk_s2s(dst, src, size, mbar):
    """`cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]` (sm_90):
    `size` bytes (a positive multiple of 16, or a .u32 register) of this CTA's shared memory at `src` into a
    cluster CTA's at `dst`, completing on that CTA's mbarrier at `mbar` (both .shared::cluster addresses, from
    `mapa`)."""
    d = check_addr(dst, "shared", "cp.async.bulk destination")
    s = check_addr(src, "shared", "cp.async.bulk source")
    m = check_addr(mbar, "shared", "cp.async.bulk mbarrier")
    size = _bulk_size(size)
    return make("cp.async.bulk", ("cp.async", "bulk", "shared::cluster", "shared::cta", "mbarrier::complete_tx::bytes"),
                (d, s, size, m), req=REQ_BULK, info=BulkInfo("s2s", size))


def bulk_s2g(dst, src, size):
    """`cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size`: a 1-D bulk store shared -> global
    (size a positive multiple of 16 bytes, both addresses 16-byte aligned), completed by bulk groups."""
    d = check_addr(dst, "global", "cp.async.bulk store destination")
    s = check_addr(src, "shared", "cp.async.bulk store source")
    size = _bulk_size(size)
    return make("cp.async.bulk", ("cp.async", "bulk", "global", "shared::cta", "bulk_group"), (d, s, size),
                req=REQ_BULK, info=BulkInfo("s2g", size))


def bulk_prefetch(src, size, policy=None):
    """`cp.async.bulk.prefetch.L2.global{.L2::cache_hint} [src], size{, policy}` (sm_90): bring `size`
    bytes (a positive multiple of 16, or a .u32 register) at a global address into L2, with an
    optional 64-bit cache policy (`createpolicy`).  A hint: no result, no completion to wait for."""
    s = check_addr(src, "global", "cp.async.bulk.prefetch source")
    size = _bulk_size(size)
    ops = (s, size)
    if policy is not None:
        check_value(policy, T.b64, "cp.async.bulk.prefetch cache policy", imm_ok=False)
        ops += (policy,)
    return make("cp.async.bulk.prefetch", ("cp.async", "bulk", "prefetch", "L2", "global",
                                           "L2::cache_hint" if policy is not None else None), ops,
                req=REQ_BULK, info=BulkInfo("prefetch", size))


def bulk_tensor_prefetch(tmap, coords):
    """`cp.async.bulk.prefetch.tensor.Nd.L2.global.tile [tmap, {coords}]` (sm_90): bring the box of the
    tensor map at `coords` (1 to 5 .s32 values, innermost first) into L2.  A hint: nothing lands in
    shared memory and there is no completion to wait for; a later TMA load of the box hits L2."""
    n = len(coords)
    if not 1 <= n <= 5:
        raise ValidationError(f"cp.async.bulk.prefetch.tensor takes 1 to 5 coordinates, got {n}")
    for i, c in enumerate(coords):
        check_value(c, T.s32, f"tensor coordinate {i}")
    return make("cp.async.bulk.prefetch.tensor", ("cp.async", "bulk", "prefetch", "tensor", f"{n}d", "L2", "global",
                                                  "tile"),
                (TensorAddr(tmap, tuple(coords)),), req=REQ_BULK, info=BulkInfo("tensor_prefetch", dims=n))


def bulk_tensor_g2s(dst, tmap, coords, mbar, cta_mask=None, dst_space="shared::cluster"):
    """`cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    {.multicast::cluster} [dst], [tmap, {coords}], [mbar]{, ctaMask}`.

    With `cta_mask` (a 16-bit mask: an int or .b16 register) the box lands at the same shared
    offset in every CTA of the cluster whose rank bit is set, each completing on its own mbarrier
    at that offset (.multicast::cluster; ptxas advises sm_90a for it).  `dst_space`: one of
    `LOAD_DESTINATIONS`.
    """
    n = len(coords)
    if not 1 <= n <= 5:
        raise ValidationError(f"cp.async.bulk.tensor takes 1 to 5 coordinates, got {n}")
    return _tensor_g2s("tile", dst, tmap, coords, mbar, (), cta_mask, dst_space)


def _tensor_g2s(mode: str, dst, tmap, coords, mbar, extra: tuple, cta_mask, dst_space="shared::cluster"):
    """The checked `cp.async.bulk.tensor` global -> shared load of `mode` ('tile' or 'im2col'):
    [dst], [tmap, {coords}], [mbar], then `extra` operands, then the multicast ctaMask if given."""
    req = _load_destination("cp.async.bulk.tensor", dst_space, cta_mask is not None)
    n = len(coords)
    d = check_addr(dst, "shared", "cp.async.bulk.tensor destination")
    for i, c in enumerate(coords):
        check_value(c, T.s32, f"tensor coordinate {i}")
    m = check_addr(mbar, "shared", "cp.async.bulk.tensor mbarrier")
    ops = [d, TensorAddr(tmap, tuple(coords)), m, *extra]
    if cta_mask is not None:
        ops.append(_cta_mask(cta_mask))
    return make("cp.async.bulk.tensor", ("cp.async", "bulk", "tensor", f"{n}d", dst_space, "global", mode,
                                         "mbarrier::complete_tx::bytes",
                                         "multicast::cluster" if cta_mask is not None else None),
                tuple(ops), req=req, info=BulkInfo("tensor_g2s", dims=n, multicast=cta_mask is not None,
                                                        im2col=mode == "im2col"))


def bulk_tensor_g2s_im2col(dst, tmap, coords, mbar, offsets, cta_mask=None, dst_space="shared::cluster"):
    """`cp.async.bulk.tensor.Nd.shared::cluster.global.im2col.mbarrier::complete_tx::bytes
    {.multicast::cluster} [dst], [tmap, {c, w, (h, (d,)) n}], [mbar], {im2col offsets}{, ctaMask}`.

    An im2col load (N = 3, 4 or 5; the tensor map from `cuTensorMapEncodeIm2col`): coords are the
    channel start, the filter base position in W (H, D) and the image; `offsets` the N - 2 .b16
    registers (w, h, d innermost first) added to the filter base to give the first pixel read.
    """
    n = len(coords)
    if not 3 <= n <= 5:
        raise ValidationError(f"an im2col tensor copy takes 3 to 5 coordinates (NWC, NHWC, NDHWC), got {n}")
    offsets = tuple(offsets)
    if len(offsets) != n - 2:
        raise ValidationError(f"a {n}d im2col copy takes {n - 2} im2col offset(s) (W{', H' if n > 3 else ''}"
                              f"{', D' if n > 4 else ''}), got {len(offsets)}")
    for i, o in enumerate(offsets):
        check_value(o, T.b16, f"im2col offset {i}", imm_ok=False)
    return _tensor_g2s("im2col", dst, tmap, coords, mbar, (Vec(offsets),), cta_mask, dst_space)


def bulk_tensor_s2g(tmap, coords, src):
    """Build `cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group [tmap, {coords}], [src]` (pure: no
    builder; sm_90): a TMA tile store, completed through bulk groups.
    """
    n = len(coords)
    s = check_addr(src, "shared", "cp.async.bulk.tensor source")
    for i, c in enumerate(coords):
        check_value(c, T.s32, f"tensor coordinate {i}")
    return make("cp.async.bulk.tensor", ("cp.async", "bulk", "tensor", f"{n}d", "global", "shared::cta", "tile",
                                         "bulk_group"),
                (TensorAddr(tmap, tuple(coords)), s), req=REQ_BULK, info=BulkInfo("tensor_s2g", dims=n))


def bulk_commit_group():
    """Build `cp.async.bulk.commit_group` (pure: no builder): close this thread's pending bulk stores into a bulk
    group.
    """
    return make("cp.async.bulk.commit_group", ("cp.async", "bulk", "commit_group"), req=REQ_BULK)


def bulk_wait_group(n: int, read: bool = False):
    """Build `cp.async.bulk.wait_group{.read} n` (pure: no builder): wait until at most `n` bulk groups are
    pending (with `read`: until their sources have been read).
    """
    n = int_arg(n, "cp.async.bulk.wait_group")
    if n < 0:
        raise ValidationError(f"cp.async.bulk.wait_group takes a non-negative immediate, got {n!r}")
    return make("cp.async.bulk.wait_group", ("cp.async", "bulk", "wait_group", "read" if read else None),
                (Imm(n),), req=REQ_BULK, info=n)


class AsyncCopyOps:
    """Builder methods for asynchronous copies: cp.async (sm_80), bulk and TMA tensor copies (sm_90), and their
    completion.
    """
    def cp_async(self, dst, src, size, *, cache=None, src_size=None, ignore_src=None, prefetch=None,
                 cache_policy=None, pred=None):
        """cp.async of `size` BYTES (4, 8, 16) from global `src` to shared `dst`.

        `src_size` (bytes, register or int) zero-fills the rest; `ignore_src` (a pred, or ~pred)
        writes zeros; guard with `pred` to skip the copy entirely.  `cache` defaults to .cg for
        16 bytes (L1 bypass) and .ca otherwise.
        """
        if ignore_src is not None:
            g = self._guard(ignore_src)
            ignore_src = NegPred(g.reg) if g.negate else g.reg
        src_size = int_or_val(self._val, src_size, "cp.async src-size")
        if cache_policy is not None:
            cache_policy = self._val(cache_policy)
        self.emit(cp_async(self._addr(dst), self._addr(src), size, cache, src_size, ignore_src, prefetch,
                           cache_policy), pred)

    def cp_async_commit(self, *, pred=None):
        """`cp.async.commit_group`: close this thread's cp.asyncs issued since the last commit into a group
        (where `pred` holds).
        """
        self.emit(commit_group(), pred)

    def cp_async_wait(self, n: int = 0):
        """cp.async.wait_group n: wait until at most n of this thread's newest groups are pending."""
        self.emit(wait_group(n))

    def cp_async_wait_all(self):
        """`cp.async.wait_all`: wait until every cp.async of this thread has landed in shared memory."""
        self.emit(wait_all())

    def cp_async_mbarrier_arrive(self, mbar, *, noinc=False, space="shared", pred=None):
        """Make the mbarrier track this thread's earlier cp.asyncs (.noinc: that IS the arrival); `space`
        'generic' names it by a generic address."""
        self.emit(cp_async_mbarrier_arrive(self._addr(mbar), noinc, space), pred)

    def createpolicy(self, primary="L2::evict_last", fraction=1.0, *, dst=None):
        """`createpolicy.fractional.L2::...b64 d, fraction`: an L2 cache policy register for
        `cp_async(cache_policy=)`; returns d.

        Args:
            primary: the eviction priority, one of `CREATEPOLICY`.
            fraction: the fraction of lines it applies to, a number in (0, 1].
            dst: a .b64 register to write instead of a new one.
        """
        d = self._dst(dst, T.b64)
        self.emit(createpolicy(d, primary, fraction))
        return d

    def _multicast(self, mask):
        """A multicast ctaMask argument as its operand: a .b16 register as it is; an int checked against the
        cluster the kernel declares (.reqnctapercluster's CTAs, or .maxclusterrank), whose ranks are all
        there are; None as it is."""
        mask = int_or_val(self._val, mask, "multicast ctaMask", ".b16", T.b16)
        if type(mask) is int:
            check_cluster_mask(mask, self.directives)
        return mask

    def bulk_copy(self, dst, src, size, mbar, *, dst_space="shared::cluster", multicast=None, pred=None):
        """sm_90 bulk copy global -> shared completing on an mbarrier's transaction count (`dst_space`: one of
        `LOAD_DESTINATIONS`; `multicast`: a 16-bit mask of cluster ranks, int or .b16 register, whose CTAs
        each receive the bytes at the same offset, as for `tensor_load`)."""
        size = int_or_val(self._val, size, "cp.async.bulk size")
        multicast = self._multicast(multicast)
        self.emit(bulk_g2s(self._addr(dst), self._addr(src), size, self._addr(mbar), dst_space, multicast), pred)

    def bulk_copy_to_cluster(self, dst, src, size, mbar, *, pred=None):
        """sm_90 bulk copy of this CTA's shared memory at `src` into a cluster CTA's at `dst`, completing on that
        CTA's mbarrier at `mbar` (`dst` and `mbar` .shared::cluster addresses, from `mapa`; `bulk_s2s`)."""
        size = int_or_val(self._val, size, "cp.async.bulk size")
        self.emit(bulk_s2s(self._addr(dst), self._addr(src), size, self._addr(mbar)), pred)

    def bulk_prefetch(self, src, size, *, policy=None, pred=None):
        """sm_90 bulk L2 prefetch: `cp.async.bulk.prefetch.L2.global [src], size{, policy}` (size a
        positive multiple of 16 bytes or a .u32 register; `policy` a createpolicy register)."""
        size = int_or_val(self._val, size, "cp.async.bulk size")
        self.emit(bulk_prefetch(self._addr(src), size, None if policy is None else self._val(policy)), pred)

    def bulk_store(self, dst, src, size, *, pred=None):
        """sm_90 1-D bulk store shared -> global (`cp.async.bulk.global.shared::cta.bulk_group`); close it
        with bulk_commit() and bulk_wait(n, read=True) before the shared source is rewritten."""
        size = int_or_val(self._val, size, "cp.async.bulk size")
        self.emit(bulk_s2g(self._addr(dst), self._addr(src), size), pred)

    def tensor_load(self, dst, tmap, coords, mbar, *, multicast=None, dst_space="shared::cluster", pred=None):
        """sm_90 TMA tile load: `tmap` is the generic address of a CUtensorMap parameter.

        `multicast`: a 16-bit CTA-rank mask (int or .b16 register): the box lands in every CTA of the
        cluster named by the mask (.multicast::cluster); an int may name only ranks of the cluster the
        kernel declares (.reqnctapercluster, .maxclusterrank).  `dst_space='shared::cta'` names the destination
        as this CTA's (PTX 8.6; no multicast).
        """
        multicast = self._multicast(multicast)
        self.emit(bulk_tensor_g2s(self._addr(dst), self._val(tmap), tuple(self._val(c, T.s32) for c in coords),
                                  self._addr(mbar), multicast, dst_space), pred)

    def tensor_prefetch(self, tmap, coords, *, pred=None):
        """sm_90 TMA L2 prefetch of one box (`cp.async.bulk.prefetch.tensor.Nd.L2.global.tile`): `tmap`
        the generic address of a CUtensorMap parameter, coords innermost first.  No completion: the
        data only moves into L2, ahead of the tensor_load that will read it."""
        self.emit(bulk_tensor_prefetch(self._val(tmap), tuple(self._val(c, T.s32) for c in coords)), pred)

    def tensor_load_im2col(self, dst, tmap, coords, mbar, offsets, *, multicast=None, dst_space="shared::cluster",
                           pred=None):
        """sm_90 TMA im2col load (`bulk_tensor_g2s_im2col`): `tmap` an im2col tensor map parameter
        (`TensorMap.im2col`), coords (c, w, (h, (d,)) n), offsets the N - 2 filter-tap offsets
        (ints 0..65535 or .b16 registers; ints are moved into registers); `dst_space` as for tensor_load."""
        multicast = self._multicast(multicast)
        offs = []
        for o in offsets:
            o = int_or_val(self._val, o, "im2col offset", ".b16", T.b16)
            if type(o) is int:
                if not 0 <= o < (1 << 16):
                    raise ValidationError(f"an im2col offset is an unsigned 16-bit value, got {o}")
                o = self.mov(o, type=T.b16)
            offs.append(self._val(o, T.b16))
        self.emit(bulk_tensor_g2s_im2col(self._addr(dst), self._val(tmap), tuple(self._val(c, T.s32) for c in coords),
                                         self._addr(mbar), offs, multicast, dst_space), pred)

    def tensor_store(self, tmap, coords, src, *, pred=None):
        """sm_90 TMA tile store shared -> global (`cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`):
        out-of-bounds parts of the box are not written.  Close it with bulk_commit() and wait with
        bulk_wait(n, read=True) before the shared source is rewritten (or the CTA exits); the writing
        threads need fence('fence.proxy.async.shared::cta') and a barrier before it."""
        self.emit(bulk_tensor_s2g(self._val(tmap), tuple(self._val(c, T.s32) for c in coords),
                                  self._addr(src)), pred)

    def bulk_commit(self, *, pred=None):
        """`cp.async.bulk.commit_group`: close this thread's bulk (TMA store) group."""
        self.emit(bulk_commit_group(), pred)

    def bulk_wait(self, n: int = 0, *, read=False, pred=None):
        """`cp.async.bulk.wait_group{.read} n`: at most n bulk groups pending (.read: their shared
        sources have been read, so they may be rewritten)."""
        self.emit(bulk_wait_group(n, read), pred)
