"""CUDA streams: ptxforge's own, and the handles other libraries hand us."""

from __future__ import annotations

import weakref

from ..errors import LaunchError
from . import driver as _drv
from .driver import api, check

_PTXFORGE_INTERNAL = True


def _destroy(handle) -> None:
    try:
        api().cuStreamDestroy(handle)
    except Exception:  # interpreter exit: the driver may be gone already
        pass


class Stream:
    """A CUDA stream (non-blocking by default: it does not wait for the legacy default stream).

    Pass it as ``stream=`` to launches, copies and ``benchmark``.  Other libraries can use it
    through ``__cuda_stream__`` (cuda.core's protocol) or its integer ``handle``.
    """

    __slots__ = ("_obj", "handle", "_finalizer", "__weakref__")

    def __init__(self, *, non_blocking: bool = True):
        d = api()
        _drv.context()
        flags = d.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else d.CUstream_flags.CU_STREAM_DEFAULT
        self._obj = check(d.cuStreamCreate(int(flags)), "cuStreamCreate")
        self.handle = int(self._obj)
        self._finalizer = weakref.finalize(self, _destroy, self._obj)

    def synchronize(self) -> None:
        """Wait until everything queued on this stream has finished."""
        check(api().cuStreamSynchronize(self._obj), "cuStreamSynchronize")

    def __cuda_stream__(self):
        return (0, self.handle)

    def __int__(self) -> int:
        return self.handle

    def close(self) -> None:
        """Destroy the stream now (work already queued on it still completes)."""
        if self._finalizer.detach() is not None:
            check(api().cuStreamDestroy(self._obj), "cuStreamDestroy")

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Stream(0x{self.handle:x})"


def stream_handle(stream) -> int:
    """The raw CUstream handle of anything that names a stream; None and 0 are the legacy default stream.

    Accepted: ptxforge Stream, ints, cuda.bindings CUstream, objects with ``__cuda_stream__``
    (cuda.core), torch streams (``.cuda_stream``) and CuPy streams (``.ptr``).
    """
    if stream is None:
        return 0
    if isinstance(stream, Stream):
        return stream.handle
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise LaunchError(f"stream handle must be non-negative, got {stream}")
        return stream
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
