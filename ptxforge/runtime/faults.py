"""Kernel faults: which launches a fault may come from, and the context it leaves unusable.

A kernel that faults (illegal address, trap, misaligned access ...) is reported by the driver
at some later call, often one that has nothing to do with it (a cuMemFree, a copy, a
synchronization), and from then on every call in the context fails with the same code.  So
ptxforge remembers, per stream, the kernels launched since the last successful
synchronization of that stream; the first call that sees a fault code names them, with grid
and block, and marks the context dead; every later call raises ContextLost with one sentence
saying so instead of blaming whatever it was doing.

Error codes are sorted into three classes:

* ``STICKY``: the context is unusable (restart the process);
* ``OUT_OF_RESOURCES``: this call could not get memory; nothing is wrong with inputs;
* ``IMAGE_REJECTED``: the driver refused a cubin or PTX image as such (the only class for which
  a cached cubin is replaced).

(``NO_CONTEXT`` names the codes of a driver with no usable context, and ``CAPTURE_REFUSED`` those of a
call refused while a stream captures a CUDA graph, whose message then says what to do.)
"""

from __future__ import annotations

import threading
from collections import deque

from ..errors import ContextLost

_PTXFORGE_INTERNAL = True

#: CUresult codes after which the context can do nothing more (CUDA driver API documentation).
STICKY = {
    214: "CUDA_ERROR_ECC_UNCORRECTABLE",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    710: "CUDA_ERROR_ASSERT",
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
    715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS",
    717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    718: "CUDA_ERROR_INVALID_PC",
    719: "CUDA_ERROR_LAUNCH_FAILED",
}

#: Codes that say memory ran out, not that any input was wrong.
OUT_OF_RESOURCES = {2: "CUDA_ERROR_OUT_OF_MEMORY"}

#: Codes that say there is no usable context at all (nothing to do with any input).
NO_CONTEXT = {3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 201: "CUDA_ERROR_INVALID_CONTEXT"}

#: Codes with which the driver refuses a module image itself.
IMAGE_REJECTED = {
    200: "CUDA_ERROR_INVALID_IMAGE",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    218: "CUDA_ERROR_INVALID_PTX",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    300: "CUDA_ERROR_INVALID_SOURCE",
}

#: Codes with which the driver refuses a call because a stream is capturing a CUDA graph in global (or this
#: thread's thread-local) mode; `CAPTURE_ADVICE` says what to do.
CAPTURE_REFUSED = {900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"}

#: What a refused call during a graph capture asks of the caller: ptxforge allocates and loads at first use.
CAPTURE_ADVICE = ("a CUDA graph is being captured, and the driver takes no such call during a capture: make the call "
                  "that allocates or loads before capturing (a DeviceBuffer, a GEMM's plan or its first run() of a "
                  "problem kind, a kernel's first launch), or capture in relaxed mode")

#: Launches remembered per stream (the oldest are dropped; their number is still counted).
REMEMBERED = 8

_lock = threading.Lock()
_pending: dict = {}  # stream handle -> [launch count, deque of (kernel name, config tuple)]
_dead: str | None = None  # the one sentence every call raises once the context is unusable


def code_name(code: int, name: str = "") -> str:
    """The CUresult's name: the driver's when given, else from the tables here."""
    if name and not name.isdigit():
        return name
    for table in (STICKY, OUT_OF_RESOURCES, NO_CONTEXT, IMAGE_REJECTED, CAPTURE_REFUSED):
        if code in table:
            return table[code]
    return f"CUresult {code}"


def is_sticky(code) -> bool:
    """Whether `code` leaves the context unusable."""
    return code is not None and int(code) in STICKY


def is_out_of_resources(code) -> bool:
    """Whether `code` says memory ran out."""
    return code is not None and int(code) in OUT_OF_RESOURCES


def is_not_the_inputs(code) -> bool:
    """Whether `code` blames the context or memory (sticky, out of memory, no context), never the PTX or cubin."""
    return code is not None and (int(code) in STICKY or int(code) in OUT_OF_RESOURCES or int(code) in NO_CONTEXT)


def is_image_rejection(code) -> bool:
    """Whether `code` is the driver refusing a module image as such."""
    return code is not None and int(code) in IMAGE_REJECTED


def record_launch(stream: int, kernel: str, cfg: tuple) -> None:
    """Remember a launch of `kernel` with cfg = (gx, gy, gz, bx, by, bz, shared) on `stream`."""
    rec = _pending.get(stream)
    if rec is None:
        with _lock:
            rec = _pending.setdefault(stream, [0, deque(maxlen=REMEMBERED)])
    rec[0] += 1
    rec[1].append((kernel, cfg))


def synchronized(stream: int | None = None) -> None:
    """Forget the launches of `stream` (None: of every stream) after it synchronized successfully."""
    with _lock:
        if stream is None:
            _pending.clear()
        else:
            _pending.pop(stream, None)


def pending() -> list:
    """[(stream, launch count, [(kernel, cfg), ...])] not yet known to have finished."""
    with _lock:
        return [(s, rec[0], list(rec[1])) for s, rec in _pending.items() if rec[0]]


def _describe_pending(items) -> str:
    lines = []
    for stream, count, launches in items:
        where = "the default stream" if stream == 0 else f"stream 0x{stream:x}"
        more = f" (the last {len(launches)} of {count})" if count > len(launches) else ""
        lines.append(f"  on {where}{more}:")
        for name, cfg in launches:
            lines.append(f"    kernel '{name}' grid {tuple(cfg[0:3])} block {tuple(cfg[3:6])}")
    return "\n".join(lines)


def dead_reason() -> str | None:
    """The sentence describing the unusable context, or None while it is usable."""
    return _dead


def raise_if_dead() -> None:
    """Raise ContextLost when an earlier fault made the context unusable."""
    if _dead is not None:
        raise ContextLost(_dead)


def context_lost(code: int, name: str, what: str, detail: str) -> ContextLost:
    """The error of a sticky code: the first names the suspect launches and marks the context dead."""
    global _dead
    name = code_name(code, name)
    with _lock:
        already = _dead
    if already is not None:
        return ContextLost(already, code=code, name=name)
    items = pending()
    kernels = list(dict.fromkeys(k for _, _, launches in items for k, _ in launches))
    if kernels:
        sus = " or ".join(f"'{k}'" for k in kernels[:4]) + (" or another" if len(kernels) > 4 else "")
        sentence = f"the CUDA context is unusable after {name} in kernel {sus}; restart the process"
        body = (f"{what} failed: {name} ({code}){': ' + detail if detail else ''}\n"
                f"kernels launched since the last successful synchronization:\n{_describe_pending(items)}\n"
                f"{sentence}")
    else:
        sentence = f"the CUDA context is unusable after {name}; restart the process"
        body = f"{what} failed: {name} ({code}){': ' + detail if detail else ''}\n{sentence}"
    with _lock:
        if _dead is None:
            _dead = sentence
    return ContextLost(body, code=code, name=name)


def mark_unusable_after_fork(sentence: str) -> None:
    """In a child made by fork() (one thread; the parent's other threads are gone, perhaps holding the lock): the
    context is unusable and every call raises ContextLost with `sentence`; the parent's launches are not ours."""
    global _dead, _lock, _pending
    _lock = threading.Lock()
    _pending = {}
    _dead = sentence


def reset_for_tests() -> None:
    """Forget every launch and the dead mark (only for tests with a stand-in driver)."""
    global _dead
    with _lock:
        _pending.clear()
        _dead = None
