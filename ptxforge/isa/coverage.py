"""The instruction index of the PTX ISA 9.0 ("9.7 Instructions"), one row per instruction section,
as data: which rows an sm_80 / sm_86 / sm_89 / sm_90 / sm_90a kernel can use, and how to recognize
an instruction of each row by its mnemonic.

`ISA_ROWS` lists the sections in the ISA's order (9.7.1 integer arithmetic ... 9.7.19
miscellaneous).  Where the ISA gives several opcodes one section (`prefetch, prefetchu`,
`mbarrier.test_wait / try_wait`, the video families) the row is that section.  The "{}" and "@"
sections (instruction grouping, predicated execution) are syntax, not instructions, and are left
out; so are the deprecated pre-sm_70 `shfl` and `vote` without `.sync`, which the 9.0 index no
longer lists.

Which rows ptxforge expresses is not written here: `ptxforge.testing.coverage` derives it from the
forms the ISA tables emit, and `docs/isa-coverage.md` shows the result (a test keeps it equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class IsaRow:
    """One instruction section of the PTX ISA 9.0.

    Fields:
        section: the ISA's chapter ("Integer Arithmetic", "Data Movement and Conversion", ...).
        name: the section's instruction(s), as the ISA titles it.
        match: a regular expression that a mnemonic of this row matches in full, or a function of
            an `Instruction` (for rows one mnemonic cannot tell apart).
        usable: whether an sm_80 .. sm_90a kernel can use it (False: needs sm_100 or later).
        why: for a row not usable there, the target it needs.
    """

    section: str
    name: str
    match: str | Callable
    usable: bool = True
    why: str = ""

    def matches(self, ins) -> bool:
        """Whether the instruction `ins` belongs to this row."""
        if callable(self.match):
            return bool(self.match(ins))
        return _compiled(self.match).fullmatch(ins.mnemonic) is not None


_CACHE: dict = {}


def _compiled(pattern: str):
    c = _CACHE.get(pattern)
    if c is None:
        c = _CACHE[pattern] = re.compile(pattern)
    return c


def _is_pack(ins) -> bool:
    """mov of a brace vector: packing scalars into a wider one, or unpacking it."""
    from .operands import Vec
    return ins.opcode == "mov" and any(isinstance(o, Vec) for o in ins.operands)


def _is_plain_mov(ins) -> bool:
    return ins.opcode == "mov" and not _is_pack(ins)


_I = r"[su](16|32|64)"
_F = r"f(32|64)"
_H = r"b?f16(x2)?"
_CMP = r"[a-z]+(\.(and|or|xor))?(\.ftz)?"
_NOT_HALF = r"((b|s|u)(16|32|64)|f32|f64)"
_SM100 = "sm_100 and later (Blackwell)"

_INT = "Integer Arithmetic"
_EXT = "Extended-Precision Integer Arithmetic"
_FP = "Floating-Point"
_HALF = "Half Precision Floating-Point"
_MIXED = "Mixed Precision Floating-Point"
_CMPSEL = "Comparison and Selection"
_HCMP = "Half Precision Comparison"
_LOGIC = "Logic and Shift"
_DATA = "Data Movement and Conversion"
_TEX = "Texture"
_SURF = "Surface"
_CTRL = "Control Flow"
_SYNC = "Parallel Synchronization and Communication"
_WMMA = "Warp Level Matrix Multiply-Accumulate"
_WGMMA = "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"
_TC05 = "TensorCore 5th Generation Family"
_STACK = "Stack Manipulation"
_VIDEO = "Video"
_MISC = "Miscellaneous"

#: The PTX ISA 9.0 instruction index, one row per instruction section, in the ISA's order.
ISA_ROWS = (
    # 9.7.1 integer arithmetic
    IsaRow(_INT, "add", rf"add(\.sat)?\.{_I}(x2)?"),
    IsaRow(_INT, "sub", rf"sub(\.sat)?\.{_I}(x2)?"),
    IsaRow(_INT, "mul", rf"mul\.(lo|hi|wide)\.{_I}"),
    IsaRow(_INT, "mad", rf"mad\.(lo|hi|wide)(\.sat)?\.{_I}"),
    IsaRow(_INT, "mul24", r"mul24\.(lo|hi)\.[su]32"),
    IsaRow(_INT, "mad24", r"mad24\.(lo|hi)(\.sat)?\.[su]32"),
    IsaRow(_INT, "sad", rf"sad\.{_I}"),
    IsaRow(_INT, "div", rf"div\.{_I}"),
    IsaRow(_INT, "rem", rf"rem\.{_I}"),
    IsaRow(_INT, "abs", r"abs\.s(16|32|64)"),
    IsaRow(_INT, "neg", r"neg\.s(16|32|64)"),
    IsaRow(_INT, "min", rf"min(\.relu)?\.{_I}(x2)?"),
    IsaRow(_INT, "max", rf"max(\.relu)?\.{_I}(x2)?"),
    IsaRow(_INT, "popc", r"popc\.b(32|64)"),
    IsaRow(_INT, "clz", r"clz\.b(32|64)"),
    IsaRow(_INT, "bfind", r"bfind(\.shiftamt)?\.[su](32|64)"),
    IsaRow(_INT, "fns", r"fns\.b32"),
    IsaRow(_INT, "brev", r"brev\.b(32|64)"),
    IsaRow(_INT, "bfe", r"bfe\.[su](32|64)"),
    IsaRow(_INT, "bfi", r"bfi\.b(32|64)"),
    IsaRow(_INT, "szext", r"szext\.(clamp|wrap)\.[su]32"),
    IsaRow(_INT, "bmsk", r"bmsk\.(clamp|wrap)\.b32"),
    IsaRow(_INT, "dp4a", r"dp4a\.[su]32\.[su]32"),
    IsaRow(_INT, "dp2a", r"dp2a\.(lo|hi)\.[su]32\.[su]32"),
    # 9.7.2 extended-precision integer arithmetic
    IsaRow(_EXT, "add.cc", r"add\.cc\.[su](32|64)"),
    IsaRow(_EXT, "addc", r"addc(\.cc)?\.[su](32|64)"),
    IsaRow(_EXT, "sub.cc", r"sub\.cc\.[su](32|64)"),
    IsaRow(_EXT, "subc", r"subc(\.cc)?\.[su](32|64)"),
    IsaRow(_EXT, "mad.cc", r"mad\.(lo|hi)\.cc\.[su](32|64)"),
    IsaRow(_EXT, "madc", r"madc\.(lo|hi)(\.cc)?\.[su](32|64)"),
    # 9.7.3 floating point
    IsaRow(_FP, "testp", rf"testp\.\w+\.{_F}"),
    IsaRow(_FP, "copysign", rf"copysign\.{_F}"),
    IsaRow(_FP, "add", rf"add(\.r[nzmp])?(\.ftz)?(\.sat)?\.{_F}"),
    IsaRow(_FP, "sub", rf"sub(\.r[nzmp])?(\.ftz)?(\.sat)?\.{_F}"),
    IsaRow(_FP, "mul", rf"mul(\.r[nzmp])?(\.ftz)?(\.sat)?\.{_F}"),
    IsaRow(_FP, "fma", rf"fma\.r[nzmp](\.ftz)?(\.sat)?\.{_F}"),
    IsaRow(_FP, "mad", rf"mad(\.r[nzmp])?(\.ftz)?(\.sat)?\.{_F}"),
    IsaRow(_FP, "div", rf"div\.(approx|full|r[nzmp])(\.ftz)?\.{_F}"),
    IsaRow(_FP, "abs", rf"abs(\.ftz)?\.{_F}"),
    IsaRow(_FP, "neg", rf"neg(\.ftz)?\.{_F}"),
    IsaRow(_FP, "min", rf"min(\.ftz)?(\.NaN)?(\.xorsign\.abs)?\.{_F}"),
    IsaRow(_FP, "max", rf"max(\.ftz)?(\.NaN)?(\.xorsign\.abs)?\.{_F}"),
    IsaRow(_FP, "rcp", r"rcp\.(approx(\.ftz)?\.f32|r[nzmp](\.ftz)?\.f(32|64))"),
    IsaRow(_FP, "rcp.approx.ftz.f64", r"rcp\.approx\.ftz\.f64"),
    IsaRow(_FP, "sqrt", rf"sqrt\.(approx|r[nzmp])(\.ftz)?\.{_F}"),
    IsaRow(_FP, "rsqrt", r"rsqrt\.approx(\.ftz)?\.f32|rsqrt\.approx\.f64"),
    IsaRow(_FP, "rsqrt.approx.ftz.f64", r"rsqrt\.approx\.ftz\.f64"),
    IsaRow(_FP, "sin", r"sin\.approx(\.ftz)?\.f32"),
    IsaRow(_FP, "cos", r"cos\.approx(\.ftz)?\.f32"),
    IsaRow(_FP, "lg2", r"lg2\.approx(\.ftz)?\.f32"),
    IsaRow(_FP, "ex2", r"ex2\.approx(\.ftz)?\.f32"),
    IsaRow(_FP, "tanh", r"tanh\.approx\.f32"),
    # 9.7.4 half precision floating point
    IsaRow(_HALF, "add", rf"add(\.rn)?(\.ftz)?(\.sat)?\.{_H}"),
    IsaRow(_HALF, "sub", rf"sub(\.rn)?(\.ftz)?(\.sat)?\.{_H}"),
    IsaRow(_HALF, "mul", rf"mul(\.rn)?(\.ftz)?(\.sat)?\.{_H}"),
    IsaRow(_HALF, "fma", rf"fma\.r[nzmp](\.ftz)?(\.sat|\.relu)?(\.oob(\.relu)?)?\.{_H}"),
    IsaRow(_HALF, "neg", rf"neg(\.ftz)?\.{_H}"),
    IsaRow(_HALF, "abs", rf"abs(\.ftz)?\.{_H}"),
    IsaRow(_HALF, "min", rf"min(\.ftz)?(\.NaN)?(\.xorsign\.abs)?\.{_H}"),
    IsaRow(_HALF, "max", rf"max(\.ftz)?(\.NaN)?(\.xorsign\.abs)?\.{_H}"),
    IsaRow(_HALF, "tanh", rf"tanh\.approx\.{_H}"),
    IsaRow(_HALF, "ex2", rf"ex2\.approx(\.ftz)?\.{_H}"),
    # 9.7.5 mixed precision (f32 with an f16/bf16 operand)
    IsaRow(_MIXED, "add", r"add(\.\w+)*\.f32\.b?f16", False, _SM100),
    IsaRow(_MIXED, "sub", r"sub(\.\w+)*\.f32\.b?f16", False, _SM100),
    IsaRow(_MIXED, "fma", r"fma(\.\w+)*\.f32\.b?f16", False, _SM100),
    # 9.7.6 comparison and selection
    IsaRow(_CMPSEL, "set", rf"set\.{_CMP}\.(u32|s32|f32)\.{_NOT_HALF}"),
    IsaRow(_CMPSEL, "setp", rf"setp\.{_CMP}\.{_NOT_HALF}"),
    IsaRow(_CMPSEL, "selp", r"selp\.\w+"),
    IsaRow(_CMPSEL, "slct", r"slct(\.ftz)?\.\w+\.(s32|f32)"),
    # 9.7.7 half precision comparison
    IsaRow(_HCMP, "set", rf"set\.{_CMP}\.(\w+\.{_H}|b?f16\.{_NOT_HALF})"),  # a half on either side
    IsaRow(_HCMP, "setp", rf"setp\.{_CMP}\.{_H}"),
    # 9.7.8 logic and shift
    IsaRow(_LOGIC, "and", r"and\.(pred|b(16|32|64))"),
    IsaRow(_LOGIC, "or", r"or\.(pred|b(16|32|64))"),
    IsaRow(_LOGIC, "xor", r"xor\.(pred|b(16|32|64))"),
    IsaRow(_LOGIC, "not", r"not\.(pred|b(16|32|64))"),
    IsaRow(_LOGIC, "cnot", r"cnot\.b(16|32|64)"),
    IsaRow(_LOGIC, "lop3", r"lop3(\.(and|or))?\.b32"),
    IsaRow(_LOGIC, "shf", r"shf\.[lr]\.(wrap|clamp)\.b32"),
    IsaRow(_LOGIC, "shl", r"shl\.b(16|32|64)"),
    IsaRow(_LOGIC, "shr", r"shr\.[bsu](16|32|64)"),
    # 9.7.9 data movement and conversion
    IsaRow(_DATA, "mov", _is_plain_mov),
    IsaRow(_DATA, "mov (pack / unpack)", _is_pack),
    IsaRow(_DATA, "shfl.sync", r"shfl\.sync\.\w+\.b32"),
    IsaRow(_DATA, "prmt", r"prmt\.b32(\.\w+)?"),
    IsaRow(_DATA, "ld", r"ld(?!.*\.nc\.)\..*"),
    IsaRow(_DATA, "ld.global.nc", r"ld\.global(\.\w+)*\.nc\..*"),
    IsaRow(_DATA, "ldu", r"ldu\..*"),
    IsaRow(_DATA, "st", r"st(?!\.async|\.bulk)\..*"),
    IsaRow(_DATA, "st.async", r"st\.async\..*"),
    IsaRow(_DATA, "st.bulk", r"st\.bulk.*", False, _SM100),
    IsaRow(_DATA, "multimem.ld_reduce, multimem.st, multimem.red", r"multimem\.(ld_reduce|st|red)\..*"),
    IsaRow(_DATA, "prefetch, prefetchu", r"prefetchu?\..*"),
    IsaRow(_DATA, "applypriority", r"applypriority\..*"),
    IsaRow(_DATA, "discard", r"discard\..*"),
    IsaRow(_DATA, "createpolicy", r"createpolicy\..*"),
    IsaRow(_DATA, "isspacep", r"isspacep\..*"),
    IsaRow(_DATA, "cvta", r"cvta\..*"),
    IsaRow(_DATA, "cvt", r"cvt\.(?!pack\.).*"),
    IsaRow(_DATA, "cvt.pack", r"cvt\.pack\..*"),
    IsaRow(_DATA, "mapa", r"mapa(\.[\w:]+)*"),
    IsaRow(_DATA, "getctarank", r"getctarank(\.[\w:]+)*"),
    IsaRow(_DATA, "cp.async", r"cp\.async\.(ca|cg)\..*"),
    IsaRow(_DATA, "cp.async.commit_group", r"cp\.async\.commit_group"),
    IsaRow(_DATA, "cp.async.wait_group, cp.async.wait_all", r"cp\.async\.wait_(group|all)"),
    IsaRow(_DATA, "cp.async.bulk", r"cp\.async\.bulk\.(shared|global)[\w:.]*"),
    IsaRow(_DATA, "cp.reduce.async.bulk", r"cp\.reduce\.async\.bulk\.(shared|global)[\w:.]*"),
    IsaRow(_DATA, "cp.async.bulk.prefetch", r"cp\.async\.bulk\.prefetch\.L2[\w:.]*"),
    IsaRow(_DATA, "cp.async.bulk.tensor", r"cp\.async\.bulk\.tensor\..*"),
    IsaRow(_DATA, "cp.reduce.async.bulk.tensor", r"cp\.reduce\.async\.bulk\.tensor\..*"),
    IsaRow(_DATA, "cp.async.bulk.prefetch.tensor", r"cp\.async\.bulk\.prefetch\.tensor\..*"),
    IsaRow(_DATA, "cp.async.bulk.commit_group", r"cp\.async\.bulk\.commit_group"),
    IsaRow(_DATA, "cp.async.bulk.wait_group", r"cp\.async\.bulk\.wait_group(\.read)?"),
    IsaRow(_DATA, "tensormap.replace", r"tensormap\.replace\..*"),
    # 9.7.10 texture, 9.7.11 surface
    IsaRow(_TEX, "tex", r"tex\..*"),
    IsaRow(_TEX, "tld4", r"tld4\..*"),
    IsaRow(_TEX, "txq", r"txq\..*"),
    IsaRow(_TEX, "istypep", r"istypep\..*"),
    IsaRow(_SURF, "suld", r"suld\..*"),
    IsaRow(_SURF, "sust", r"sust\..*"),
    IsaRow(_SURF, "sured", r"sured\..*"),
    IsaRow(_SURF, "suq", r"suq\..*"),
    # 9.7.12 control flow
    IsaRow(_CTRL, "bra", r"bra(\.uni)?"),
    IsaRow(_CTRL, "brx.idx", r"brx\.idx(\.uni)?"),
    IsaRow(_CTRL, "call", r"call(\.uni)?"),
    IsaRow(_CTRL, "ret", r"ret(\.uni)?"),
    IsaRow(_CTRL, "exit", r"exit"),
    # 9.7.13 parallel synchronization and communication
    IsaRow(_SYNC, "bar, barrier", r"(bar|barrier)(\.cta)?\.(sync|arrive|red)(\.\w+)*"),
    IsaRow(_SYNC, "bar.warp.sync", r"bar\.warp\.sync"),
    IsaRow(_SYNC, "barrier.cluster", r"barrier\.cluster(\.\w+)*"),
    IsaRow(_SYNC, "membar, fence", r"(membar|fence)\..*"),
    IsaRow(_SYNC, "atom", r"atom\..*"),
    IsaRow(_SYNC, "red", r"red\.(?!async\.).*"),
    IsaRow(_SYNC, "red.async", r"red\.async\..*"),
    IsaRow(_SYNC, "vote.sync", r"vote\.sync\..*"),
    IsaRow(_SYNC, "match.sync", r"match\.(any|all)\.sync\..*"),
    IsaRow(_SYNC, "activemask", r"activemask\.b32"),
    IsaRow(_SYNC, "redux.sync", r"redux\.sync\..*"),
    IsaRow(_SYNC, "griddepcontrol", r"griddepcontrol\.\w+"),
    IsaRow(_SYNC, "elect.sync", r"elect\.sync"),
    IsaRow(_SYNC, "mbarrier.init", r"mbarrier\.init\..*"),
    IsaRow(_SYNC, "mbarrier.inval", r"mbarrier\.inval\..*"),
    IsaRow(_SYNC, "mbarrier.expect_tx", r"mbarrier\.expect_tx\..*"),
    IsaRow(_SYNC, "mbarrier.complete_tx", r"mbarrier\.complete_tx\..*"),
    IsaRow(_SYNC, "mbarrier.arrive", r"mbarrier\.arrive(?!_drop)(\.[\w:]+)*"),
    IsaRow(_SYNC, "mbarrier.arrive_drop", r"mbarrier\.arrive_drop(\.[\w:]+)*"),
    IsaRow(_SYNC, "cp.async.mbarrier.arrive", r"cp\.async\.mbarrier\.arrive(\.[\w:]+)*"),
    IsaRow(_SYNC, "mbarrier.test_wait, mbarrier.try_wait", r"mbarrier\.(test|try)_wait(\.[\w:]+)*"),
    IsaRow(_SYNC, "mbarrier.pending_count", r"mbarrier\.pending_count\.b64"),
    IsaRow(_SYNC, "tensormap.cp_fenceproxy", r"tensormap\.cp_fenceproxy\..*"),
    IsaRow(_SYNC, "clusterlaunchcontrol.try_cancel", r"clusterlaunchcontrol\.try_cancel.*", False, _SM100),
    IsaRow(_SYNC, "clusterlaunchcontrol.query_cancel", r"clusterlaunchcontrol\.query_cancel.*", False, _SM100),
    # 9.7.14 warp-level matrix multiply-accumulate
    IsaRow(_WMMA, "wmma.load", r"wmma\.load\..*"),
    IsaRow(_WMMA, "wmma.store", r"wmma\.store\..*"),
    IsaRow(_WMMA, "wmma.mma", r"wmma\.mma\..*"),
    IsaRow(_WMMA, "mma", r"mma\.sync\..*"),
    IsaRow(_WMMA, "ldmatrix", r"ldmatrix\..*"),
    IsaRow(_WMMA, "stmatrix", r"stmatrix\..*"),
    IsaRow(_WMMA, "movmatrix", r"movmatrix\..*"),
    IsaRow(_WMMA, "mma.sp", r"mma\.sp(::ordered_metadata)?\..*"),
    # 9.7.15 warpgroup-level (sm_90a)
    IsaRow(_WGMMA, "wgmma.mma_async", r"wgmma\.mma_async\.sync\..*"),
    IsaRow(_WGMMA, "wgmma.mma_async.sp", r"wgmma\.mma_async\.sp\..*"),
    IsaRow(_WGMMA, "wgmma.fence", r"wgmma\.fence\..*"),
    IsaRow(_WGMMA, "wgmma.commit_group", r"wgmma\.commit_group\..*"),
    IsaRow(_WGMMA, "wgmma.wait_group", r"wgmma\.wait_group\..*"),
    # 9.7.16 tcgen05 (sm_100a and later)
    *(IsaRow(_TC05, f"tcgen05.{n}", rf"tcgen05\.{re.escape(n.split(',')[0])}\b.*", False, _SM100) for n in (
        "alloc, dealloc, relinquish_alloc_permit", "shift", "cp", "ld", "st", "wait", "mma", "mma.sp", "mma.ws",
        "mma.ws.sp", "fence", "commit")),
    # 9.7.17 stack manipulation
    IsaRow(_STACK, "stacksave", r"stacksave\.u64"),
    IsaRow(_STACK, "stackrestore", r"stackrestore\.u64"),
    IsaRow(_STACK, "alloca", r"alloca\.u64"),
    # 9.7.18 video (scalar, then SIMD)
    IsaRow(_VIDEO, "vadd, vsub, vabsdiff, vmin, vmax", r"v(add|sub|absdiff|min|max)\..*"),
    IsaRow(_VIDEO, "vshl, vshr", r"vsh[lr]\..*"),
    IsaRow(_VIDEO, "vmad", r"vmad\..*"),
    IsaRow(_VIDEO, "vset", r"vset\..*"),
    IsaRow(_VIDEO, "vadd2, vsub2, vavrg2, vabsdiff2, vmin2, vmax2", r"v(add|sub|avrg|absdiff|min|max)2\..*"),
    IsaRow(_VIDEO, "vset2", r"vset2\..*"),
    IsaRow(_VIDEO, "vadd4, vsub4, vavrg4, vabsdiff4, vmin4, vmax4", r"v(add|sub|avrg|absdiff|min|max)4\..*"),
    IsaRow(_VIDEO, "vset4", r"vset4\..*"),
    # 9.7.19 miscellaneous
    IsaRow(_MISC, "brkpt", r"brkpt"),
    IsaRow(_MISC, "nanosleep", r"nanosleep\.u32"),
    IsaRow(_MISC, "pmevent", r"pmevent(\.mask)?"),
    IsaRow(_MISC, "trap", r"trap"),
    IsaRow(_MISC, "setmaxnreg", r"setmaxnreg\..*"),
)
