"""One rule places parameters (`kernel.param_align`), and it is ptxas's: `runtime.launch.layout` and
`kernel.param_buffer_bytes` against the parameter offsets ptxas writes into the cubin (the EIATTR_KPARAM_INFO
records of the kernel's .nv.info section), for parameters as the PTX reader and the loader read them.

A pointer's `.ptr .align A` is its pointee's alignment, not the parameter's: ptxas puts
`.param .u64 .ptr .global .align 16 p` after a `.u32` at offset 8, where the launch's packing of a parsed module
put it at 16 and `param_buffer_bytes` agreed with ptxas (a launch hands the driver one pointer per argument, so
the packing's offsets are its own; the buffer's size is what the 4 KB limit is checked against)."""

import struct

import pytest

import ptxforge as pf
from ptxforge.assembler import AssemblyError, assemble, available_backends
from ptxforge.kernel import param_buffer_bytes
from ptxforge.parse.reader import ParseError
from ptxforge.runtime.launch import layout
from ptxforge.runtime.loader import parse_entries

pytestmark = pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")

_KPARAM_INFO = 0x17  # EIATTR_KPARAM_INFO: (index u32, ordinal u16, offset u16, size and flags u32)


def ptxas_param_offsets(cubin: bytes) -> dict:
    """{ordinal: (offset, size)} of the one kernel of `cubin`, from its .nv.info.<kernel> attributes."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def name(n):
        return cubin[names_at + n:cubin.index(b"\0", names_at + n)].decode()
    out = {}
    for sh_name, _, _, _, off, size in sections:
        if not name(sh_name).startswith(".nv.info."):
            continue
        b, i = cubin[off:off + size], 0
        while i < len(b):
            fmt, attr = b[i], b[i + 1]
            if fmt == 4:  # EIFMT_SVAL: a 16-bit length, then the value
                n = struct.unpack_from("<H", b, i + 2)[0]
                if attr == _KPARAM_INFO:
                    _, ordinal, offset, comp = struct.unpack_from("<IHHI", b, i + 4)
                    out[ordinal] = (offset, (comp >> 18) & 0x3FFF)
                i += 4 + n
            else:  # EIFMT_HVAL (a 16-bit value), EIFMT_BVAL, EIFMT_NVAL
                i += {3: 4, 2: 3}.get(fmt, 2)
    return out


PARAM_LISTS = [
    ".param .u32 n, .param .u64 .ptr .global .align 16 p",
    ".param .u8 a, .param .u64 .ptr .align 8 p, .param .u16 b, .param .u64 .ptr .global .align 32 q",
    ".param .u32 n, .param .align 16 .b8 blob[20], .param .u32 m, .param .u64 .ptr .shared .align 64 s",
    ".param .f32 x, .param .align 8 .u32 y, .param .u64 z, .param .u8 w",
    ".param .u16 h, .param .u64 .ptr .global .align 4 p, .param .b128 v",
]


@pytest.mark.parametrize("params", PARAM_LISTS)
def test_the_launch_layout_is_ptxas_s(params):
    ptx = (".version 8.3\n.target sm_90\n.address_size 64\n"
           f".visible .entry k({params})\n{{\n    ret;\n}}\n")
    try:
        cubin = assemble(ptx, "sm_90").cubin
    except AssemblyError as e:  # a list ptxas refuses says so: the table above is wrong, not the layout
        raise AssertionError(f"ptxas refused {params!r}: {e}") from e
    placed = ptxas_param_offsets(cubin)
    want = [placed[i] for i in range(len(placed))]
    for read in (parse_entries(ptx)[0].params, pf.parse(ptx).kernel("k").params):
        lay = layout(read)
        assert [(s.offset, s.size) for s in lay.specs] == want, params
        assert lay.size == param_buffer_bytes(read) == want[-1][0] + want[-1][1]


def test_the_reader_keeps_a_scalar_s_alignment_and_refuses_one_ptxas_refuses():
    """`.param .align 8 .u32 y` moves y (ptxas places it at 8, not 4): the reader kept the type and dropped the
    alignment, so its rendering declared another parameter buffer.  An alignment at or below the size changes
    nothing (ptxas takes it); one that is no power of two ptxas refuses, and the reader now does too."""
    head = ".version 8.3\n.target sm_90\n.address_size 64\n.visible .entry k("
    m = pf.parse(head + ".param .f32 x, .param .align 8 .u32 y, .param .align 2 .u32 q)\n{\n    ret;\n}\n")
    assert [p.align for p in m.kernel("k").params] == [None, 8, None]
    assert ".param .align 8 .u32 y," in m.ptx and ".param .u32 q" in m.ptx
    for bad in ("3", "0"):
        with pytest.raises(ParseError, match=f"power of two, got {bad}"):
            pf.parse(head + f".param .align {bad} .u32 y)\n{{\n    ret;\n}}\n")


def test_a_variable_s_alignment_that_is_no_power_of_two_is_refused_at_its_line():
    """ptxas: 'Alignment must be a power of two' for `.global .align 3 .u32 g` too; the reader took it."""
    with pytest.raises(ParseError, match="<ptx>:4: .align takes a power of two, got 3"):
        pf.parse(".version 8.3\n.target sm_90\n.address_size 64\n.global .align 3 .u32 g;\n")

