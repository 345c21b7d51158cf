"""The device-side printf ABI: `vprintf(format, args)`, what nvcc writes for printf.

The CUDA driver provides `vprintf` to every module that declares it
(`.extern .func (.param .b32 r) vprintf (.param .b64 format, .param .b64 args)`): `format` is the
generic address of a NUL-terminated string, `args` the generic address of a buffer holding the
arguments one after another, each at the next offset aligned to its size.  `conversions(fmt)`
reads a C format string into the arguments it takes (`Argument`): 4-byte integers for %d %i %u
%o %x %X %c (8 bytes with an l or ll length modifier; the device printf takes h too, and no other), 8-byte doubles for %e %f %g %a
(and upper case: a float is passed as a double), 8-byte addresses for %s and %p, and a 4-byte
integer for each `*` width or precision.  The builder's `printf` and the interpreter's `vprintf`
both read formats here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ValidationError

_PTXFORGE_INTERNAL = True

#: the name of the CUDA runtime's device printf
VPRINTF = "vprintf"
#: one C conversion specification (C99 printf, less %n)
SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?(?P<len>hh|h|ll|l|j|z|t|L)?"
                  r"(?P<conv>[diouxXeEfFgGaAcsp%])")
#: the length modifiers that make an integer conversion take 8 bytes
WIDE = ("l", "ll", "j", "z", "t")


@dataclass(frozen=True)
class Argument:
    """One argument a format takes: its kind (`int`, `float`, `string`, `pointer`), its size in the buffer,
    and the conversion (`d`, `f`, `*` for a width or precision ...) it is for."""

    kind: str
    nbytes: int
    conv: str


def spec_arguments(mt) -> list:
    """The arguments one conversion specification (a `SPEC` match) takes, in the order the buffer holds them: an
    int for each `*` width or precision, then the value ([] for %%)."""
    conv = mt["conv"]
    if conv == "%":
        return []
    out = [Argument("int", 4, "*") for part in (mt["width"], mt["prec"]) if part == "*"]
    if conv in "eEfFgGaA":
        out.append(Argument("float", 8, conv))
    elif conv == "s":
        out.append(Argument("string", 8, conv))
    elif conv == "p":
        out.append(Argument("pointer", 8, conv))
    else:
        out.append(Argument("int", 8 if mt["len"] in WIDE else 4, conv))
    return out


def conversions(fmt: str) -> list:
    """The arguments format string `fmt` takes, in order (`Argument`s).  A `%` that starts no conversion a
    device printf knows is a ValidationError naming it."""
    out = []
    pos = 0
    for mt in SPEC.finditer(fmt):
        stray = fmt.find("%", pos, mt.start())
        if stray >= 0:
            raise ValidationError(f"printf format {fmt!r}: '%' at offset {stray} starts no conversion (legal: "
                                  "%[flags][width][.precision][length]d i u o x X c e E f F g G a A s p, %%)")
        pos = mt.end()
        conv = mt["conv"]
        if conv == "%":
            continue
        if mt["len"] not in (None, "h", "l", "ll"):
            why = (": on an H200 every argument after an hh conversion prints wrong" if mt["len"] == "hh" else
                   "; use ll for a 64-bit integer")
            raise ValidationError(f"printf format {fmt!r}: the length modifier '{mt['len']}' of {mt.group(0)!r} is "
                                  f"not one CUDA's device printf takes (h, l, ll){why}")
        out += spec_arguments(mt)
    stray = fmt.find("%", pos)
    if stray >= 0:
        raise ValidationError(f"printf format {fmt!r}: '%' at offset {stray} starts no conversion")
    return out


def buffer_layout(args) -> tuple:
    """(offset of each argument, buffer size) for `args` (Arguments): each at the next offset aligned to its
    size, the size rounded up to 8."""
    offsets, off = [], 0
    for a in args:
        off = -(-off // a.nbytes) * a.nbytes
        offsets.append(off)
        off += a.nbytes
    return tuple(offsets), max(8, -(-off // 8) * 8)
