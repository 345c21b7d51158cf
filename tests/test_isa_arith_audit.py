"""Arithmetic forms a user found refused or mis-explained: integer flags that are modes, the saturating
high-half multiply-adds (mad.hi.sat.s32, mad24.hi.sat.s32) and fma.rn.oob{.relu} on the half types.

Each accepted form is assembled by ptxas; the interpreter runs what it can model and refuses the rest.
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import s32, u32
from support.located import assert_located

HERE = __file__


def test_an_integer_mode_passed_as_a_flag_names_the_mode_spelling():
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=r'max\.relu on integers is a mode, not a flag: write mode="relu"') \
            as info:
        k.max(k.reg(s32), k.reg(s32), flags=("relu",))  # <- relu-flag
    assert_located(info.value, "<- relu-flag", HERE)
    k.max(k.reg(s32), k.reg(s32), mode="relu")  # the spelling the message names is accepted
    with pytest.raises(pf.ValidationError, match=r'add\.sat on integers is a mode, not a flag: write mode="sat"'):
        k.add(k.reg(s32), k.reg(s32), flags=("sat",))
    with pytest.raises(pf.ValidationError, match="takes no flags"):
        k.add(k.reg(u32), k.reg(u32), flags=("ftz",))
