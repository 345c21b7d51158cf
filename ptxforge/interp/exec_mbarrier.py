"""mbarrier: init, arrive (with count or expect_tx), arrive_drop, expect_tx, complete_tx, test_wait /
try_wait (parity or state token; a suspend-time hint changes nothing here), inval, and the
asynchronous completions that target a barrier.  arrive_drop also lowers the expected count of
every later phase; complete_tx counts bytes done as a copy would.

An mbarrier is modelled by its state, not its 8 bytes: expected arrivals, pending arrivals,
transaction bytes and the number of completed phases.  A phase completes when pending arrivals
and the transaction count both reach zero.  `test_wait`/`try_wait` with parity `q` succeed
when the phase of parity `q` has completed (the current phase has the other parity); with a
state token, when the phase the token was taken in has completed.  A thread whose wait fails
is parked until the barrier completes a phase.  Completing a phase orders the accesses the arriving
threads made before their arrivals (a .relaxed one's: before the fence that let it release, or only the
mbarrier inits before a fence.mbarrier_init: `mbarriers.releasing`), not those they made after it while the
phase was still filling, before the accesses of the threads that observe the completion (a wait that passes
on it) after they observe it; an arrival alone acquires nothing.

Asynchronous completions (cp.async.mbarrier.arrive, bulk copies) queue on the barrier and are
delivered when a thread polls it: the copies land then, as late as the memory model allows.

State tokens: the phase the arrival was in (the low 32 bits); an arrive.noComplete /
arrive_drop.noComplete also records the arrivals still pending before it (bits 32..61, which
mbarrier.pending_count returns, as the PTX ISA defines it) and sets bit 63.  pending_count of any
other token, and a .noComplete arrival that completes the phase, are findings: PTX leaves both
undefined.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .access import Part, shadow_write, where_shared
from .exec_async import land_before, land_rows
from .exec_memory import address_reader
from .findings import InterpUnsupported
from .mbarriers import defer_acquire, mbar_lookup, on_init, released_inits, releasing

_PTXFORGE_INTERNAL = True


#: `MBar.seen` of a thread that has not passed a parity wait on the barrier yet
_NEVER = -(1 << 40)
#: the state-token bit that marks a token of a .noComplete arrival (which carries a pending count)
_NO_COMPLETE_TOKEN = np.uint64(1 << 63)
_PHASE_BITS = np.uint64(0xFFFF_FFFF)


def _tokens(state, kthr, counts, no_complete):
    """The state tokens of threads `kthr` arriving with `counts` (in thread order) on `state`, before they arrive."""
    tok = np.full(len(kthr), state.phase, dtype=np.uint64)
    if no_complete:
        prior = state.pending - (np.cumsum(counts) - counts)  # each thread's arrival sees those before it
        tok |= (np.maximum(prior, 0).astype(np.uint64) << np.uint64(32)) | _NO_COMPLETE_TOKEN
    return tok


def _check_no_complete(S, op, state, kthr, counts):
    """A .noComplete arrival must not be the one that completes the phase (PTX leaves that undefined)."""
    if state.pending - int(np.sum(counts)) <= 0 and state.tx <= 0:
        S.report("barrier", f"an arrive with .noComplete completes the phase ({state.pending} arrivals were pending, "
                            f"{int(np.sum(counts))} arrive): undefined in PTX, arrive without .noComplete", op, kthr)


class MBar:
    """The state of one mbarrier in the interpreter: expected and pending arrivals, the transaction count,
    completed phases, the threads that arrived in the current phase, queued asynchronous completions and the
    members of recent phases (for race checking).
    """
    __slots__ = ("count", "pending", "tx", "phase", "released", "inits", "queue", "phase_members", "key", "tx_pc",
                 "seen")

    def __init__(self, key, count, N):
        self.key = key
        self.count = count
        self.pending = count
        self.tx = 0
        self.phase = 0  # completed phases
        self.released = np.full(N, -1, dtype=np.int64)  # per arriving thread: its accesses before this step join
        self.inits = None  # per arriving thread: its mbarrier inits before this step join too (None: nobody's)
        self.queue = []  # ("arrive", step, mask) / ("bulk", step, record, nbytes): async completions
        self.phase_members = {}  # completed phase index -> participant mask (observers join it)
        self.tx_pc = -1  # the last instruction that announced transaction bytes
        self.seen = np.full(N, _NEVER, dtype=np.int64)  # per thread: the last phase its parity waits observed


def _complete(S, state):
    state.phase += 1
    state.pending = state.count
    S.step += 1
    arrived = state.released >= 0
    inits = None
    if state.inits is not None:
        by_init = np.flatnonzero(state.inits >= 0)
        inits = released_inits(S, by_init, state.inits[by_init])
        state.inits = None
    groups = np.full(S.N, -1, dtype=np.int64)  # who acquires: the threads that observe the phase, as they do
    S.sync_event(None, groups=groups, cut=(np.flatnonzero(arrived), state.released[arrived], inits))
    state.phase_members[state.phase - 1] = groups
    for old in [p for p in state.phase_members if p < state.phase - 2]:
        del state.phase_members[old]
    state.released = np.full(S.N, -1, dtype=np.int64)
    S.parked &= ~(S.park_key == state.key)
    S.mbar_epoch += 1


def _join(state, thr, before, inits=None) -> None:
    """Threads `thr` take part in the barrier's current phase with their accesses before step(s) `before`, and
    with their mbarrier inits before step(s) `inits` (when given: `mbarriers.releasing`)."""
    state.released[thr] = np.maximum(state.released[thr], before)
    if inits is not None:
        if state.inits is None:
            state.inits = np.full(len(state.released), -1, dtype=np.int64)
        state.inits[thr] = np.maximum(state.inits[thr], inits)


def _arrive(S, op, state, thr, n, releasers=None):
    """Threads `thr` arrive (n arrivals) now, releasing their accesses so far; `releasers`, when given, the
    (threads, fence steps, init-fence steps) of them whose arrival releases the accesses before that fence
    (a relaxed arrival releases only after a fence: `mbarriers.releasing`)."""
    state.pending -= n
    _join(state, *((thr, S.step) if releasers is None else releasers))
    S.mbar_epoch += 1
    if state.pending < 0:
        S.report("barrier", f"more arrivals than the mbarrier expects ({state.count} per phase)", op, thr)
        state.pending = 0
    _maybe_complete(S, state)


def _maybe_complete(S, state):
    """Complete the phase once its arrivals are all in and its transaction count is back to zero.  A count below
    zero then means the copies brought more bytes than expect_tx announced: on the GPU the phase completes as
    the count passes zero, before the rest has landed, and those bytes count against the next phase.  That is
    a finding (at the instruction that announced the bytes); the phase completes here all the same."""
    if state.pending == 0 and state.tx <= 0:
        if state.tx < 0:
            who = S.prog.instructions[state.tx_pc] if state.tx_pc >= 0 else None
            S.report("barrier", f"the copies completed {-state.tx} transaction bytes more than expect_tx announced "
                     f"for this phase of the mbarrier at {where_shared(S, state.key)}: on the GPU the phase "
                     "completes when the count reaches zero, before the rest has landed, and the surplus counts "
                     "against the next phase (announce every byte the phase's copies bring)",
                     _Announcer(state.tx_pc, who) if who is not None else None)
        _complete(S, state)


class _Announcer:
    """The instruction that last announced transaction bytes, as a finding's `op` (its pc and instruction)."""
    __slots__ = ("pc", "ins")

    def __init__(self, pc, ins):
        self.pc, self.ins = pc, ins


def flush(S, state):
    """Deliver the barrier's asynchronous completions (copies land, async arrivals count)."""
    if not state.queue:
        return False
    queue, state.queue = state.queue, []
    for item in queue:
        if item[0] == "arrive":
            _, time, mask = item
            land_before(S, mask, time)
            state.pending -= int(np.count_nonzero(mask))
            _join(state, np.flatnonzero(mask), S.step + 1)  # (the copies landed at this step)
        else:
            _, time, rec, nbytes = item
            _join(state, rec.thr, S.step + 1)  # the issuers take part, with what lands now (before rec empties)
            land_rows(S, rec, np.ones(len(rec.thr), dtype=bool))
            state.tx -= nbytes
        S.mbar_epoch += 1
        if state.pending < 0:
            state.pending = 0
        _maybe_complete(S, state)
    return True


def _check_skips(S, op, state, thr, observed) -> None:
    """A parity wait names a phase only up to parity: a thread that passes one on phase p without having
    observed phase p - 1 could as well have passed on phase p - 2 had p - 1 still been filling (two uses
    of a ring slot apart, e.g. two consumers taking turns on an odd number of slots).  Reported as a
    barrier finding; the thread's last observed phase is kept per barrier."""
    prev = state.seen[thr]
    skip = (prev != _NEVER) & (observed > prev + 1)
    if skip.any():
        p, q = int(prev[skip][0]), int(observed[skip][0])
        S.report("barrier", f"parity wait passed on phase {q} of this mbarrier, but the thread's previous wait "
                 f"on it observed phase {p}: a parity names a phase only up to 2, so had phase {q - 1} still "
                 f"been filling the wait would have passed on phase {q - 2} (give each waiter every phase of "
                 f"its barriers, e.g. an even number of ring slots for two consumers taking turns)",
                 op, thr[skip])
    state.seen[thr] = np.maximum(prev, observed)


def _make_init(P, op, ins, get_addr):
    """`mbarrier.init`: a barrier expecting `count` arrivals per phase (a shadow write of its 8 bytes)."""
    get_count = P.reader(ins.operands[1], T.u32, ins)

    def init(S, m):
        thr = np.flatnonzero(m)
        counts = np.broadcast_to(np.asarray(get_count(S)).astype(np.int64), (S.N,))
        for key, kthr, _, part, sel in mbar_lookup(S, op, get_addr(S)[thr], thr, init=True):
            shadow_write(S, op, Part("shared", part.sel[sel][:1], part.off[sel][:1], kthr[:1]), 8, pc=op.pc)
            on_init(S, kthr[:1])  # (the one write the shadow keeps, which a fence.mbarrier_init may release)
            S.mbars[key] = MBar(key, int(counts[kthr[0]]), S.N)
            S.mbar_epoch += 1
    return init


def _make_inval(P, op, ins, get_addr):
    """`mbarrier.inval`: the barrier forgotten (a later use is a finding)."""
    def inval(S, m):
        thr = np.flatnonzero(m)
        for key, kthr, state in mbar_lookup(S, op, get_addr(S)[thr], thr):
            del S.mbars[key]
            S.mbar_epoch += 1
    return inval


def _make_arrive(P, op, ins, get_addr):
    """`mbarrier.arrive` (.noComplete, a count), `arrive.expect_tx` and `arrive_drop` (whose arrivals also lower
    the count of every later phase): arrivals, the state token returned."""
    put = P.writer(ins.operands[0], T.b64, ins)
    extra = ins.operands[2] if len(ins.operands) > 2 else None
    get_extra = P.reader(extra, T.u32, ins) if extra is not None else None

    no_complete = ins.info.no_complete
    expect_tx = ins.info.op == "arrive_expect_tx"
    drop = ins.info.op == "arrive_drop"
    relaxed, scope = ins.info.relaxed, ins.info.scope

    def arrive(S, m):
        thr = np.flatnonzero(m)
        ex = (np.broadcast_to(np.asarray(get_extra(S)).astype(np.int64), (S.N,))
              if get_extra is not None else None)
        tokens = np.zeros(S.N, dtype=np.uint64)
        for key, kthr, state in mbar_lookup(S, op, get_addr(S)[thr], thr):
            rel = releasing(S, kthr, scope) if relaxed else None
            if expect_tx:
                tokens[kthr] = state.phase
                state.tx += int(ex[kthr].sum())
                state.tx_pc = op.pc
                _arrive(S, op, state, kthr, len(kthr), rel)
                continue
            counts = ex[kthr] if ex is not None else np.ones(len(kthr), dtype=np.int64)
            tokens[kthr] = _tokens(state, kthr, counts, no_complete)
            if no_complete:
                _check_no_complete(S, op, state, kthr, counts)
            n = int(counts.sum())
            if drop:
                state.count -= n
            _arrive(S, op, state, kthr, n, rel)
        put(S, tokens, m)
    return arrive


def _make_tx(P, op, ins, get_addr):
    """`mbarrier.expect_tx` (bytes the current phase waits for besides its arrivals) and `mbarrier.complete_tx`
    (bytes of that count completed, which may complete the phase)."""
    get_bytes = P.reader(ins.operands[1], T.u32, ins)
    complete = ins.info.op == "complete_tx"

    def tx(S, m):
        thr = np.flatnonzero(m)
        nb = np.broadcast_to(np.asarray(get_bytes(S)).astype(np.int64), (S.N,))
        for key, kthr, state in mbar_lookup(S, op, get_addr(S)[thr], thr):
            S.mbar_epoch += 1
            if complete:  # (always .relaxed.cta: its thread's writes are released only after a fence)
                state.tx -= int(nb[kthr].sum())
                _join(state, *releasing(S, kthr, "cta"))
                _maybe_complete(S, state)
            else:
                state.tx += int(nb[kthr].sum())
                state.tx_pc = op.pc
    return tx


def _make_wait(P, op, ins, get_addr):
    """`mbarrier.test_wait` / `try_wait` (a state token or .parity): true once the phase completed, else the
    thread parks on the barrier; a .relaxed wait that passes joins the phase at the thread's next acquiring
    fence (`mbarriers.defer_acquire`)."""
    parity = ins.info.parity
    relaxed, scope = ins.info.relaxed, ins.info.scope
    put = P.writer(ins.operands[0], T.pred, ins)
    phase_op = ins.operands[2]
    get_phase = P.reader(phase_op, T.u32 if parity else T.b64, ins)

    def wait(S, m):
        thr = np.flatnonzero(m)
        raw = np.asarray(get_phase(S))
        if not parity:  # a state token: the phase is its low 32 bits
            raw = raw.astype(np.uint64) & _PHASE_BITS
        ph = np.broadcast_to(raw.astype(np.int64), (S.N,))
        done = np.zeros(S.N, dtype=bool)
        for key, kthr, state in mbar_lookup(S, op, get_addr(S)[thr], thr):
            flush(S, state)
            q = ph[kthr]
            if parity:
                q = q & 1
                ok = (state.phase & 1) != q
                observed = np.where(((state.phase - 1) & 1) == q, state.phase - 1, state.phase - 2)
            else:
                ok = state.phase > q
                observed = q
            done[kthr] = ok
            if parity and ok.any():
                _check_skips(S, op, state, kthr[ok], observed[ok])
            for p in np.unique(observed[ok]):
                groups = state.phase_members.get(int(p))
                if groups is None:
                    continue
                if relaxed:  # joins the phase at its next acquiring fence
                    defer_acquire(S, kthr[ok & (observed == p)], groups, key, scope)
                else:
                    groups[kthr[ok & (observed == p)]] = key
            waiting = kthr[~ok]
            if len(waiting):
                S.parked[waiting] = True
                S.park_key[waiting] = key
        put(S, done, m)
    return wait


#: mbarrier operation -> maker(P, op, ins, address reader) of its executor
_MAKERS = {
    "init": _make_init,
    "inval": _make_inval,
    "arrive": _make_arrive,
    "arrive_expect_tx": _make_arrive,
    "arrive_drop": _make_arrive,
    "complete_tx": _make_tx,
    "expect_tx": _make_tx,
    "test_wait": _make_wait,
    "try_wait": _make_wait,
}


def make_mbarrier(P, op):
    """The executor of the mbarrier instructions (init, arrive with or without expect_tx, expect_tx, test_wait,
    try_wait, inval), with findings for use before init (or after inval) and for more arrivals than a phase
    expects. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the
    Program, `op` the Op being built.
    """
    ins = op.ins
    kind = ins.info.op
    addr_op = ins.operands[1] if ins.n_dst else ins.operands[0]
    get_addr = address_reader(P, addr_op, ins, "shared")
    make = _MAKERS.get(kind)
    if make is None:
        raise InterpUnsupported(f"mbarrier.{kind} is not modelled", ins)
    return make(P, op, ins, get_addr)


def make_pending_count(P, op):
    """The executor of `mbarrier.pending_count.b64 d, state`: the arrivals the barrier still expected before the
    .noComplete arrival that returned `state`; another token is a finding (undefined in PTX). Returns
    ``fn(S, m)``."""
    ins = op.ins
    put = P.writer(ins.operands[0], T.u32, ins)
    read = P.reader(ins.operands[1], T.b64, ins)

    def pending_count(S, m):
        tok = np.broadcast_to(np.asarray(read(S)).astype(np.uint64), (S.N,))
        bad = m & ((tok & _NO_COMPLETE_TOKEN) == 0)
        if bad.any():
            S.report("barrier", "mbarrier.pending_count of a state that no arrive.noComplete or "
                                "arrive_drop.noComplete returned: undefined in PTX", op, np.flatnonzero(bad))
        put(S, ((tok >> np.uint64(32)) & np.uint64(0x3FFF_FFFF)).astype(np.uint32), m)
    return pending_count
