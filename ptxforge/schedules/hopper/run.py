"""`HopperGemm.run`: the per-call path on GPU operands (a plan kept per problem kind, then three reads and a
launch), the careful first call that makes and keeps it, and the copy-in, launch, copy-out run on numpy
operands.

    c = run(g, a, b)                           # numpy in, numpy out (allocates, copies, launches)
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import ValidationError
from ..operands import _reader, stream_key
from .operands import c_numpy_type, check_host_c, host_problem
from .plan import Plan, _stream_handle
from .splitk import check_splits


_PTXFORGE_INTERNAL = True


_read = _reader.read  # (bound once: the per-call path reads three operands)
_plans: dict = {}
_plans_lock = threading.Lock()
_PLAN_CACHE = 64


def launch_kept(cfg, a, b, c, k, splits, stream) -> bool:
    """Launch through the plan kept for this problem kind (shapes, dtypes, device, K, splits, stream) when
    there is one and all three operands read through the fast reader; False sends the call the careful way.
    The per-call path of `HopperGemm.run`: three reads, one dictionary lookup, one launch."""
    entry = _plans.get(id(cfg))
    if entry is None or entry[0] is not cfg:
        return False
    ga, gb, gc = _read(a), _read(b), _read(c)
    if ga is None or gb is None or gc is None:
        return False
    plan = entry[1].get((ga[1], ga[2], gb[1], gb[2], gc[1], gc[2], k, splits, stream_key(stream, (a, b, c))))
    if plan is None:
        return False
    if ga[0] % 16 or gb[0] % 16 or gc[0] % plan._c_align:
        raise ValidationError(plan.misaligned(ga[0], gb[0], gc[0]))
    plan.launch_pointers(ga[0], gb[0], gc[0])
    return True


def run_device(cfg, a, b, c, *, k: int | None, splits: int | None, stream) -> None:
    """The careful launch on GPU operands, for a call `launch_kept` did not take: reads the operands'
    array interfaces, makes the `HopperPlan` and launches, then keeps the plan per problem kind (shapes,
    dtypes, K, splits, stream) so that later calls of the kind read three addresses and launch
    (`launch_kept`; see gemm.plan).
    """
    from ...runtime import driver as drv
    from ..operands import producers_ok
    sh = 0 if stream is None else _stream_handle(stream)
    prev = drv.enter()  # one entry for the checks, the loads and the launch; the caller's context comes back
    try:
        p = Plan(cfg, a, b, c, k=k, splits=splits, stream=stream)
        p.launch()
    finally:
        drv.leave(prev)
    if not producers_ok(sh, a, b, c):  # ordering after another stream: every call stays careful
        return
    for x, ptr in zip((a, b, c), p._ptrs):  # the careful read checked these addresses: teach the fast reader
        _reader.learn(x, ptr)
    got = [_reader.read(x) for x in (a, b, c)]
    if any(g is None for g in got):
        return
    key = (got[0][1], got[0][2], got[1][1], got[1][2], got[2][1], got[2][2], k, splits, sh)
    with _plans_lock:
        entry = _plans.get(id(cfg))
        if entry is None or entry[0] is not cfg:  # keyed by identity; the entry holds cfg so its id stays its own
            if len(_plans) >= _PLAN_CACHE:
                _plans.pop(next(iter(_plans)))
            entry = _plans[id(cfg)] = (cfg, {})
        if len(entry[1]) >= _PLAN_CACHE:
            entry[1].pop(next(iter(entry[1])))
        entry[1][key] = p.plan


def run(cfg, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, k: int | None = None,
        splits: int | None = None, stream=None) -> np.ndarray:
    """C for host operands: copies to the device, launches once on `stream`, copies C back after it (into `c`
    when given, which is checked with the operands and the stream before anything runs; splits: K splits,
    None: auto)."""
    from ...runtime import DeviceBuffer
    m, n, k = host_problem(cfg, a, b, k)
    check_splits(splits)
    if stream is not None:
        _stream_handle(stream)  # (a value that is no stream is refused before anything is copied)
    if c is not None:
        check_host_c(cfg, c, m, n, a, b)
    out_dt = c_numpy_type(cfg)
    da, db = (DeviceBuffer.from_host(np.ascontiguousarray(x), stream=stream) for x in (a, b))
    dc = DeviceBuffer.empty((m, n), out_dt)
    dc.fill_bytes(0xFF, stream=stream)
    p = Plan(cfg, da, db, dc, k=k, splits=splits, stream=stream)
    p.launch()
    if c is None:
        return dc.to_host(stream=stream)
    c[...] = dc.to_host(stream=stream)
    return c
