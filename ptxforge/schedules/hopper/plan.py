"""A HopperGemm on the GPU, prepared once: the kernel (a whole-program ptxas cubin), the tensor maps, the grid
and the launches.

    g = HopperGemm("s8")
    p = g.plan(m, n, k)                        # a HopperPlan: resolved once per problem and stream
    p(a_dev, b_dev, c_dev)                     # three reads and the launch once a kind of operands is checked
    plan = prepare(g, a_dev, b_dev, c_dev)     # a Plan: tensor maps encoded, arguments packed once
    plan.launch()                              # one cuLaunchKernel

The kernel is assembled by ptxas as a whole program when ptxas is available: the driver's linker
compiles PTX for linking, where ptxas ignores `setmaxnreg` (info C7504) and the consumer
warpgroups would keep the entry cap of 168 registers.  Without ptxas the driver JIT is used.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ...errors import TargetError, ValidationError
from ..operands import _reader, check_device_out
from .operands import accepted_elem, check_elems, gpu_view, k_of_rows


_PTXFORGE_INTERNAL = True

_kernels: dict = {}
_lock = threading.Lock()
_registers_lock = threading.Lock()  # (a registers plan loads its kernel under _lock)


@functools.lru_cache(maxsize=64)
def assembled(cfg):
    """AssemblyResult of the configuration by whole-program ptxas (None when ptxas is missing); kept per
    configuration, so tuning can assemble candidates side by side and load them later."""
    from ...assembler import assemble, find_tool
    if not find_tool("ptxas"):
        return None
    return assemble(cfg.module, "sm_90a", backend="ptxas")


def load_kernel(cfg):
    """The KernelFunction of `cfg`, loaded once per process."""
    hit = _kernels.get(cfg)
    if hit is not None:
        return hit
    from ...runtime import load
    from ...runtime import driver as drv
    from ...runtime.loader import LoadedModule, check_target, source_of
    # (the ptxas cubin below bypasses load()'s check: an sm_90a kernel on another GPU is refused by name, not
    # left to the driver's "no kernel image" code)
    try:
        check_target(cfg.module.target, drv.device_info().compute_capability)
    except TargetError as e:
        raise TargetError(f"the TMA + wgmma GEMM runs on H100/H200 only: {e.message}; on this GPU the for_shape() "
                          "of Int8Gemm / Int4Gemm picks the mma.sync schedule") from None
    r = assembled(cfg)
    if r is None:
        fn = load(cfg.module)[cfg.kernel_name]
    else:
        prev = drv.enter()  # the module is ptxforge's context's; the caller's is current again after
        try:
            src = source_of(cfg.module, drv.device_info().ptx_cap)
            handle = drv.check(drv.api().cuModuleLoadData(r.cubin), "cuModuleLoadData")
            lm = LoadedModule(handle, src, key=f"ptxas:{cfg.kernel_name}", jit_target="sm_90a", jit_log=r.log,
                              origin="ptxas", cubin=r.cubin)
        finally:
            drv.leave(prev)
        fn = lm[cfg.kernel_name]
        fn._loaded_module = lm  # keep the module alive as long as the function
    with _lock:
        _kernels[cfg] = fn
    return fn


#: encoded tensor maps a plan keeps per operand (one per buffer a loop cycles through), and packed argument
#: blocks per (A, B, C) address triple: a decode loop walks every layer's weights through the plan of their
#: shape, hundreds of buffers, and a miss (encoding a map and packing a block) costs about 20 us of host
#: time on the H200, several times the launch; 32 (the size before) made a loop over 50 weight buffers take
#: 27 us per call at M = 32, K = 1024 against 6 us (each entry ~0.4 KB)
_TMAP_CACHE = 1024


class HopperPlan:
    """One HopperGemm problem (M, N, K, splits, stream) resolved once; call it with operands to launch.

    Everything that does not depend on the operands' addresses is made here: the kernel, the
    grid, the split-K workspace and reduction, the biased path's row-sum buffers, and a tensor
    map template per operand.  ``plan(a, b, c)`` (or ``plan.launch_pointers(a_ptr, b_ptr, c_ptr)``)
    then only looks up the argument block packed for those addresses (made once per address
    triple, with each buffer's tensor map encoded once) and issues the launches: the row sums of
    A and B first (one launch) on the biased s4 path, the GEMM, the reduction when K is split.
    No allocation and no synchronization happen per call once the addresses have been seen, so a
    plan can be captured into a CUDA graph after a first call on the same buffers.  A split K's
    workspace and tile counters (`workspace`, `counters`) belong to the plan and serve one launch at
    a time: launches on its stream are ordered, and replays of a graph that holds it must be too.
    With epilogue='tma' (32-bit C) a C address that is 8- but not 16-byte aligned is launched on with
    the same problem's registers-epilogue plan, made at its first such launch and kept.
    """

    def __init__(self, cfg, m: int, n: int, k: int, *, sms: int | None = None, splits: int | None = None,
                 stream=None):
        from ...runtime import driver as drv
        from ...runtime.streams import stream_handle
        from .splitk import check_reduce, check_splits
        cfg.check_problem(m, n, k)
        splits = check_splits(splits)
        self.cfg, self.m, self.n, self.k = cfg, m, n, k
        self._swap = cfg.swap_ab
        km, kn = (n, m) if self._swap else (m, n)  # the kernel's M and N (swap_ab: B . A^T, stored transposed)
        self._km, self._kn = km, kn
        self.stream = stream_handle(stream) if stream is not None else 0
        self.row_bytes = k * cfg.bits // 8
        inner = self._operand_templates()
        self._maps = ({}, {}, {})
        self._seen: set = set()  # (slot, type, dtype) whose element type was checked
        self._kinds: set = set()  # (A shape, A dtype, B shape, B dtype, C shape, C dtype) checked whole, as read fast
        self._blobs: dict = {}  # the caller's (A, B, C) addresses -> the GEMM's argument block, packed once
        tiles_m, tiles_n, ktiles = cfg.tile_counts(km, kn, k)
        if sms is None:
            sms = drv.device_info().sm_count
        self.splits = self._splits(splits, sms, ktiles)
        # the C stores that suit rows of kn values, and the in-kernel reduction where K is split
        self.kernel_cfg = cfg.for_launch(kn, self.splits, m * n)
        check_reduce(self.kernel_cfg, self.splits, m * n)
        fused = self.kernel_cfg.reduces_in_kernel
        self.fn = load_kernel(self.kernel_cfg)
        self._grid(sms)
        self._c_map = cfg.epilogue == "tma"
        if self._c_map:  # (swap_ab is refused with it: km, kn are m, n here)
            from ...runtime import TensorMap
            cb = cfg.c_bytes
            # C (or the 'launch' reduction's workspace) as [splits, M, N]: a sub-tile never spills into the next
            self._tmpl += (TensorMap(cfg.c_type, 0, (n, m, 1 if fused else self.splits), (*cfg.store_box, 1),
                                     (cb * n, cb * m * n), swizzle=128),)
        self._split_buffers(fused, stream)
        self._row_sums(tiles_m, tiles_n, stream)
        # where the GEMM stores: C, or the 'launch' reduction's workspace
        self._workspace_ptr = self.workspace.ptr if self._reduce is not None else 0
        # epilogue='tma' into C itself (not the workspace) with 32-bit C: a C address that is not 16-byte aligned
        # (a slice of a larger array) is stored by this problem's registers-epilogue kernel (`_registers_plan`)
        self._sms = sms
        self._c_by_map = self._c_map and self._reduce is None and not cfg.c16
        self._registers = None
        # the alignment C's address needs: 4 where the reduction launch (single stores) writes it from the
        # workspace, else the widest store of the kernel that stores into it (16 for a 16-bit C's tensor map)
        if self._reduce is not None:
            self._c_align = 4
        elif self._c_by_map:
            self._c_align = self._registers_cfg().for_launch(kn, self.splits, m * n).c_store_bytes
        else:
            self._c_align = self.kernel_cfg.c_store_bytes
        self._scalars = (km, kn, k, self.splits, *(b.ptr for b in self.sums), *self._fused)
        # no row sums launch before the GEMM and no reduction launch after it (a kept block is all a call needs)
        self._one_launch = self._sums is None and self._reduce is None
        self._shapes = ((m, inner), (n, inner), (m, n))  # inner: elements per operand row as the arrays hold them

    def _operand_templates(self) -> int:
        """The tensor map templates of the kernel's A and B at a placeholder address (the map of a buffer is
        `with_base(ptr)`); returns the elements per operand row as the arrays hold them."""
        from ...runtime import TensorMap
        cfg = self.cfg
        la, lb = cfg.load_tiles
        box_a, box_b = cfg.load_boxes
        tdt = la.dtype
        inner = self.row_bytes // T_BYTES[tdt]
        l2 = cfg.l2_promotion
        self._tmpl = (TensorMap(tdt, 0, (inner, self._km), box_a, (self.row_bytes,), swizzle=128, l2_promotion=l2),
                      TensorMap(tdt, 0, (inner, self._kn), box_b, (self.row_bytes,), swizzle=128, l2_promotion=l2))
        return inner

    def _splits(self, splits, sms: int, ktiles: int) -> int:
        """How many ways K is split: as asked, or chosen for the shape (16-bit C without the in-kernel
        reduction: never, the second launch would add rounded partial sums)."""
        from .splitk import auto_splits, check_reduce, nonempty_splits
        cfg = self.cfg
        if cfg.c16 and not cfg.reduces_in_kernel:
            check_reduce(cfg, 1 if splits is None else int(splits))
            splits = 1
        elif splits is None:
            splits = auto_splits(cfg, self.m, self.n, self.k, sms)
        return nonempty_splits(ktiles, splits)

    def _grid(self, sms: int) -> None:
        """The persistent grid (whole clusters, no more than run at once) and how the GEMM's argument block is
        launched, chosen once (`_launch`): with the cluster shape, as a programmatic dependent launch, or plainly."""
        cfg, fn = self.cfg, self.fn
        cs = cfg.cluster_size
        units = cfg.cluster_tiles(self._km, self._kn) * self.splits
        self.grid = (cs * max(1, min(units, sms // cs)), 1, 1)  # whole clusters
        self._cfg = fn._config(self.grid, (cfg.threads, 1, 1), cfg.smem_bytes)
        if cs > 1:
            from ...runtime.cluster import cluster_launch_config
            cluster = cluster_launch_config(fn, self.grid, (cfg.threads, 1, 1), cfg.cluster,
                                            shared=cfg.smem_bytes, stream=self.stream, dependent=cfg.pdl)
            # a persistent grid of more clusters than fit at once would run its last ones after the others
            most = cluster.max_active_clusters()
            if 0 < most < self.grid[0] // cs:
                self.grid = (cs * most, 1, 1)
                self._cfg = fn._config(self.grid, (cfg.threads, 1, 1), cfg.smem_bytes)
                cluster = cluster_launch_config(fn, self.grid, (cfg.threads, 1, 1), cfg.cluster,
                                                shared=cfg.smem_bytes, stream=self.stream, dependent=cfg.pdl)
            self._launch = cluster.go  # (a cluster launch carries the dependent-launch attribute itself)
        elif cfg.pdl:
            from ...runtime.dependent import DependentLaunch
            self._launch = DependentLaunch(fn, self._cfg, self.stream).go
        else:
            from ...runtime.launch_ex import block_launcher
            self._launch = block_launcher(fn, self._cfg, self.stream)

    def _split_buffers(self, fused: bool, stream) -> None:
        """A K split's partial sums: the in-kernel reduction's workspace and tile counters (`fused`), or the
        'launch' reduction's workspace [splits, M, N] and its second launch."""
        from ...runtime import DeviceBuffer, load
        from ...runtime.kernel import _ArgBlob
        from .splitk import REDUCE_THREADS, reduce_module, workspace_bytes
        cfg, m, n = self.cfg, self.m, self.n
        self.workspace = None  # the partial sums of a K split (in the kernel's register order with `fused`)
        self.counters = None  # fused: a counter per tile, back at 0 after every launch
        self._reduce = None
        self._fused = ()
        if fused:
            nbytes, tiles = workspace_bytes(cfg, self._km, self._kn, self.splits)
            self.workspace = DeviceBuffer.empty((nbytes // 4,), np.int32)
            self.counters = DeviceBuffer.empty((tiles,), np.uint32)
            self.counters.fill_bytes(0, stream=stream)
            self._fused = (self.workspace.ptr, self.counters.ptr)
        elif self.splits > 1:
            self.workspace = DeviceBuffer.empty((self.splits, m, n), np.int32 if cfg.c_type == "s32" else np.float32)
            red = load(reduce_module(cfg.c_type))[f"splitk_reduce_{cfg.c_type}"]
            self._reduce = (red, red._config((-(-(m * n) // REDUCE_THREADS), 1, 1), (REDUCE_THREADS, 1, 1), 0),
                            _ArgBlob(red.layout))

    def _row_sums(self, tiles_m: int, tiles_n: int, stream) -> None:
        """The biased s4 path: the row sums of A and B (buffers padded to whole tiles, and with a cluster whole
        pairs: a CTA past the edge still reads its rows' sums) and the launch that computes them."""
        from ...runtime import DeviceBuffer, load
        from ...runtime.kernel import _ArgBlob
        cfg = self.cfg
        self.sums, self._sums = (), None
        if not cfg.biased:
            return
        from .convert import SUMS_ROWS_PER_CTA
        fn = load(cfg.sums_module)["biased_row_sums"]
        bufs = []
        for pad in (-(-tiles_m // cfg.cluster_m) * cfg.cluster_m * cfg.block_m,
                    -(-tiles_n // cfg.cluster_n) * cfg.cluster_n * cfg.block_n):
            buf = DeviceBuffer.empty((pad,), np.int32)
            buf.fill_bytes(0, stream=stream)  # rows past the matrix stay 0: the epilogue reads whole tiles
            bufs.append(buf)
        self.sums = tuple(bufs)
        blk = (32 * SUMS_ROWS_PER_CTA, 1, 1)
        ctas = -(-self._km // SUMS_ROWS_PER_CTA) - (-self._kn // SUMS_ROWS_PER_CTA)
        self._sums = (fn, fn._config((ctas, 1, 1), blk, 0), _ArgBlob(fn.layout))

    def _registers_cfg(self):
        """This plan's configuration with the registers epilogue (C stored from registers in value pairs)."""
        from dataclasses import replace
        return replace(self.cfg, epilogue="registers")

    def _registers_plan(self) -> "HopperPlan":
        """The plan of this problem with the registers epilogue, which stores into a C that is not 16-byte
        aligned (8-byte value pairs), made at the first such launch: its kernel loaded and, with a K split,
        its own workspace (so make that launch once before capturing a graph that holds one)."""
        with _registers_lock:
            if self._registers is None:
                from ...runtime import driver as drv
                prev = drv.enter()
                try:
                    self._registers = HopperPlan(self._registers_cfg(), self.m, self.n, self.k, sms=self._sms,
                                                 splits=self.splits, stream=self.stream)
                finally:
                    drv.leave(prev)
            return self._registers

    def kernel_name_for(self, c_ptr: int) -> str:
        """The name of the kernel a launch with C at `c_ptr` stores C with (nothing is loaded): this plan's,
        or with epilogue='tma' and a 32-bit C not 16-byte aligned, its registers-epilogue kernel's."""
        if self._c_by_map and c_ptr % 16:
            return self._registers_cfg().for_launch(self._kn, self.splits, self.m * self.n).kernel_name
        return self.kernel_cfg.kernel_name

    def __repr__(self) -> str:
        return (f"<HopperPlan {self.kernel_cfg.kernel_name} M={self.m} N={self.n} K={self.k} splits={self.splits} "
                f"grid={self.grid}>")

    def _map(self, which: int, ptr: int) -> bytes:
        maps = self._maps[which]
        blob = maps.get(ptr)
        if blob is None:
            blob = self._tmpl[which].with_base(ptr).encode()
            if len(maps) >= _TMAP_CACHE:
                maps.pop(next(iter(maps)))
            maps[ptr] = blob
        return blob

    def _filled(self, key: tuple, a_ptr: int, b_ptr: int, out: int):
        """The GEMM's argument block for these addresses (the kernel's A, B and C or workspace), packed
        once with their tensor maps and kept under `key`, the caller's (A, B, C) addresses (up to
        _TMAP_CACHE blocks): a repeated launch packs nothing."""
        from ...runtime.kernel import kept_blob
        values = (self._map(0, a_ptr), self._map(1, b_ptr), out) + self._scalars
        if self._c_map:  # epilogue='tma': C's (or the workspace's) tensor map comes last
            values += (self._map(2, out),)
        return kept_blob(self._blobs, key, self.fn.layout, values, _TMAP_CACHE)

    def misaligned(self, a_ptr: int, b_ptr: int, c_ptr: int) -> str | None:
        """Why these addresses of A, B and C cannot be launched on, or None: A and B need 16 bytes (their
        tensor maps), C what its stores need (16 for its tensor map, 8 for 8-byte value pairs, else 4)."""
        for what, ptr, need, why in (("A", a_ptr, 16, "its tensor map needs"), ("B", b_ptr, 16, "its tensor map needs"),
                                     ("C", c_ptr, self._c_align, "its tensor map needs" if self._c_align == 16 else
                                      f"the kernel's {self._c_align}-byte stores into it need")):
            if ptr % need:
                return f"{what} at 0x{ptr:x} is not {need}-byte aligned, as {why}"
        return None

    def launch_pointers(self, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """Launch on raw device addresses of A [M, K(/2)], B [N, K(/2)] and C [M, N] (unchecked but for a C whose
        bytes meet A's or B's, refused at the first launch on an address triple: see `misaligned` for what the
        addresses need; epilogue='tma' hands a C that is not 16-byte aligned to `_registers_plan`)."""
        key = (a_ptr, b_ptr, c_ptr)
        blob = self._blobs.get(key)
        if blob is not None and self._one_launch:  # the per-call path of a plan that launches the GEMM alone
            self._launch(blob)
            return
        if self._c_by_map and c_ptr % 16:
            (self._registers or self._registers_plan()).launch_pointers(a_ptr, b_ptr, c_ptr)
            return
        if blob is None:  # a first launch on these addresses: C's bytes must not be A's or B's
            check_device_out(c_ptr, self.m * self.n * self.cfg.c_bytes,
                             (("A", a_ptr, self.m * self.row_bytes), ("B", b_ptr, self.n * self.row_bytes)))
        s = self.stream
        if self._swap:
            a_ptr, b_ptr = b_ptr, a_ptr
        if self._sums is not None:
            fn, cfg_ab, sums_blob = self._sums
            fn._launch(cfg_ab, s, sums_blob, (a_ptr, self.sums[0].ptr, self._km, b_ptr, self.sums[1].ptr,
                                              self._kn, self.row_bytes))
        if blob is None:
            blob = self._filled(key, a_ptr, b_ptr, self._workspace_ptr or c_ptr)
        self._launch(blob)
        if self._reduce is not None:
            red, rcfg, rblob = self._reduce
            red._launch(rcfg, s, rblob, (self.workspace.ptr, c_ptr, self.m * self.n, self.splits))

    def __call__(self, a, b, c, stream=None):
        """Launch C = A . B^T on GPU operands of the planned shapes; returns `c`."""
        if stream is not None:
            from ...runtime.streams import stream_handle
            if stream_handle(stream) != self.stream:
                raise ValidationError("this plan launches on the stream it was made for; make a plan per stream")
        read = _reader.read
        ga, gb, gc = read(a), read(b), read(c)
        if ga is not None and gb is not None and gc is not None and \
                (ga[1], ga[2], gb[1], gb[2], gc[1], gc[2]) in self._kinds and \
                not (ga[0] % 16 or gb[0] % 16 or gc[0] % self._c_align):
            # operands of kinds (shapes, element types) this plan checked before: three reads and the launch
            self.launch_pointers(ga[0], gb[0], gc[0])
            return c
        pa, pb, pc = self._read(a, "A"), self._read(b, "B"), self._read(c, "C")
        if pa[1] != self._shapes[0] or pb[1] != self._shapes[1] or pc[1] != self._shapes[2]:
            for what, got, want in zip("ABC", (pa, pb, pc), self._shapes):
                if got[1] != want:
                    raise ValidationError(f"{what} has shape {tuple(got[1])}; this plan is for {want}")
        why = self.misaligned(pa[0], pb[0], pc[0])
        if why:
            raise ValidationError(why)
        self.launch_pointers(pa[0], pb[0], pc[0])
        if ga is None or gb is None or gc is None:  # first sight of a type: the careful reads taught the reader
            ga, gb, gc = read(a), read(b), read(c)
        if ga is not None and gb is not None and gc is not None and len(self._kinds) < 64:
            self._kinds.add((ga[1], ga[2], gb[1], gb[2], gc[1], gc[2]))
        return c

    def _read(self, x, what):
        """(address, shape) of an operand: through the fast reader for a (type, dtype) already checked
        for this slot, else through its array interface, checking its element type once."""
        got = _reader.read(x)
        if got is not None and (what, type(x), got[2]) in self._seen:
            return got
        v = gpu_view(x, what, self.stream)
        check_elems(self.cfg, [v if w == what else (0, (), accepted_elem(self.cfg, w)) for w in "ABC"])
        _reader.learn(x, v[0])
        got = _reader.read(x)
        if got is not None:
            self._seen.add((what, type(x), got[2]))
        return v


class Plan:
    """A prepared launch of one HopperGemm on fixed device operands: `launch()` is one pass of driver calls."""

    def __init__(self, cfg, a, b, c, *, k: int | None = None, sms: int | None = None,
                 splits: int | None = None, stream=None):
        from .splitk import check_splits
        check_splits(splits)  # (before the driver is asked about the operands)
        sh = 0 if stream is None else _stream_handle(stream)
        self._waits: list = []  # producer streams (array interface v3) each launch is ordered after
        views = tuple(gpu_view(x, what, sh, self._waits) for x, what in ((a, "A"), (b, "B"), (c, "C")))
        check_elems(cfg, views)
        (a_ptr, a_shape, _), (b_ptr, b_shape, _), (c_ptr, c_shape, _) = views
        if len(a_shape) != 2 or len(b_shape) != 2 or b_shape[1] != a_shape[1]:
            raise ValidationError(f"A [M, K{'/2' if cfg.bits == 4 else ''}] and B [N, same] must be 2-D with rows "
                                  f"of one length, got {a_shape} and {b_shape}")
        m, row_bytes = a_shape[0], a_shape[1] * (1 if cfg.operand in ("s8", "s4") else 2)
        n = b_shape[0]
        k = k_of_rows(cfg, row_bytes, k)
        cfg.check_problem(m, n, k)
        if c_shape != (m, n):
            raise ValidationError(f"C must be [{m}, {n}], got {c_shape}")
        self.plan = HopperPlan(cfg, m, n, k, sms=sms, splits=splits, stream=stream)
        why = self.plan.misaligned(a_ptr, b_ptr, c_ptr)
        if why:
            raise ValidationError(why)
        self.splits, self.grid = self.plan.splits, self.plan.grid
        self._ptrs = (a_ptr, b_ptr, c_ptr)
        self._keep = (a, b, c)  # the operands stay alive as long as the launch can run

    def launch(self) -> None:
        """Launch once (asynchronous on the plan's stream), after the operands' producer streams when they
        differ from it: the row sums first on the biased path."""
        if self._waits:
            from ...runtime.kernel import wait_for_streams
            wait_for_streams(self._waits, self.plan.stream)
        self.plan.launch_pointers(*self._ptrs)


T_BYTES = {"s8": 1, "u8": 1, "bf16": 2, "f16": 2}


def _stream_handle(stream) -> int:
    from ...runtime.streams import stream_handle
    return stream_handle(stream)


def prepare(cfg, a, b, c, **kw) -> Plan:
    """A Plan over device operands A [M, K(/2)], B [N, K(/2)] and C [M, N] (see Plan)."""
    return Plan(cfg, a, b, c, **kw)
