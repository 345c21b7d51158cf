"""Which bytes of each pointer argument a launch read and wrote, and how many times.

`run(..., count_accesses=True)` fills `Report.accesses`: for every pointer parameter, an
`AccessCounts` with one read count and one write count per byte of the array passed for it.
Questions a findings list cannot answer become array expressions: "did the kernel read anything
outside the matrix's data?" (`reads[padding].any()`), "does the union of the copies cover the
tile exactly once?" (`(reads[tile] == 1).all()`), "was each output byte written once?".

What counts: each thread's access counts once for each byte it moves.  A load, and the source
of cp.async / cp.async.bulk, is a read (a cp.async with src-size n counts its first n bytes; the
zero-filled rest is not read, and ignore-src reads nothing); a store is a write; an atomic or red
is both.  Accesses the interpreter refused (out of bounds, misaligned) never happened and are not
counted: they are findings.  Shared and .param memory are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PTXFORGE_INTERNAL = True


class ByteCounter:
    """Read and write counts over a whole heap, indexed by heap offset."""

    def __init__(self, size: int):
        self.reads = np.zeros(size, dtype=np.uint32)
        self.writes = np.zeros(size, dtype=np.uint32)

    def add(self, kind: str, first: np.ndarray, nbytes):
        """One more "reads" or "writes" of `nbytes` bytes (an int, or one per offset) at each offset in `first`."""
        first = np.asarray(first, dtype=np.int64)
        if first.size == 0:
            return
        if np.ndim(nbytes) == 0:
            idx = (first[:, None] + np.arange(int(nbytes))).ravel()
        else:
            nbytes = np.asarray(nbytes, dtype=np.int64)
            width = int(nbytes.max(initial=0))
            j = np.arange(width)
            idx = (first[:, None] + j)[j[None, :] < nbytes[:, None]]
        np.add.at(getattr(self, kind), idx, 1)


@dataclass
class AccessCounts:
    """How many times the launch read and wrote each byte of one argument array.

    `reads` and `writes` are uint32 arrays shaped like the array's bytes: a C-ordered array of
    shape (..., n) and item size s gives (..., n * s); a 0-d array gives (s,).
    """

    name: str  # the parameter the array was passed for (the first one, if passed twice)
    reads: np.ndarray
    writes: np.ndarray

    def read_ranges(self) -> list:
        """[(start, stop), ...]: the runs of bytes (flat offsets into the array) read at least once."""
        return _runs(self.reads.reshape(-1) > 0)

    def written_ranges(self) -> list:
        """[(start, stop), ...]: the runs of bytes (flat offsets into the array) written at least once."""
        return _runs(self.writes.reshape(-1) > 0)


def byte_shape(array) -> tuple:
    """The shape of an array's bytes: the last axis counts bytes instead of elements."""
    shape = tuple(array.shape)
    if not shape:
        return (array.itemsize,)
    return shape[:-1] + (shape[-1] * array.itemsize,)


def access_counts(counter: ByteCounter, buffers, bindings) -> dict:
    """{parameter name: AccessCounts} for the heap's buffers; `bindings`: (parameter name, buffer index)."""
    per_buffer = {}
    for i, b in enumerate(buffers):
        sl = slice(b.heap_offset, b.heap_offset + b.nbytes)
        shape = byte_shape(b.array)
        per_buffer[i] = AccessCounts(b.name, counter.reads[sl].reshape(shape), counter.writes[sl].reshape(shape))
    return {name: per_buffer[i] for name, i in bindings}


def _runs(mask: np.ndarray) -> list:
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(a), int(b)) for a, b in zip(starts, stops)]
