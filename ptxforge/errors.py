"""The one exception family of ptxforge.

Every error says what was wrong, where (the Python line that asked for the
instruction, when there is one) and, where it can, what would be legal.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import sys
import threading
from typing import NamedTuple

_PTXFORGE_INTERNAL = True


class SourceLoc(NamedTuple):
    """A Python source position: where an instruction was asked for.

    A named tuple rather than a dataclass: one is made for every emitted instruction.
    """

    filename: str
    lineno: int
    function: str = ""

    def __str__(self) -> str:
        return f"{_short(self.filename)}:{self.lineno}"

    @property
    def code(self) -> str:
        """The source text of the Python line (stripped; empty when the file cannot be read)."""
        return linecache.getline(self.filename, self.lineno).strip()


def _short(path: str) -> str:
    return _short_from(path, os.getcwd())


@functools.lru_cache(maxsize=4096)  # listings name the same few files on every line
def _short_from(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


_held = threading.local()  # .emitting: True while `emitter_locations` is active on this thread


def caller_loc() -> SourceLoc | None:
    """The first frame outside ptxforge's internal modules.

    A module marks itself internal with a global ``_PTXFORGE_INTERNAL = True``;
    its frames are skipped, so the position reported is the user's (or the
    schedule's) line that asked for the instruction.  Within `emitter_locations`
    the frames of a schedule's emitter (internal modules that also set
    ``_PTXFORGE_EMITTER = True``) are not skipped: a schedule's kernel names the
    emitter's lines.
    """
    emitting = getattr(_held, "emitting", False)
    f = sys._getframe(1)
    while f is not None:
        g = f.f_globals
        if g.get("_PTXFORGE_INTERNAL", False):
            if emitting and g.get("_PTXFORGE_EMITTER", False):
                return SourceLoc(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        elif g.get("__name__") != "contextlib":
            return SourceLoc(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None


@contextlib.contextmanager
def emitter_locations():
    """Within the block, on this thread, an instruction a schedule's emitter asks for is located at the
    emitter's line (the first frame of a module marked ``_PTXFORGE_EMITTER = True``), not at the line that
    asked for the schedule's module: that module is built once and cached, so the user's line would be one
    caller's, and every instruction of the listing would point at it."""
    prev = getattr(_held, "emitting", False)
    _held.emitting = True
    try:
        yield
    finally:
        _held.emitting = prev


class PtxforgeError(Exception):
    """Base of all ptxforge errors."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        if self.loc is None:
            return self.message
        code = self.loc.code
        where = f"\n  at {self.loc}" + (f": {code}" if code else "")
        return self.message + where


class _LocatedAtCaller(PtxforgeError):
    """An error that, made without a location, takes the first line outside ptxforge's internal
    modules: the user's (or schedule's) line that called the pure constructor, rendered the module
    or built the kernel.  This is also how an error raised inside a builder method names the line
    that called the method: every frame between is internal, so no per-call wrapper is needed."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        super().__init__(message, loc if loc is not None else caller_loc())


class ValidationError(_LocatedAtCaller, ValueError):
    """An instruction, operand or kernel that is not legal PTX."""


class TargetError(_LocatedAtCaller):
    """Something the chosen target or PTX ISA version does not have."""


class AssemblyError(PtxforgeError):
    """ptxas (or nvJitLink) rejected the module; carries its log, mapped to Python lines."""

    def __init__(self, message: str, log: str = "", diagnostics=()):
        super().__init__(message)
        self.log = log
        self.diagnostics = tuple(diagnostics)


class LaunchError(PtxforgeError):
    """A kernel launch or its arguments are wrong, or the driver refused them."""


class DriverError(PtxforgeError):
    """A CUDA driver API call failed."""

    def __init__(self, message: str, code: int | None = None, name: str = ""):
        super().__init__(message)
        self.code = code
        self.name = name


class ContextLost(DriverError):
    """A kernel fault (or another sticky error) made the CUDA context unusable; restart the process."""


class SyncTimeout(DriverError, TimeoutError):
    """Work on the GPU did not finish within the time given to synchronize()."""


class ToolchainError(AssemblyError):
    """The assembler or disassembler failed for a reason other than the PTX: it crashed, hung past its
    timeout, or was given an option or architecture it does not know."""


class JitError(AssemblyError):
    """The driver's JIT rejected the PTX; carries its error and info logs."""


class CliError(PtxforgeError):
    """A command-line argument or input file the `ptxforge` command cannot use."""


class ToolchainMissing(PtxforgeError):
    """No assembler or driver is available for the requested operation."""


def with_loc(err: PtxforgeError, loc: SourceLoc | None) -> PtxforgeError:
    """Attach `loc` to `err` unless it already names a line; returns `err` (for ``raise with_loc(e, loc)``).
    """
    if err.loc is None and loc is not None:
        err.loc = loc
    return err
