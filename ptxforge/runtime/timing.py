"""Timing GPU work with CUDA events: warm up, time many launches, report the median and spread."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from . import driver as _drv
from . import faults
from .driver import api, check
from .streams import stream_handle

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class Timing:
    """Per-launch times in microseconds, from CUDA events around each launch (or batch of launches)."""

    samples_us: tuple
    batch: int = 1

    @property
    def _a(self) -> np.ndarray:
        return np.asarray(self.samples_us, dtype=np.float64)

    @property
    def repeat(self) -> int:
        """How many samples were taken."""
        return len(self.samples_us)

    @property
    def median_us(self) -> float:
        """The median sample, microseconds per launch."""
        return float(np.median(self._a))

    @property
    def mean_us(self) -> float:
        """The mean sample, microseconds per launch."""
        return float(self._a.mean())

    @property
    def min_us(self) -> float:
        """The fastest sample, microseconds per launch."""
        return float(self._a.min())

    @property
    def max_us(self) -> float:
        """The slowest sample, microseconds per launch."""
        return float(self._a.max())

    @property
    def q1_us(self) -> float:
        """The first quartile (25th percentile) of the samples, microseconds."""
        return float(np.percentile(self._a, 25))

    @property
    def q3_us(self) -> float:
        """The third quartile (75th percentile) of the samples, microseconds."""
        return float(np.percentile(self._a, 75))

    @property
    def iqr_us(self) -> float:
        """Interquartile range: the spread of the middle half of the samples."""
        return self.q3_us - self.q1_us

    @property
    def spread(self) -> float:
        """IQR relative to the median (0.02 = the middle half lies within 2 % of the median)."""
        m = self.median_us
        return self.iqr_us / m if m else float("nan")

    def as_dict(self) -> dict:
        """The statistics as a dict (median, mean, min, max, quartiles, IQR in microseconds; repeat and batch),
        for JSON results.
        """
        return {"median_us": self.median_us, "mean_us": self.mean_us, "min_us": self.min_us, "max_us": self.max_us,
                "q1_us": self.q1_us, "q3_us": self.q3_us, "iqr_us": self.iqr_us, "repeat": self.repeat,
                "batch": self.batch}

    def __str__(self) -> str:
        return (f"median {self.median_us:.2f} us (IQR {self.iqr_us:.2f} us, {100 * self.spread:.1f} %; "
                f"min {self.min_us:.2f}, max {self.max_us:.2f}; {self.repeat} samples"
                + (f" of {self.batch} launches" if self.batch > 1 else "") + ")")


class _Events:
    """A pool of timing events, destroyed together."""

    def __init__(self, n: int):
        d = api()
        self.events = []
        try:
            for _ in range(n):
                self.events.append(check(d.cuEventCreate(int(d.CUevent_flags.CU_EVENT_DEFAULT)), "cuEventCreate"))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        d = api()
        events, self.events = self.events, []
        for e in events:
            check(d.cuEventDestroy(e), "cuEventDestroy")


def _runner(target, args, kwargs, stream):
    """(callable enqueuing one launch, object to close afterwards, the stream handle the launches go to).

    The events are recorded on that stream: a launch bound to a non-blocking stream (a ptxforge `Stream`, torch's
    current stream) runs beside the legacy default stream, whose events would not wait for it."""
    from .kernel import BoundLaunch, KernelFunction
    if isinstance(target, KernelFunction):
        bound = target.bind(*args, stream=stream, **kwargs)
        return bound.launch, bound, bound.stream
    if isinstance(target, BoundLaunch):
        if args or kwargs:
            raise TypeError("a BoundLaunch already has its arguments; call benchmark(bound) alone")
        if stream is not None and stream_handle(stream) != target.stream:
            from .launch_ex import stream_words
            raise LaunchError(f"this launch of '{target.function.name}' is bound to {stream_words(target.stream)}, "
                              f"and benchmark() times it there; stream= names {stream_words(stream_handle(stream))} "
                              "(leave it out, or bind the launch to that stream)")
        return target.launch, None, target.stream
    if not callable(target):
        raise TypeError(f"benchmark() times a KernelFunction, a BoundLaunch or a callable, got {type(target).__name__}")
    return (lambda: target(*args, **kwargs)), None, stream_handle(stream)


def _count(value, name: str, least: int) -> int:
    """`value` as an int of at least `least`, else a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"benchmark() needs {name} to be an int >= {least}, got {value!r}")
    return int(value)


def benchmark(target, *args, warmup: int = 10, repeat: int = 100, batch: int = 1, stream=None, **kwargs) -> Timing:
    """Time `target` with CUDA events on `stream`.

    `target` is a KernelFunction (then `args` are ``grid, block, *kernel_args`` and `kwargs` may
    hold ``shared=``; the launch is bound once, so host arrays are copied only once), a BoundLaunch,
    or any callable that enqueues its GPU work on `stream`.  After `warmup` untimed calls,
    `repeat` samples are taken, each an event pair around `batch` back-to-back calls; the sample
    is the event time divided by `batch` (use batch > 1 for kernels of a few microseconds).
    The events go on the stream the launches run on: a KernelFunction's is `stream` (None: as a plain launch
    picks it, torch's current stream for torch tensors); a BoundLaunch's is the one it was bound to (`stream`
    may only repeat it).  The counts are ints (a ValueError names one that is not).  With ``warmup=0`` the
    first sample holds the kernel's first launch, which (lazy module loading, the driver's default since CUDA
    12.2) also loads the kernel onto the device: read `median_us`, not `max_us`, or keep a warm-up.
    """
    warmup, repeat, batch = _count(warmup, "warmup", 0), _count(repeat, "repeat", 1), _count(batch, "batch", 1)
    prev = _drv.enter()
    try:
        return _benchmark(target, args, kwargs, stream, warmup, repeat, batch)
    finally:
        _drv.leave(prev)


def _benchmark(target, args, kwargs, stream, warmup: int, repeat: int, batch: int) -> Timing:
    d = api()
    run, owned, s = _runner(target, args, kwargs, stream)
    sobj = d.CUstream(s)
    ev = _Events(2 * repeat)
    try:
        for _ in range(warmup):
            run()
        check(d.cuStreamSynchronize(sobj), "cuStreamSynchronize")
        e = ev.events
        for i in range(repeat):
            check(d.cuEventRecord(e[2 * i], sobj), "cuEventRecord")
            for _ in range(batch):
                run()
            check(d.cuEventRecord(e[2 * i + 1], sobj), "cuEventRecord")
        check(d.cuEventSynchronize(e[-1]), "cuEventSynchronize")
        faults.synchronized(s)
        ms = [check(d.cuEventElapsedTime(e[2 * i], e[2 * i + 1]), "cuEventElapsedTime") for i in range(repeat)]
    finally:
        ev.close()
        if owned is not None:
            owned.close()
    return Timing(tuple(1000.0 * float(x) / batch for x in ms), batch)


class EventTimer:
    """Time a region of GPU work on a stream: ``with EventTimer(stream) as t: ...``; then ``t.elapsed_us``."""

    def __init__(self, stream=None):
        self.stream = stream
        self.elapsed_us: float | None = None
        self._ev = None

    def __enter__(self) -> "EventTimer":
        h = stream_handle(self.stream)  # first: a stream that cannot be used must not leave events behind
        prev = _drv.enter()  # the events are ptxforge's context's; the caller's is current again in the region
        try:
            self._ev = _Events(2)
            self._sobj = api().CUstream(h)
            check(api().cuEventRecord(self._ev.events[0], self._sobj), "cuEventRecord")
        finally:
            _drv.leave(prev)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        d = api()
        prev = _drv.enter()
        try:
            if exc_type is None:
                e0, e1 = self._ev.events
                check(d.cuEventRecord(e1, self._sobj), "cuEventRecord")
                check(d.cuEventSynchronize(e1), "cuEventSynchronize")
                self.elapsed_us = 1000.0 * float(check(d.cuEventElapsedTime(e0, e1), "cuEventElapsedTime"))
        finally:
            try:
                self._ev.close()
            finally:
                _drv.leave(prev)
