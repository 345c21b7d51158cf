"""printf on the interpreter: a call to the CUDA runtime's `vprintf` (what nvcc writes for printf).

`vprintf(format, args)` takes the generic address of the format string and of a buffer holding the
arguments, each at the next offset aligned to its size (the ABI: `ptxforge.isa.vprintf`).  Each
executing thread formats its line, in thread order, into the
launch's output (`Report.printed`, and the process's stdout at the end of the launch, as a GPU's
printf buffer appears at the next synchronization); the call returns the number of arguments, as
CUDA's printf does.  The format string and the arguments are read through the interpreter's memory
checks, so a bad pointer is an out-of-bounds finding.

`PRINTF` is the interpreter-only opcode `exec_call` writes for the call: operands (result or None,
format address, buffer address).
"""

from __future__ import annotations

import math

import numpy as np

from ..isa import types as T
from ..isa.vprintf import SPEC, spec_arguments
from .access import gather, map_access

_PTXFORGE_INTERNAL = True

#: the interpreter-only opcode of a vprintf call
PRINTF = "printf.vprintf"
#: the longest string %s or the format reads before giving up on its NUL
MAX_STRING = 4096


def _read(S, op, addr: int, thread: int, nbytes: int, what: str):
    """`nbytes` bytes at generic address `addr` for batch thread `thread`, or None (the access is a finding)."""
    parts = map_access(S, op, "generic", np.array([addr], np.uint64), np.array([thread]), nbytes, align=1,
                       what=what)
    if not parts:
        return None
    return bytes(gather(S, parts[0], 1, nbytes)[0])


def _string(S, op, addr: int, thread: int, what: str):
    out = bytearray()
    while len(out) < MAX_STRING:
        b = _read(S, op, addr + len(out), thread, 1, what)
        if b is None:
            return None
        if b == b"\0":
            break
        out += b
    return out.decode("utf-8", "replace")


def _pad(text: str, flags: str, width: int | None, zero_at: int | None = None) -> str:
    """`text` padded to `width`: left-justified with '-', else with zeros after its sign/prefix (at `zero_at`) when
    zero padding applies, else with spaces before it."""
    if width is None or len(text) >= width:
        return text
    fill = width - len(text)
    if "-" in flags:
        return text + " " * fill
    if zero_at is not None:
        return text[:zero_at] + "0" * fill + text[zero_at:]
    return " " * fill + text


def _integer(flags, width, prec, conv, value):
    """C's %d %i %u %o %x %X of `value` (already signed or unsigned as the conversion reads it)."""
    base = {"o": 8, "x": 16, "X": 16}.get(conv, 10)
    digits = "" if prec == 0 and value == 0 else format(abs(value), {8: "o", 16: "x", 10: "d"}[base])
    if conv == "X":
        digits = digits.upper()
    if prec is not None and len(digits) < prec:
        digits = "0" * (prec - len(digits)) + digits
    prefix = ""
    if conv in "di":
        prefix = "-" if value < 0 else "+" if "+" in flags else " " if " " in flags else ""
    elif "#" in flags and conv == "o" and not digits.startswith("0"):
        digits = "0" + digits
    elif "#" in flags and conv in "xX" and value != 0:
        prefix = "0" + conv
    zero = len(prefix) if "0" in flags and prec is None else None
    return _pad(prefix + digits, flags, width, zero)


def _floating(flags, width, prec, conv, value):
    """C's %e %f %g %a (and upper case) of double `value`."""
    sign = "-" if math.copysign(1.0, value) < 0 else "+" if "+" in flags else " " if " " in flags else ""
    if not math.isfinite(value):  # C pads inf and nan with spaces, never zeros
        word = "nan" if math.isnan(value) else "inf"
        return _pad(sign + (word.upper() if conv.isupper() else word), flags, width)
    if conv in "aA":  # hexadecimal: 0xh.hhhp+d, the leading digit 1 (0 for zero and subnormals), as glibc writes it
        mantissa, exponent = abs(value).hex().split("p")
        lead, frac = mantissa[2], mantissa[4:]
        if prec is None:  # as many digits as the value needs: trailing zeros of the fraction dropped
            frac = frac.rstrip("0")
        elif prec < len(frac):  # rounded to `prec` hex digits, to nearest even, carrying into the leading digit
            drop = 4 * (len(frac) - prec)
            q, r = divmod(int(lead + frac, 16), 1 << drop)
            if r > 1 << (drop - 1) or (r == 1 << (drop - 1) and q & 1):
                q += 1
            digits = format(q, "x").rjust(prec + 1, "0")
            lead, frac = digits[:len(digits) - prec], digits[len(digits) - prec:]
        else:
            frac = frac.ljust(prec, "0")
        mantissa = "0x" + lead + ("." + frac if frac or "#" in flags else "")  # '#' keeps the point
        text = mantissa + "p" + exponent
        text = sign + (text.upper() if conv == "A" else text)
        return _pad(text, flags, width, len(sign) + 2 if "0" in flags else None)
    spec = "%" + "".join(f for f in flags if f in "-+ #0") + (str(width) if width is not None else "") + (
        f".{prec}" if prec is not None else "") + conv
    return spec % value


def format_line(fmt: str, read_arg, read_string):
    """C printf's formatting of `fmt`, taking each argument from `read_arg(nbytes)` (the next argument's bytes, as a
    little-endian int; None when unreadable) and %s strings from `read_string(address)`. Returns (text, count of
    arguments)."""
    out, pos, count = [], 0, 0
    for mt in SPEC.finditer(fmt):
        out.append(fmt[pos:mt.start()])
        pos = mt.end()
        conv, length, flags = mt["conv"], mt["len"] or "", mt["flags"]
        args = spec_arguments(mt)
        if not args:  # %%
            out.append("%")
            continue
        raws = [read_arg(a.nbytes) or 0 for a in args]  # the `*`s first, then the value
        count += len(args) - 1
        stars, raw = iter(raws[:-1]), raws[-1]
        width = prec = None
        if mt["width"] == "*":  # a negative width left-justifies
            width = int(np.int32(np.uint32(next(stars))))
            if width < 0:
                flags, width = flags + "-", -width
        elif mt["width"] is not None:
            width = int(mt["width"])
        if mt["prec"] == "*":  # a negative precision is as if none were given
            prec = int(np.int32(np.uint32(next(stars))))
            prec = prec if prec >= 0 else None
        elif mt["prec"] is not None:
            prec = int(mt["prec"])
        if conv in "eEfFgGaA":
            text = _floating(flags, width, prec, conv, float(np.uint64(raw).view(np.float64)))
        elif conv == "p":
            text = _pad(f"0x{raw:x}", flags, width)
        elif conv == "s":
            string = (read_string(raw) if raw else "(null)") or ""
            text = _pad(string[:prec] if prec is not None else string, flags, width)
        elif conv == "c":
            text = _pad(chr(raw & 0xFF), flags, width)
        else:
            bits = {"hh": 8, "h": 16}.get(length, 8 * args[-1].nbytes)
            raw &= (1 << bits) - 1
            value = raw - (1 << bits) if conv in "di" and raw >> (bits - 1) else raw
            text = _integer(flags, width, prec, conv, value)
        count += 1
        out.append(text)
    out.append(fmt[pos:])
    return "".join(out), count


def make_printf(P, op):
    """The executor of a vprintf call (see the module's notes). Returns ``fn(S, m)``."""
    ins = op.ins
    ret, fmt_op, buf_op = ins.operands
    put = P.writer(ret, T.u32, ins) if ret is not None else None
    get_fmt, get_buf = (P.reader(x, T.u64, ins) for x in (fmt_op, buf_op))

    def run(S, m):
        fmts = np.broadcast_to(np.asarray(get_fmt(S)).astype(np.uint64), (S.N,))
        bufs = np.broadcast_to(np.asarray(get_buf(S)).astype(np.uint64), (S.N,))
        counts = np.zeros(S.N, np.uint32)
        for t in np.flatnonzero(m):
            t = int(t)
            fmt = _string(S, op, int(fmts[t]), t, "printf format string read")
            if fmt is None:
                continue
            offset = [0]

            def read_arg(nbytes, t=t):
                offset[0] = -(-offset[0] // nbytes) * nbytes
                raw = _read(S, op, int(bufs[t]) + offset[0], t, nbytes, "printf argument read")
                offset[0] += nbytes
                return None if raw is None else int.from_bytes(raw, "little")

            text, counts[t] = format_line(fmt, read_arg, lambda a, t=t: _string(S, op, a, t, "printf %s read"))
            S.launch.printed.append(text)
        if put is not None:
            put(S, counts, m)
    return run
