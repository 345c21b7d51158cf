"""Synchronization: bar/barrier (and bar.red), membar/fence, mbarrier, griddepcontrol, nanosleep."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_dst, check_pred, check_value, int_arg, int_or_val, make
from .operands import Discard, Imm, Reg, Symbol
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

FENCES = {
    "membar.cta": Requirement(), "membar.gl": Requirement(), "membar.sys": Requirement(),
    "fence.sc.cta": Requirement(), "fence.sc.gpu": Requirement(), "fence.sc.sys": Requirement(),
    "fence.acq_rel.cta": Requirement(), "fence.acq_rel.gpu": Requirement(), "fence.acq_rel.sys": Requirement(),
    "fence.sc.cluster": Requirement(90, V("7.8")), "fence.acq_rel.cluster": Requirement(90, V("7.8")),
    "fence.proxy.async": Requirement(90, V("8.0")),
    "fence.proxy.async.shared::cta": Requirement(90, V("8.0")),
    "fence.proxy.async.global": Requirement(90, V("8.0")),
    "fence.mbarrier_init.release.cluster": Requirement(90, V("8.0")),
    # the default semantics (.acq_rel) spelled by scope alone, and the cluster scope
    "fence.cta": Requirement(), "fence.gpu": Requirement(), "fence.sys": Requirement(),
    "fence.cluster": Requirement(90, V("7.8")),
    "fence.proxy.alias": Requirement(80, V("7.5")),
    "fence.proxy.async.shared::cluster": Requirement(90, V("8.0")),
    "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster": Requirement(90, V("8.6")),
    "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster": Requirement(90, V("8.6")),
    **{f"fence.proxy.tensormap::generic.release.{scope}": Requirement(90, V("8.3"))
       for scope in ("cta", "cluster", "gpu", "sys")},
    # one-sided fences, and their forms restricted to the shared memory of the cluster's CTAs: sm_90, PTX ISA 8.6
    # (nvJitLink 13 says so; the stand-alone ptxas 13.0 also takes the plain ones on sm_80 at any version)
    **{f"fence.{sem}.{scope}": Requirement(90, V("8.6"))
       for sem in ("acquire", "release") for scope in ("cta", "cluster", "gpu", "sys")},
    "fence.acquire.sync_restrict::shared::cluster.cluster": Requirement(90, V("8.6")),
    "fence.release.sync_restrict::shared::cta.cluster": Requirement(90, V("8.6")),
}

#: The fences that order memory accesses between threads, by name: (order, scope).  membar.cta / .gl / .sys are
#: fence.sc at cta / gpu / sys scope, and fence.<scope> is fence.acq_rel.<scope>; "sc" fences are also in one
#: total order; the one-sided fence.release orders the thread's earlier accesses before its later writes (the
#: release half) and fence.acquire its earlier reads before its later accesses (the acquire half).  Their
#: sync_restrict forms order shared memory of the cluster only and are not here.  (The interpreter's cross-CTA
#: ordering check and the weaken_memory_order mutant read it.)
ORDERING_FENCES = {"membar.cta": ("sc", "cta"), "membar.gl": ("sc", "gpu"), "membar.sys": ("sc", "sys"),
                   **{f"fence.{order}.{scope}": (order, scope) for order in ("sc", "acq_rel", "acquire", "release")
                      for scope in ("cta", "cluster", "gpu", "sys")},
                   **{f"fence.{scope}": ("acq_rel", scope) for scope in ("cta", "cluster", "gpu", "sys")}}

#: The proxy fences that order generic-proxy writes before async-proxy reads (TMA and bulk copies, wgmma), by name:
#: the state spaces whose writes they order.  fence.proxy.async without a state space covers them all; the
#: ::generic.release form orders generic writes of shared::cta before async reads; its ::generic.acquire twin
#: orders the other way (async-proxy writes before generic reads) and is not one of them.  (The interpreter's
#: "proxy" checks read it.)
PROXY_FENCES = {"fence.proxy.async": frozenset({"shared", "global"}),
                "fence.proxy.async.shared::cta": frozenset({"shared"}),
                "fence.proxy.async.shared::cluster": frozenset({"shared"}),
                "fence.proxy.async.global": frozenset({"global"}),
                "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster": frozenset({"shared"})}

#: Fences that name an address and a size: the acquire half of the tensormap proxy fence (sm_90,
#: PTX 8.3) orders a tensor map written through generic stores before the TMA unit reads its 128
#: bytes at [addr].  The release half (in `FENCES`) takes no operands.
FENCES_WITH_ADDRESS = {f"fence.proxy.tensormap::generic.acquire.{scope}": (Requirement(90, V("8.3")), 128)
                       for scope in ("cta", "cluster", "gpu", "sys")}


@dataclass(frozen=True)
class BarInfo:
    """Semantics of one CTA or warp barrier: kind (sync, arrive, warp), barrier id, thread count (None: the whole
    CTA) and whether it is the aligned ``bar`` form.
    """
    kind: str  # "sync" / "arrive" / "warp"
    id: object
    count: object = None
    aligned: bool = True  # bar.* is barrier.*.aligned: every thread of a warp executes the same barrier


def bar(kind, bid=0, count=None, aligned=True):
    """bar.sync/arrive (aligned) or barrier.sync/arrive (threads of a warp may reach it divergently)."""
    if kind not in ("sync", "arrive"):
        raise ValidationError(f"bar kind must be sync or arrive, got {kind!r}"
                              + ("; bar.red also needs a reduction (.popc/.and/.or), a destination and a "
                                 "predicate, which this constructor does not take" if kind == "red" else ""))
    if (n := int_arg(bid, "barrier id", ".u32")) is not None:
        if not 0 <= n <= 15:
            raise ValidationError(f"barrier id {n} is out of range: a CTA has barriers 0..15")
        bid = Imm(n)
    else:
        check_value(bid, T.u32, "barrier id", imm_ok=False)
    ops = [bid]
    if count is not None:
        if (n := int_arg(count, "barrier thread count", ".u32")) is not None:
            if n <= 0 or n % 32:
                raise ValidationError(f"barrier thread count {n} must be a positive multiple of 32 (warp size)")
            if n > 1024:
                raise ValidationError(f"barrier thread count {n} exceeds 1024 threads per CTA")
            count = Imm(n)
        else:
            check_value(count, T.u32, "barrier thread count", imm_ok=False)
        ops.append(count)
    elif kind == "arrive":
        raise ValidationError("bar.arrive needs a thread count (the number of threads that use the barrier)")
    return make("bar", ("bar" if aligned else "barrier", kind), ops, info=BarInfo(kind, bid, count, aligned),
                mods=(kind,) if aligned else (kind, "unaligned"))


#: bar.red: the reduction -> the type of its result (popc counts the threads whose predicate holds).
BAR_RED_OPS = {"popc": T.u32, "and": T.pred, "or": T.pred}


@dataclass(frozen=True)
class BarRedInfo:
    """A bar.red: the reduction, barrier id and thread count (as for bar.sync)."""

    op: str
    id: object
    count: object = None


def bar_red(op, d, bid, p, count=None):
    """bar.red.popc.u32 d, id{, count}, {!}p / bar.red.{and,or}.pred d, id{, count}, {!}p: a CTA barrier
    that also reduces one predicate per thread over the participating threads."""
    from .operands import NegPred
    if op not in BAR_RED_OPS:
        raise ValidationError(f"bar.red reduces with {', '.join(BAR_RED_OPS)}, not {op!r}")
    t = BAR_RED_OPS[op]
    if t is T.pred:
        check_pred(d, f"bar.red.{op} destination")
    else:
        check_dst(d, t, "bar.red.popc destination")
    probe = bar("sync", bid, count)  # the id and count rules of bar.sync
    check_pred(p.reg if isinstance(p, NegPred) else p, "bar.red predicate")
    ops = (d, *probe.operands, p)
    return make("bar.red", ("bar", "red", op, t.name), ops, n_dst=1, type=t,
                info=BarRedInfo(op, probe.info.id, probe.info.count), mods=(op,))


GRIDDEPCONTROL = ("launch_dependents", "wait")
REQ_GRIDDEP = Requirement(90, V("7.8"))


def griddepcontrol(action):
    """griddepcontrol.launch_dependents / .wait (sm_90): programmatic dependent launch."""
    if action not in GRIDDEPCONTROL:
        raise ValidationError(f"griddepcontrol is .launch_dependents or .wait, not {action!r}")
    return make("griddepcontrol", ("griddepcontrol", action), (), req=REQ_GRIDDEP, mods=(action,))


def bar_warp_sync(mask=0xFFFFFFFF):
    """Build `bar.warp.sync mask` (pure: no builder): the lanes of `mask` (an int or .b32 register) wait for each
    other.
    """
    if (n := int_arg(mask, "bar.warp.sync mask", ".b32")) is not None:
        if not 0 < n <= 0xFFFFFFFF:
            raise ValidationError(f"bar.warp.sync mask must be a non-zero 32-bit lane mask, got {n:#x}")
        mask = Imm(n)
    else:
        check_value(mask, T.b32, "bar.warp.sync mask", imm_ok=False)
    return make("bar.warp.sync", ("bar", "warp", "sync"), (mask,), info=BarInfo("warp", None, mask))


def fence(kind, addr=None):
    """Build a memory fence by its full PTX name (pure: no builder): one of `FENCES`, such as "membar.gl",
    "fence.sc.cta", "fence.proxy.async.shared::cta"; the name's requirement (sm, PTX ISA) comes with it.
    The fences of `FENCES_WITH_ADDRESS` (`fence.proxy.tensormap::generic.acquire.scope [addr], 128`)
    take `addr`, the generic address of the 128-byte tensor map.
    """
    if kind in FENCES_WITH_ADDRESS:
        req, size = FENCES_WITH_ADDRESS[kind]
        if addr is None:
            raise ValidationError(f"{kind} names the tensor map it orders: pass addr= (its generic address); "
                                  f"it is written {kind} [addr], {size}")
        a = check_addr(addr, "generic", kind)
        return make("fence", (kind,), (a, Imm(size)), req=req, info=kind, mods=tuple(kind.split(".")[1:]))
    if kind not in FENCES:
        raise ValidationError(f"unknown fence {kind!r}; one of: {', '.join(tuple(FENCES) + tuple(FENCES_WITH_ADDRESS))}")
    if addr is not None:
        raise ValidationError(f"{kind} takes no operands (only {', '.join(FENCES_WITH_ADDRESS)} name an address)")
    return make(kind.split(".")[0], (kind,), req=FENCES[kind], info=kind, mods=tuple(kind.split(".")[1:]))


# ---------------------------------------------------------------- mbarrier

REQ_MBAR = Requirement(80, V("7.0"))
REQ_MBAR_90 = Requirement(90, V("7.8"))
REQ_TX = Requirement(90, V("8.0"))


@dataclass(frozen=True)
class MbarInfo:
    """Semantics of one mbarrier instruction: the operation (init, arrive, arrive_expect_tx, expect_tx,
    test_wait, try_wait, inval) and, for waits, whether the phase is given as a parity.
    """
    op: str  # init, arrive, arrive_expect_tx, expect_tx, test_wait, try_wait, inval
    parity: bool = False
    no_complete: bool = False  # arrive / arrive_drop .noComplete: the arrival must not complete the phase
    relaxed: bool = False  # .relaxed: an arrival that releases nothing, a wait that acquires nothing
    scope: str = "cta"  # the scope it names (.cta when none is written)


#: the memory semantics mbarrier operations may name, with what each needs (ptxas 13.0): .release on
#: arrivals and .acquire on waits from PTX ISA 8.0 (sm_80), .relaxed on either from PTX 8.6 and sm_90;
#: expect_tx is always .relaxed (and needs what expect_tx needs)
_RELAXED_86 = Requirement(90, V("8.6"))
ARRIVE_SEMS = {"release": Requirement(80, V("8.0")), "relaxed": _RELAXED_86}
WAIT_SEMS = {"acquire": Requirement(80, V("8.0")), "relaxed": _RELAXED_86}
#: the scopes that go with them (.cluster: sm_90)
MBAR_SCOPES = {"cta": Requirement(80, V("8.0")), "cluster": Requirement(90, V("8.0"))}


def _sem_scope(what, sem, scope, sems, req):
    """The `.sem.scope` pair of an mbarrier operation (`sems`: the semantics it takes, with what each needs) as
    mnemonic parts, and `req` with what they need; (None, None) when neither is given.  ptxas takes a
    semantics only with a scope ("'.release' requires scope") and a scope only with a semantics."""
    if sem is None and scope is None:
        return (None, None), req
    if sem not in sems or scope not in MBAR_SCOPES:
        raise ValidationError(f"{what} names its memory semantics and scope together: sem one of "
                              f"{', '.join(sems)} and scope one of {', '.join(MBAR_SCOPES)}, got sem={sem!r}, "
                              f"scope={scope!r}")
    return (sem, scope), req.merge(sems[sem]).merge(MBAR_SCOPES[scope])


def _space(space, req):
    if space == "shared::cluster":  # a barrier of another CTA of the cluster (address from mapa)
        return req.merge(Requirement(90, V("8.0")))
    if space not in ("shared", "shared::cta"):
        raise ValidationError(f"mbarrier objects live in shared memory; space {space!r} is not legal")
    return req.merge(Requirement(80, V("7.8"))) if space == "shared::cta" else req


def mbarrier_init(addr, count, space="shared"):
    """Build `mbarrier.init.space.b64 [addr], count` (pure: no builder): set the expected arrival count (1 to
    2**20-1, an int or .u32 register) of the mbarrier at `addr`.
    """
    req = _space(space, REQ_MBAR)
    a = check_addr(addr, "shared", "mbarrier.init")
    _mbar_align_check(a, "mbarrier.init")
    if (n := int_arg(count, "mbarrier.init count", ".u32")) is not None:
        if not 1 <= n < (1 << 20):
            raise ValidationError(f"mbarrier.init count {n} is outside 1..{(1 << 20) - 1}")
        count = Imm(n)
    else:
        check_value(count, T.u32, "mbarrier.init count", imm_ok=False)
    return make("mbarrier.init", ("mbarrier", "init", space, "b64"), (a, count), req=req, info=MbarInfo("init"))


def _arrival_count(what, count, no_complete, req, ops):
    """Check an arrive / arrive_drop count (1 .. 2^20-1, an int or a .u32 register), append it to `ops` and return
    `req` with what a count needs: sm_90, unless the arrival is .noComplete (sm_80)."""
    if (n := int_arg(count, f"{what} count", ".u32")) is not None:
        if not 1 <= n < (1 << 20):
            raise ValidationError(f"{what} count {n} is outside 1..{(1 << 20) - 1}")
        count = Imm(n)
    else:
        check_value(count, T.u32, f"{what} count", imm_ok=False)
    ops.append(count)
    return req if no_complete else req.merge(REQ_MBAR_90)


def _check_no_complete(what, count, space, expect_tx=None):
    if count is None:
        raise ValidationError(f"{what}.noComplete needs a count of arrivals (ptxas: 'Illegal modifier "
                              "'.noComplete' ... without count argument')")
    if expect_tx is not None:
        raise ValidationError(f"{what}.noComplete takes no .expect_tx")
    if space == "shared::cluster":
        raise ValidationError(f"{what}.noComplete is for a barrier of this CTA: a .shared::cluster arrival is "
                              "at .cluster scope, which .noComplete does not combine with")


def mbarrier_arrive(state, addr, count=None, space="shared", expect_tx=None, release=False, no_complete=False,
                    sem=None, scope=None):
    """mbarrier.arrive{.noComplete}{.expect_tx}{.sem.scope}; state is a .b64 register or DISCARD (`_`).
    `no_complete`: an arrival of `count` that must not complete the phase (sm_80; its state token is what
    `mbarrier.pending_count` reads).  `sem` ('release' or 'relaxed') with `scope` ('cta' or 'cluster');
    `release=True` is sem='release' at the scope of the barrier's space (a .shared::cluster arrival names
    .release.cluster unless told otherwise)."""
    req = _space(space, REQ_MBAR)
    remote = space == "shared::cluster"
    if release or (remote and sem is None):
        if sem not in (None, "release"):
            raise ValidationError(f"mbarrier.arrive: release=True and sem={sem!r} disagree")
        sem, scope = "release", scope or ("cluster" if remote else "cta")
    if no_complete and sem == "relaxed":
        raise ValidationError("mbarrier.arrive.noComplete takes no .relaxed (ptxas: cannot be combined)")
    sem_scope, req = _sem_scope("mbarrier.arrive", sem, scope, ARRIVE_SEMS, req)
    if no_complete:
        _check_no_complete("mbarrier.arrive", count, space, expect_tx)
    a = check_addr(addr, "shared", "mbarrier.arrive")
    _mbar_align_check(a, "mbarrier.arrive")
    if isinstance(state, Discard):  # the sink `_`: ptxas 13 takes it from PTX 7.1 on (7.0 refuses it)
        req = req.merge(Requirement(80, V("7.1")))
        n_dst = 1
    elif space == "shared::cluster":
        raise ValidationError("mbarrier.arrive on a .shared::cluster barrier returns no state: its destination "
                              "must be '_' (ptxas: \"Sink '_' is expected\")")
    else:
        check_dst(state, T.b64, "mbarrier.arrive state")
        n_dst = 1
    ops = [state, a]
    op = "arrive"
    if expect_tx is not None:
        req = req.merge(REQ_TX)
        op = "arrive_expect_tx"
        if (n := int_arg(expect_tx, "mbarrier.arrive.expect_tx bytes", ".u32")) is not None:
            if not 0 <= n < (1 << 20):
                raise ValidationError(f"expect_tx byte count {n} is outside 0..{(1 << 20) - 1}")
            expect_tx = Imm(n)
        else:
            check_value(expect_tx, T.u32, "mbarrier.arrive.expect_tx bytes", imm_ok=False)
        ops.append(expect_tx)
    elif count is not None:
        req = _arrival_count("mbarrier.arrive", count, no_complete, req, ops)
    parts = ("mbarrier", "arrive", "noComplete" if no_complete else None,
             "expect_tx" if expect_tx is not None else None, *sem_scope, space, "b64")
    return make("mbarrier.arrive", parts, ops, n_dst=n_dst, req=req,
                info=MbarInfo(op, no_complete=no_complete, relaxed=sem == "relaxed", scope=scope or "cta"))


def _mbar_align_check(a, what):
    """An mbarrier is an 8-byte object: a shared variable holding one must be 8-byte aligned, and a
    constant offset must keep it so (ptxas accepts less; the access faults at run time)."""
    base = getattr(a, "base", None)
    if isinstance(base, Symbol) and (base.align % 8 or a.offset % 8):
        raise ValidationError(f"{what}: an mbarrier is an 8-byte object and needs 8-byte alignment; "
                              f"{base.name} is aligned to {base.align}" + (f" and the offset is {a.offset}"
                                                                          if a.offset % 8 else "")
                              + " (declare it with align=8 or more)")
    if isinstance(base, Reg) and a.offset % 8:
        raise ValidationError(f"{what}: an mbarrier is 8-byte aligned; the constant offset {a.offset} breaks that")


TX_MAX = (1 << 20) - 1  # the transaction count of an mbarrier phase is a 20-bit field


def mbarrier_expect_tx(addr, nbytes, space="shared::cta", scope="cta"):
    """Build `mbarrier.expect_tx.relaxed.scope.space.b64 [addr], nbytes` (pure: no builder; sm_90): add `nbytes`
    to the transaction count the current phase waits for (scope 'cta' or 'cluster').
    """
    sem_scope, req = _sem_scope("mbarrier.expect_tx", "relaxed", scope, {"relaxed": REQ_TX}, _space(space, REQ_TX))
    a = check_addr(addr, "shared", "mbarrier.expect_tx")
    _mbar_align_check(a, "mbarrier.expect_tx")
    if (n := int_arg(nbytes, "mbarrier.expect_tx bytes", ".u32")) is not None:
        if not 0 <= n <= TX_MAX:
            raise ValidationError(f"mbarrier.expect_tx byte count {n} is outside 0..{TX_MAX} "
                                  "(the transaction count is a 20-bit field)")
        nbytes = Imm(n)
    else:
        check_value(nbytes, T.u32, "mbarrier.expect_tx bytes", imm_ok=False)
    return make("mbarrier.expect_tx", ("mbarrier", "expect_tx", *sem_scope, space, "b64"), (a, nbytes),
                req=req, info=MbarInfo("expect_tx", scope=scope))


def mbarrier_wait(kind, p, addr, phase, parity=True, space=None, suspend_ns=None, sem=None, scope=None):
    """test_wait (sm_80, non-blocking) or try_wait (sm_90, potentially blocking).

    `suspend_ns` (try_wait only): the suspendTimeHint operand, the most nanoseconds the thread
    may be suspended waiting before try_wait returns false.  `sem` ('acquire' or 'relaxed') with `scope`
    ('cta' or 'cluster'): `.sem.scope` written out (without them the wait is .acquire.cta).
    """
    if kind not in ("test_wait", "try_wait"):
        raise ValidationError(f"mbarrier wait is test_wait or try_wait, got {kind!r}")
    base = REQ_MBAR if kind == "test_wait" else REQ_MBAR_90
    if parity and kind == "test_wait":
        base = base.merge(Requirement(80, V("7.1")))
    space = space or ("shared" if kind == "test_wait" else "shared::cta")
    sem_scope, req = _sem_scope(f"mbarrier.{kind}", sem, scope, WAIT_SEMS, _space(space, base))
    check_pred(p, f"mbarrier.{kind} result")
    a = check_addr(addr, "shared", f"mbarrier.{kind}")
    _mbar_align_check(a, f"mbarrier.{kind}")
    if parity:
        if (n := int_arg(phase, "phase parity", ".u32")) is not None:
            if n not in (0, 1):
                raise ValidationError(f"mbarrier.{kind}.parity takes a phase parity of 0 or 1, got {n}")
            phase = Imm(n)
        else:
            check_value(phase, T.u32, "phase parity")
    else:
        check_value(phase, T.b64, "mbarrier state token", imm_ok=False)
    ops = [p, a, phase]
    if suspend_ns is not None:
        if kind != "try_wait":
            raise ValidationError("only mbarrier.try_wait takes a suspend-time hint")
        if (n := int_arg(suspend_ns, "suspend-time hint", ".u32")) is not None:
            if not 0 < n < (1 << 32):
                raise ValidationError(f"suspend-time hint must be in 1..2^32-1 ns, got {n}")
            suspend_ns = Imm(n)
        else:
            check_value(suspend_ns, T.u32, "suspend-time hint", imm_ok=False)
        ops.append(suspend_ns)
    return make(f"mbarrier.{kind}", ("mbarrier", kind, "parity" if parity else None, *sem_scope, space, "b64"),
                tuple(ops), n_dst=1, req=req,
                info=MbarInfo(kind, parity, relaxed=sem == "relaxed", scope=scope or "cta"))


def mbarrier_complete_tx(addr, nbytes, space="shared::cta"):
    """mbarrier.complete_tx.relaxed.cta.space.b64 [a], n (sm_90): count n transaction bytes as done."""
    a = check_addr(addr, "shared", "mbarrier.complete_tx")
    if (n := int_arg(nbytes, "mbarrier.complete_tx bytes", ".u32")) is not None:
        if not 0 <= n < (1 << 20):
            raise ValidationError(f"mbarrier.complete_tx byte count {n} is outside 0..{(1 << 20) - 1}")
        nbytes = Imm(n)
    else:
        check_value(nbytes, T.u32, "mbarrier.complete_tx bytes", imm_ok=False)
    return make("mbarrier.complete_tx", ("mbarrier", "complete_tx", "relaxed", "cta", space, "b64"), (a, nbytes),
                req=_space(space, REQ_TX), info=MbarInfo("complete_tx"))


def mbarrier_arrive_drop(state, addr, count=None, space="shared", no_complete=False):
    """mbarrier.arrive_drop{.noComplete}.space.b64 state, [a]{, count}: arrive and lower the expected arrival
    count of this and every later phase (a thread leaving the pipeline); a count needs sm_90, unless
    `no_complete` (an arrival that must not complete the phase, sm_80)."""
    req = _space(space, REQ_MBAR)
    if no_complete:
        _check_no_complete("mbarrier.arrive_drop", count, space)
    a = check_addr(addr, "shared", "mbarrier.arrive_drop")
    if not isinstance(state, Discard):  # the sink `_` needs nothing more (ptxas 13 takes it at PTX 7.0)
        check_dst(state, T.b64, "mbarrier.arrive_drop state")
    ops = [state, a]
    if count is not None:
        req = _arrival_count("mbarrier.arrive_drop", count, no_complete, req, ops)
    parts = ("mbarrier", "arrive_drop", "noComplete" if no_complete else None, space, "b64")
    return make("mbarrier.arrive_drop", parts, ops, n_dst=1, req=req,
                info=MbarInfo("arrive_drop", no_complete=no_complete))


def mbarrier_pending_count(d, state):
    """mbarrier.pending_count.b64 d, state: the arrivals the barrier still expected before the arrive-on that
    gave `state` (which must come from an arrive.noComplete or arrive_drop.noComplete)."""
    check_dst(d, T.u32, "mbarrier.pending_count destination")
    check_value(state, T.b64, "mbarrier state token", imm_ok=False)
    return make("mbarrier.pending_count", ("mbarrier", "pending_count", "b64"), (d, state), n_dst=1, req=REQ_MBAR,
                info=MbarInfo("pending_count"))


def mbarrier_inval(addr, space="shared"):
    """Build `mbarrier.inval.space.b64 [addr]` (pure: no builder): invalidate the mbarrier so its memory can be
    reused.
    """
    a = check_addr(addr, "shared", "mbarrier.inval")
    _mbar_align_check(a, "mbarrier.inval")
    return make("mbarrier.inval", ("mbarrier", "inval", space, "b64"), (a,), req=_space(space, REQ_MBAR),
                info=MbarInfo("inval"))


#: nanosleep's duration is a u32 count of nanoseconds; the hardware caps the sleep at 1 ms anyway.
NANOSLEEP_MAX = 0xFFFFFFFF


def nanosleep(ns):
    """nanosleep.u32 t: suspend the thread for about t nanoseconds (a .u32 register or an immediate)."""
    if (n := int_arg(ns, "nanosleep", ".u32")) is not None:
        if not 0 <= n <= NANOSLEEP_MAX:
            raise ValidationError(f"nanosleep takes 0..{NANOSLEEP_MAX} nanoseconds (.u32), got {n}")
        ns = Imm(n)
    else:
        check_value(ns, T.u32, "nanosleep")
    return make("nanosleep", ("nanosleep", "u32"), (ns,), req=Requirement(80, V("7.0")))


#: Spellings PTX gives one barrier: bar.sync is barrier.sync.aligned (and so on).
BARRIER_SPELLINGS = {"barrier.sync.aligned": "bar.sync", "barrier.arrive.aligned": "bar.arrive",
                     "bar.sync.aligned": "bar.sync", "bar.arrive.aligned": "bar.arrive"}


class SyncOps:
    """Builder methods for CTA and warp barriers, memory fences, mbarriers and nanosleep."""
    def bar_sync(self, bid=0, count=None, *, aligned=True, pred=None):
        """CTA barrier `bar.sync id{, count}`; every thread named must reach it.

        `aligned=False` emits `barrier.sync`, which the threads of a warp may reach at different points.
        """
        self.emit(bar("sync", int_or_val(self._val, bid, "barrier id"),
                      int_or_val(self._val, count, "barrier thread count"), aligned), pred)

    def bar_arrive(self, bid, count, *, aligned=True, pred=None):
        """`bar.arrive id, count` (or `barrier.arrive` when not `aligned`): signal barrier `bid` without waiting.

        Args:
            bid: the barrier id, 0..15 (int or register).
            count: the number of threads the barrier waits for (a multiple of 32).
            aligned: emit ``bar`` (all threads of a warp execute it together) rather than ``barrier``.
            pred: a .pred register guarding it.
        """
        self.emit(bar("arrive", int_or_val(self._val, bid, "barrier id"),
                      int_or_val(self._val, count, "barrier thread count"), aligned), pred)

    def barrier_sync(self, bid=0, count=None, *, pred=None):
        """`barrier.sync id{, count}`: the non-aligned barrier (bar_sync(aligned=False))."""
        self.bar_sync(bid, count, aligned=False, pred=pred)

    def bar_warp_sync(self, mask=0xFFFFFFFF, *, pred=None):
        """`bar.warp.sync mask`: the lanes named in `mask` (default all 32) wait for each other and their memory
        accesses are ordered.
        """
        self.emit(bar_warp_sync(int_or_val(self._val, mask, "bar.warp.sync mask", ".b32")), pred)

    def fence(self, kind="fence.acq_rel.gpu", *, addr=None, offset=0, pred=None):
        """membar/fence by full name: 'membar.gl', 'fence.sc.cta', 'fence.proxy.async.shared::cta' ...;
        `fence.proxy.tensormap::generic.acquire.<scope>` takes `addr`, the generic address of the tensor
        map (rendered `[addr], 128`)."""
        self.emit(fence(kind, None if addr is None else self._addr(addr, offset)), pred)

    def membar(self, level="gl", *, pred=None):
        """`membar.level`: order this thread's memory accesses at `level` ("cta", "gl" or "sys")."""
        self.emit(fence(f"membar.{level}"), pred)

    def mbarrier_init(self, addr, count, *, space="shared", pred=None):
        """`mbarrier.init.shared.b64 [addr], count`: initialize the mbarrier at `addr` (a shared address) to
        expect `count` arrivals per phase.

        Args:
            addr: the shared address of the 8-byte mbarrier.
            count: arrivals per phase, 1 to 2**20-1 (int or .u32 register).
            space: "shared" or "shared::cta" (PTX 7.8).
            pred: a .pred register guarding it (usually one thread initializes).
        """
        self.emit(mbarrier_init(self._addr(addr), int_or_val(self._val, count, "mbarrier.init count"), space), pred)

    def mbarrier_arrive(self, addr, *, count=None, expect_tx=None, space="shared", state=None, release=False,
                        no_complete=False, sem=None, scope=None, pred=None):
        """Arrive on an mbarrier; returns the phase-token register (or None when discarded with state='_').
        `no_complete=True` (with a `count`): `.noComplete`, an arrival that must not complete the phase, whose
        token `mbarrier_pending_count` reads.  `sem` ('release'; 'relaxed': sm_90, PTX 8.6, an arrival that
        orders no memory) with `scope` ('cta' or 'cluster') writes `.sem.scope` out; `release=True` is
        sem='release' at the barrier's scope."""
        from .operands import DISCARD
        if state == "_" or (state is None and (expect_tx is not None or space == "shared::cluster")):
            st = DISCARD
        else:
            st = self._dst(state, T.b64)
        count = int_or_val(self._val, count, "mbarrier.arrive count")
        expect_tx = int_or_val(self._val, expect_tx, "mbarrier.arrive.expect_tx bytes")
        self.emit(mbarrier_arrive(st, self._addr(addr), count, space, expect_tx, release, no_complete, sem, scope),
                  pred)
        return None if st is DISCARD else st

    def mbarrier_expect_tx(self, addr, nbytes, *, scope="cta", pred=None):
        """`mbarrier.expect_tx.relaxed.scope.shared::cta.b64 [addr], nbytes` (sm_90): make the current phase also
        wait for `nbytes` bytes of bulk/TMA transactions (scope 'cta' or 'cluster').
        """
        self.emit(mbarrier_expect_tx(self._addr(addr), int_or_val(self._val, nbytes, "mbarrier.expect_tx bytes"),
                                     scope=scope), pred)

    def mbarrier_test_wait(self, addr, phase, *, parity=True, sem=None, scope=None, dst=None, pred=None):
        """`mbarrier.test_wait{.parity}.shared.b64 p, [addr], phase`: a non-blocking test of whether the phase
        completed; returns the .pred p.

        Args:
            addr: the mbarrier's shared address.
            phase: with `parity`, the phase parity 0 or 1 (int or .u32 register); otherwise the .b64 state
                token `mbarrier_arrive` returned.
            parity: use the ``.parity`` form (PTX 7.1).
            sem, scope: `.sem.scope` written out: 'acquire' (PTX 8.0) or 'relaxed' (sm_90, PTX 8.6: a wait
                that orders no memory) with 'cta' or 'cluster'; without them the wait is .acquire.cta.
            dst: a .pred register to write instead of a new one.
            pred: a .pred register guarding it.
        """
        p = self._dst(dst, T.pred)
        self.emit(mbarrier_wait("test_wait", p, self._addr(addr), int_or_val(self._val, phase, "phase parity"),
                                parity, sem=sem, scope=scope), pred)
        return p

    def mbarrier_try_wait(self, addr, phase, *, parity=True, suspend_ns=None, sem=None, scope=None, dst=None,
                          pred=None):
        """mbarrier.try_wait{.parity} (sm_90): a predicate, true once the phase has completed.

        `suspend_ns` adds the suspendTimeHint operand (an int or .u32 register); `sem` and `scope` as for
        `mbarrier_test_wait`.
        """
        p = self._dst(dst, T.pred)
        self.emit(mbarrier_wait("try_wait", p, self._addr(addr), int_or_val(self._val, phase, "phase parity"), parity,
                                suspend_ns=int_or_val(self._val, suspend_ns, "suspend-time hint"), sem=sem,
                                scope=scope), pred)
        return p

    def mbarrier_complete_tx(self, addr, nbytes, *, pred=None):
        """`mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [addr], nbytes` (sm_90): mark `nbytes`
        transaction bytes of the current phase complete, as an async copy would."""
        self.emit(mbarrier_complete_tx(self._addr(addr), int_or_val(self._val, nbytes, "mbarrier.complete_tx bytes")),
                  pred)

    def mbarrier_arrive_drop(self, addr, *, count=None, space="shared", state=None, no_complete=False, pred=None):
        """`mbarrier.arrive_drop{.noComplete}.shared.b64 state, [addr]{, count}`: arrive, and expect one (or
        `count`) fewer arrival in this and every later phase.  Returns the state token (None with
        state='_')."""
        from .operands import DISCARD
        st = DISCARD if state == "_" else self._dst(state, T.b64)
        count = int_or_val(self._val, count, "mbarrier.arrive_drop count")
        self.emit(mbarrier_arrive_drop(st, self._addr(addr), count, space, no_complete), pred)
        return None if st is DISCARD else st

    def mbarrier_pending_count(self, state, *, dst=None, pred=None):
        """`mbarrier.pending_count.b64 d, state`: the arrivals still pending when `state` was taken."""
        d = self._dst(dst, T.u32)
        self.emit(mbarrier_pending_count(d, self._val(state)), pred)
        return d

    def bar_red(self, op, p, bid=0, count=None, *, dst=None, pred=None):
        """`bar.red.popc.u32` / `bar.red.{and,or}.pred d, id{, count}, {!}p`: wait at CTA barrier `bid`
        like bar_sync and reduce predicate `p` over the threads: popc counts where it holds (a .u32),
        and/or combine it (a .pred)."""
        from .operands import NegPred
        d = self._dst(dst, BAR_RED_OPS[op] if op in BAR_RED_OPS else T.u32)
        g = self._guard(p)
        q = NegPred(g.reg) if g.negate else g.reg
        self.emit(bar_red(op, d, int_or_val(self._val, bid, "barrier id"), q,
                          int_or_val(self._val, count, "barrier thread count")), pred)
        return d

    def griddepcontrol(self, action, *, pred=None):
        """`griddepcontrol.launch_dependents` (let a dependent grid start) or `griddepcontrol.wait`
        (wait until the grids this one depends on have completed and their memory is visible); sm_90."""
        self.emit(griddepcontrol(action), pred)

    def mbarrier_wait(self, addr, phase):
        """Spin until phase `phase` (0/1 parity) of the mbarrier completes.

        Uses try_wait on sm_90+ and test_wait on older targets.
        """
        kind = "try_wait" if self.target.sm >= 90 else "test_wait"
        lbl = self.label("mbar_wait")
        self.place(lbl)
        p = self.reg(T.pred)
        self.emit(mbarrier_wait(kind, p, self._addr(addr), int_or_val(self._val, phase, "phase parity"), True))
        self.bra(lbl, pred=~p)

    def mbarrier_inval(self, addr, *, pred=None):
        """`mbarrier.inval.shared.b64 [addr]`: invalidate the mbarrier before its shared memory is reused."""
        self.emit(mbarrier_inval(self._addr(addr)), pred)

    def nanosleep(self, ns, *, pred=None):
        """`nanosleep.u32 t`: suspend the thread for about `t` nanoseconds (a .u32 register or an int)."""
        self.emit(nanosleep(int_or_val(self._val, ns, "nanosleep")), pred)
