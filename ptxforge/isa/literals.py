"""PTX numeric literals: integers (decimal, 0x hex, 0b binary, 0 octal, a U suffix), 0f/0d hex floats (the
exact bits of an .f32 / .f64) and decimal floats, read as the ISA spells them.  The PTX reader reads
instruction immediates with them and module variables' initializers are read the same way.
"""

from __future__ import annotations

import re
import struct

from . import types as T
from .operands import Imm

_PTXFORGE_INTERNAL = True

_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uU]?\Z")
_FLOAT_HEX = re.compile(r"0([fF][0-9a-fA-F]{8}|[dD][0-9a-fA-F]{16})\Z")
#: what looks like a hex float literal (to say what is wrong with one that is not: a sign, a digit count)
_FLOAT_HEX_LIKE = re.compile(r"[-+]?0[fFdD][0-9a-fA-F]+\Z")
_FLOAT_DEC = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?\Z")

def parse_int(text: str) -> int | None:
    """A PTX integer literal (decimal, 0x hex, 0b binary, 0 octal, optional U suffix), else None."""
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return int(text)
    if _INT.match(text) is None:
        return None
    t = text.rstrip("uU")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if t[:2] in ("0x", "0X"):
        v = int(t[2:], 16)
    elif t[:2] in ("0b", "0B"):
        v = int(t[2:], 2)
    elif len(t) > 1 and t[0] == "0":
        v = int(t, 8)
    else:
        v = int(t)
    return sign * v


def parse_imm(text: str) -> Imm | None:
    """An immediate: integer, 0fXXXXXXXX (f32 bits), 0dXXXXXXXXXXXXXXXX (f64 bits) or a decimal float."""
    v = parse_int(text)
    if v is not None:
        return Imm(v)
    m = _FLOAT_HEX.match(text)
    if m is not None:
        bits = int(m.group(1)[1:], 16)
        if m.group(1)[0] in "fF":
            return Imm(struct.unpack("<f", struct.pack("<I", bits))[0], T.f32)
        return Imm(struct.unpack("<d", struct.pack("<Q", bits))[0], T.f64)
    if _FLOAT_DEC.match(text) is not None and any(c in text for c in ".eE"):
        return Imm(float(text), T.f64)
    return None


def hex_float_problem(text: str) -> str | None:
    """What is wrong with `text` as a 0f/0d hex float literal (a sign, the digit count), or None when it is
    not one or is right."""
    if _FLOAT_HEX_LIKE.match(text) is None or _FLOAT_HEX.match(text) is not None:
        return None
    body = text.lstrip("+-")
    if body != text:
        flipped = "%X" % (int(body[2:], 16) ^ (1 << (4 * len(body[2:]) - 1))) if len(body) in (10, 18) else None
        return (f"{text}: a hex float literal takes no sign; write the negated bits"
                + (f" ({body[:2]}{flipped.zfill(len(body) - 2)})" if flipped else ""))
    want = 8 if body[1] in "fF" else 16
    return (f"{text}: a 0{body[1]} literal has exactly {want} hex digits ({len(body) - 2} given), e.g. "
            + ("0f3F800000 for 1.0" if want == 8 else "0d3FF0000000000000 for 1.0"))
