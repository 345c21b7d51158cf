"""PTX text in: read the PTX that nvcc, clang, Triton or ptxforge wrote into a `Module`.

    module = ptxforge.parse(open("k.ptx").read(), filename="k.ptx")

Every instruction becomes the `Instruction` the builder makes, through the same ISA
constructors and target rules, and keeps the PTX file and line it came from as its source
location (so assembler errors, listings and interpreter findings name the input's lines).
`strict=True` raises `ParseError` (file:line, what the tables would accept) at the first line the
tables reject; `strict=False` keeps such a line as an opaque instruction, rendered verbatim,
marked in listings and refused by the interpreter.

Also here: `lint` (findings with FILE:LINE), `same_module` (structural equality of two
modules), `to_python` (a KernelBuilder script that rebuilds a module).
"""

from __future__ import annotations

import gc
import sys
import types

from .reader import Finding, IgnoredBodyWarning, NarrowedImmediateWarning, ParseError, Reader, Reading, require_text

_PTXFORGE_INTERNAL = True


def read(text: str, *, filename: str | None = None, strict: bool = True) -> Reading:
    """Parse PTX text and return the module with what was found on the way (findings, opaque lines).  `text` is a
    str: anything else, bytes too (decode them first), is a ParseError naming what was given."""
    from ..isa.instruction import unlocated
    require_text(text, "ptxforge.parse")
    collecting = gc.isenabled()
    gc.disable()  # reading makes many small objects and no cycles: the collector would only rescan them
    try:
        with unlocated():  # each instruction gets its PTX file:line instead of a Python line
            return Reader(text, filename, strict).read()
    finally:
        if collecting:
            gc.enable()


def parse(text: str, *, filename: str | None = None, strict: bool = True):
    """PTX text (a str) -> `Module`.  `filename` names the input in source locations and errors."""
    reading = read(text, filename=filename, strict=strict)
    if reading.module is None:
        raise ParseError(f"{filename or '<ptx>'}: the file defines no .entry or .func")
    return reading.module


def parse_file(path: str, *, strict: bool = True):
    """`parse(text, filename=path)` of the file at `path`, read as UTF-8 whatever the locale says (PTX is ASCII:
    a byte that is not UTF-8 is a ParseError naming its line, as a non-ASCII character is).  A file that cannot be
    opened raises the OSError of `open`."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ParseError(f"{path}:{line}: byte 0x{data[e.start]:02X} is not UTF-8 text: PTX is ASCII, comments "
                         "included (ptxas refuses any other byte)") from None
    return parse(text, filename=str(path), strict=strict)


__all__ = ["parse", "parse_file", "read", "ParseError", "Finding", "Reading", "NarrowedImmediateWarning",
           "IgnoredBodyWarning"]


class _ParsePackage(types.ModuleType):
    """`ptxforge.parse` is this package and, called, its `parse` function: `ptxforge.parse(text)`."""

    def __call__(self, text: str, *, filename: str | None = None, strict: bool = True):
        return parse(text, filename=filename, strict=strict)


sys.modules[__name__].__class__ = _ParsePackage
