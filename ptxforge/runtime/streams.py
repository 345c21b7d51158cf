"""CUDA streams: ptxforge's own, and the handles other libraries hand us."""

from __future__ import annotations

import sys
import time
import weakref

import numpy as np

from ..errors import LaunchError, SyncTimeout
from . import driver as _drv
from . import faults
from .driver import api, check, driver_error

#: CUDA_ERROR_NOT_READY: cuStreamQuery's "work is still running".
_NOT_READY = 600

_PTXFORGE_INTERNAL = True


def _destroy(handle) -> None:
    """Finalizer of a collected Stream (errors dropped, as in every finalizer)."""
    _drv.quietly_in_ours(lambda d: d.cuStreamDestroy(handle))


class Stream:
    """A CUDA stream (non-blocking by default: it does not wait for the legacy default stream).

    Pass it as ``stream=`` to launches, copies and ``benchmark``.  Other libraries can use it
    through ``__cuda_stream__`` (cuda.core's protocol) or its integer ``handle``.  After ``close()``
    every use (launches, copies, ``synchronize``, ``query``, its handle) raises LaunchError: the
    driver's handle is dangling then, and may already name another stream.
    """

    __slots__ = ("_obj", "handle", "_finalizer", "closed", "__weakref__")

    def __init__(self, *, non_blocking: bool = True):
        d = api()
        prev = _drv.enter()  # a stream belongs to the context current at its creation: ours
        try:
            flags = d.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else d.CUstream_flags.CU_STREAM_DEFAULT
            self._obj = check(d.cuStreamCreate(int(flags)), "cuStreamCreate")
        finally:
            _drv.leave(prev)
        self.handle = int(self._obj)
        self.closed = False
        self._finalizer = weakref.finalize(self, _destroy, self._obj)

    def _live(self) -> int:
        """The handle, or LaunchError once the stream was closed."""
        if self.closed:
            raise LaunchError(f"this Stream (0x{self.handle:x}) was closed; make a new Stream")
        return self.handle

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until everything queued on this stream has finished.

        timeout: seconds to wait at most; past it SyncTimeout is raised and the work goes on.
        """
        synchronize_stream(self._live(), timeout)

    def query(self) -> bool:
        """True when everything queued on this stream has finished; never waits (cuStreamQuery)."""
        return query(self._live())

    def __cuda_stream__(self):
        return (0, self._live())

    def __int__(self) -> int:
        return self._live()

    def close(self) -> None:
        """Destroy the stream now (work already queued on it still completes); later uses raise LaunchError."""
        self.closed = True
        if self._finalizer.detach() is not None:
            prev = _drv.enter()
            try:
                check(api().cuStreamDestroy(self._obj), "cuStreamDestroy")
            finally:
                _drv.leave(prev)

    def __copy__(self) -> "Stream":
        return self  # one driver stream, one object: a second would not know when the first closed it

    def __deepcopy__(self, memo) -> "Stream":
        return self

    def __reduce__(self):
        raise TypeError("a Stream is a CUDA stream of this process and cannot be pickled (another process would get "
                        "a dangling handle); make a Stream there")

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Stream(0x{self.handle:x}{', closed' if self.closed else ''})"


def stream_handle(stream) -> int:
    """The raw CUstream handle of anything that names a stream; None and 0 are the legacy default stream.

    Accepted: ptxforge Stream, ints (Python or numpy) below 2**64, cuda.bindings CUstream, objects with
    ``__cuda_stream__`` (cuda.core), torch streams (``.cuda_stream``) and CuPy streams (``.ptr``).
    """
    if stream is None:
        return 0
    if isinstance(stream, Stream):
        return stream.handle if not stream.closed else stream._live()
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        h = int(stream)
        if not 0 <= h < 1 << 64:
            raise LaunchError(f"a stream handle is a 64-bit address, in [0, 2**64), got {h}")
        return h
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        got = proto() if callable(proto) else proto
        return int(got[1])
    for attr in ("cuda_stream", "ptr"):
        h = getattr(stream, attr, None)
        if isinstance(h, int) and not isinstance(h, bool):
            return h
    if type(stream).__name__ == "CUstream":
        return int(stream)
    raise LaunchError(f"cannot use {type(stream).__name__} as a stream: pass a ptxforge Stream, a raw handle, "
                      "a torch/CuPy stream or an object with __cuda_stream__")


_UNSEEN = object()
_CURRENT_QUERY: dict = {}  # array type -> its library's current-stream query (device index -> handle), or None


def _current_query(t: type):
    """The current-stream query of array type `t`'s library, or None: torch tensors (torch's current stream on a
    device, what its own operations on the tensor use).  Made once per type: a type defined before torch was
    imported is none of torch's, so None stays true for it."""
    torch = sys.modules.get("torch")
    q = None
    if torch is not None and isinstance(t, type) and issubclass(t, torch.Tensor):
        q = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if q is None:  # (the public spelling: one Stream object per call)
            def q(device: int, _cuda=torch.cuda) -> int:
                return _cuda.current_stream(device).cuda_stream
    _CURRENT_QUERY[t] = q
    return q


def current_stream_of(arrays) -> int | None:
    """The stream a launch given no ``stream=`` goes to when its operands belong to a library with a current
    stream: torch's current stream on the device of the first CUDA tensor among `arrays` (the stream torch's
    own operations on it use, so a launch inside ``with torch.cuda.stream(s):`` is ordered on `s` as torch's
    would be); None when no array is one (the launch goes to the legacy default stream).

    torch's ``__cuda_array_interface__`` names no stream, so this is how a launch learns which stream made
    its operands.  Per call: one dictionary look-up per array, and for a CUDA tensor its device and one query.
    """
    for x in arrays:
        q = _CURRENT_QUERY.get(type(x), _UNSEEN)
        if q is None:
            continue
        if q is _UNSEEN:
            q = _current_query(type(x))
            if q is None:
                continue
        dev = x.get_device()
        if dev >= 0:
            return int(q(dev))
    return None


def query(stream=None) -> bool:
    """True when all work queued on `stream` (default: the legacy default stream) has finished.

    Never waits (cuStreamQuery); a fault reported by the stream raises as from any other call.
    """
    h = stream_handle(stream)
    prev = _drv.enter()
    try:
        err, = api().cuStreamQuery(api().CUstream(h))
    finally:
        _drv.leave(prev)
    if not err:
        faults.synchronized(h)
        return True
    if int(err) == _NOT_READY:
        return False
    raise driver_error(err, "cuStreamQuery")


def synchronize_stream(stream=None, timeout: float | None = None) -> None:
    """Wait for the work queued on `stream`; with `timeout` (seconds), poll and raise SyncTimeout past it."""
    h = stream_handle(stream)
    if timeout is None:
        prev = _drv.enter()
        try:
            check(api().cuStreamSynchronize(api().CUstream(h)), "cuStreamSynchronize")
        finally:
            _drv.leave(prev)
        faults.synchronized(h)
        return
    if not float(timeout) >= 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout}")
    deadline = time.monotonic() + float(timeout)
    pause = 20e-6
    while not query(h):
        now = time.monotonic()
        if now >= deadline:
            items = [p for p in faults.pending() if p[0] == h]
            what = faults._describe_pending(items) if items else "  (no launches by ptxforge are pending on it)"
            where = "the default stream" if h == 0 else f"stream 0x{h:x}"
            raise SyncTimeout(f"{where} did not finish within {float(timeout):g} s; kernels launched on it since "
                              f"its last successful synchronization:\n{what}")
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 5e-3)
