"""cp.async in elements: the byte arithmetic for typed (and packed sub-byte) buffers.

cp.async counts BYTES, and only 4, 8 or 16 of them (`.cg`: 16).  Kernels think in elements,
and for packed 4-bit types one element is half a byte: 32 int4 values are one 16-byte copy,
while writing "8" for 8 int4 values would silently copy 16 of them.  Everything here converts
once, refuses what cannot be expressed, and says which counts would be legal.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..isa import types as T
from ..isa.operands import Reg
from .. import fold as F

_PTXFORGE_INTERNAL = True

CP_ASYNC_WIDTHS = (16, 8, 4)

#: Everyday names for element types, next to the PTX spellings.
ALIASES = {
    "int4": "s4", "uint4": "u4", "int8": "s8", "uint8": "u8", "int16": "s16", "uint16": "u16",
    "int32": "s32", "uint32": "u32", "int64": "s64", "uint64": "u64", "bfloat16": "bf16",
    "float16": "f16", "half": "f16", "float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
}


def as_elem_type(t) -> T.ScalarType:
    """A ScalarType from a ScalarType, a PTX name ('s4', '.bf16') or an alias ('int4', 'float32')."""
    if isinstance(t, T.ScalarType):
        st = t
    elif isinstance(t, str):
        key = t.strip().lstrip(".").lower()
        key = ALIASES.get(key, key)
        try:
            st = T.lookup(key)
        except ValueError:
            raise ValidationError(f"unknown element type {t!r}; use a PTX type (s4, s8, bf16, f32 ...) or one of "
                                  + ", ".join(sorted(ALIASES))) from None
    else:
        raise ValidationError(f"element type must be a ScalarType or a name, got {t!r}")
    if st.is_pred or st.lanes != 1 or st is T.tf32:
        raise ValidationError(f".{st.name} is not a memory element type a copy can count")
    return st


def legal_counts(t) -> dict:
    """{bytes: element count} for each cp.async width that a whole number of `t` elements fills."""
    t = as_elem_type(t)
    return {w: w * 8 // t.bits for w in CP_ASYNC_WIDTHS if (w * 8) % t.bits == 0}


def _legal_text(t: T.ScalarType) -> str:
    legal = legal_counts(t)
    if not legal:
        return f"no count of .{t.name} values makes a 4, 8 or 16-byte copy"
    return "legal counts for ." + t.name + ": " + ", ".join(
        f"{n} ({w} bytes)" for w, n in sorted(legal.items()))


def bits_to_bytes(t, count: int) -> int:
    """Bytes of `count` (an int, 0 or more) elements of `t`; ValidationError when they do not fill whole bytes."""
    t = as_elem_type(t)
    if not T.is_integer(count) or count < 0:
        raise ValidationError(f"an element count must be an int of 0 or more, got {count!r}")
    bits = int(count) * t.bits
    if bits % 8:
        raise ValidationError(
            f"{count} .{t.name} values are {bits} bits = {bits / 8:g} bytes: memory is addressed in whole "
            f"bytes, so a count of .{t.name} values must be a multiple of {8 // t.bits}")
    return bits // 8


def cp_async_bytes(elem_type, count) -> int:
    """Bytes moved by one cp.async of `count` elements of `elem_type` (s4/u4: two per byte).

    Raises ValidationError unless the count fills whole bytes and gives 4, 8 or 16 of them; the
    message lists the counts that would be legal for that type.
    """
    t = as_elem_type(elem_type)
    if not T.is_integer(count) or count <= 0:
        raise ValidationError(f"cp.async element count must be a positive int, got {count!r}; {_legal_text(t)}")
    count = int(count)
    bits = count * t.bits
    if bits % 8:
        raise ValidationError(f"{count} .{t.name} values are {bits} bits, not a whole number of bytes; "
                              f"cp.async moves whole bytes ({_legal_text(t)})")
    nbytes = bits // 8
    if nbytes not in CP_ASYNC_WIDTHS:
        raise ValidationError(f"{count} .{t.name} values are {nbytes} bytes, but cp.async copies exactly 4, 8 or "
                              f"16 bytes; {_legal_text(t)}. Split larger copies, or use plain loads for fewer")
    return nbytes


def emit_elems_to_bytes(k, n, t, *, round_up: bool = False):
    """Bytes of `n` elements of `t` (int or u32 register).

    For packed types a register count that is not a multiple of the elements per byte is
    truncated (or rounded up with `round_up`): the caller promises whole bytes otherwise.
    """
    t = as_elem_type(t)
    if not isinstance(n, Reg):
        bits = n * t.bits
        if bits % 8 and not round_up:
            bits_to_bytes(t, n)  # raises with the explanation
        return -(-bits // 8)
    n = F.as_u32(k, n)
    if t.bits % 8 == 0:
        return F.mul(k, n, t.bits // 8)
    per_byte = 8 // t.bits
    if round_up:
        n = k.add(n, per_byte - 1)
    return k.shr(n, F.log2(per_byte))


def _check_known_align(align, nbytes, what):
    if align is None:
        return
    if not T.is_integer(align) or align <= 0:
        raise ValidationError(f"{what} alignment must be a positive number of bytes, got {align!r}")
    if align % nbytes:
        raise ValidationError(f"{what} is only known to be {align}-byte aligned, but a {nbytes}-byte cp.async "
                              f"needs {nbytes}-byte aligned addresses on both sides; copy fewer elements "
                              f"per cp.async or align the buffer")


def cp_async_elems(k, dst, src, elem_type, count, *, valid=None, cache=None, pred=None, prefetch=None,
                   src_align=None, dst_align=None) -> int:
    """One cp.async of `count` elements from global `src` to shared `dst`; returns the byte width.

    `valid` (an int or a 32-bit integer register, in ELEMENTS) reads only the first `valid`
    elements and zero-fills the rest: it becomes a byte src-size.  It must lie in 0..count: a
    register is passed through as is (clamp "the elements left in a row" with `k.min(left, count)`;
    a src-size past cp-size is undefined, and the interpreter reports it).  An int `valid` outside
    0..count, or whose elements do not fill whole bytes, is refused; for a register the caller
    promises whole bytes (for s4/u4 an even count; an odd one is truncated to the byte below).  `src_align`/`dst_align`, when given, are
    the alignments (bytes) known for the two addresses and are checked against the width.
    `cache` is "ca"/"cg" (".ca"/".cg" too; default: .cg for 16 bytes, else .ca).
    """
    t = as_elem_type(elem_type)
    nbytes = cp_async_bytes(t, count)
    _check_known_align(src_align, nbytes, "the source")
    _check_known_align(dst_align, nbytes, "the destination")
    if isinstance(cache, str):
        cache = cache.lstrip(".")
    src_size = None
    if valid is not None:
        if isinstance(valid, Reg):
            if valid.type.is_pred or valid.type.is_float or valid.type.bits != 32:
                raise ValidationError(f"valid element count must be a 32-bit integer register or an int, got "
                                      f"{valid!r}")
            src_size = emit_elems_to_bytes(k, valid, t)
        else:
            if not T.is_integer(valid) or not 0 <= valid <= count:
                raise ValidationError(f"valid element count must be an int in 0..{count}, got {valid!r}")
            valid = int(valid)
            bits = valid * t.bits
            if bits % 8:
                raise ValidationError(
                    f"a zero-fill tail of {valid} valid .{t.name} values ends inside a byte ({bits} bits); "
                    f"src-size counts whole bytes, so the valid count must be a multiple of {8 // t.bits}. "
                    "Pad the row to whole bytes or mask the last element after loading")
            if valid != count:
                src_size = bits // 8
    k.cp_async(dst, src, nbytes, cache=cache, src_size=src_size, prefetch=prefetch, pred=pred)
    return nbytes
