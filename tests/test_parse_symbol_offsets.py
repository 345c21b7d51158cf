"""A variable's address as a value, with an offset: `mov.u64 %rd, var+imm` and `cvta.space.u64 %rd, var` /
`var+imm` (the ISA's forms, which ptxas takes).  Read, rendered, assembled and run on the interpreter, with the
addresses they give checked against each other; the refusals name the line and what is legal."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.isa import types as T
from ptxforge.isa.convert import cvta
from ptxforge.isa.operands import Reg, Symbol, SymbolOffset
from ptxforge.parse import ParseError, parse

TEXT = """.version 8.0
.target sm_80
.address_size 64
.global .align 8 .b8 g[64];
.visible .entry k(.param .u64 out)
{
    .reg .b64 %rd<8>;
    .reg .b32 %r<4>;
    .shared .align 8 .b8 sm[64];
    cvta.shared.u64 %rd1, sm;
    cvta.shared.u64 %rd2, sm + 16;
    mov.u32 %r1, sm+24;
    mov.u64 %rd5, g+8;
    cvta.global.u64 %rd6, g;
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    sub.s64 %rd4, %rd2, %rd1;
    st.global.u64 [%rd3], %rd4;
    mov.u32 %r2, sm;
    sub.s32 %r3, %r1, %r2;
    st.global.u32 [%rd3+8], %r3;
    sub.s64 %rd7, %rd5, %rd6;
    st.global.u64 [%rd3+16], %rd7;
    st.shared.u32 [sm+16], 77;
    ld.u32 %r3, [%rd2];
    st.global.u32 [%rd3+12], %r3;
    ret;
}
"""


def test_variable_addresses_with_offsets_read_assemble_and_run():
    module = parse(TEXT, filename="s.ptx")
    assert "cvta.shared.u64 %rd2, sm+16;" in " ".join(module.ptx.split())
    assert parse(module.ptx, filename="again.ptx").ptx == module.ptx
    pf.assemble(module)
    out = np.zeros(3, np.uint64)
    interp.run(module, "k", grid=1, block=1, args=[out])
    # sm+16 - sm, (sm+24 - sm) in the low word and the value stored through the generic sm+16 in the high one,
    # g+8 - g
    assert [int(out[0]), int(out[1]) & 0xFFFFFFFF, int(out[1]) >> 32, int(out[2])] == [16, 24, 77, 8]


@pytest.mark.parametrize("line,why", [
    ("cvta.global.u64 %rd1, sm;", "the space must be the variable's"),
    ("cvta.to.shared.u64 %rd1, sm;", "converts a generic address in a register, not variable sm"),
])
def test_cvta_of_a_variable_in_another_space_or_to_a_space_is_refused_at_its_line(line, why):
    text = TEXT.replace("    cvta.shared.u64 %rd1, sm;", "    " + line)
    with pytest.raises(ParseError, match=f"s.ptx:10: .*{why}"):
        parse(text, filename="s.ptx")


def test_the_constructor_takes_a_variable_only_for_its_own_space():
    d, sm = Reg("rd1", T.u64), Symbol("sm", "shared", T.b8, 64, 8)
    assert cvta(d, SymbolOffset(sm, 16), "shared::cta", False).render() == "cvta.shared::cta.u64 %rd1, sm+16;"
    with pytest.raises(ValidationError, match="cvta.global of sm, a .shared variable"):
        cvta(d, sm, "global", False)
