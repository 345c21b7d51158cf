"""Where ptxforge refuses PTX that ptxas accepts, on purpose: the "stricter than ptxas" table.

Each `Strictness` row names one class of forms ptxas 13 assembles without complaint but that is
wrong at run time, meaningless, or a silent truncation, and that ptxforge therefore refuses.  The
row carries a PTX example ptxas accepts (checked by a test), the reason, and a pattern that the
refusal's message matches (the differential test lane uses it to tell a documented refusal from a
false one).  `docs/isa.md` shows this table; a test keeps the page equal to `markdown_table()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class Strictness:
    """One deliberate refusal.

    name: short title; body: PTX instruction lines ptxas accepts (registers as in the test
    kernel: %r/%rd/%f/%h/%p, `smem`, `mbar`); directives: the entry's directives (the body, if any, in that entry);
    target: the target the example is assembled for; reason: why ptxforge refuses it;
    match: a regular expression the ptxforge error message matches.
    """

    name: str
    body: str
    reason: str
    match: str
    target: str = "sm_80"
    directives: str = ""

    def matches(self, message: str) -> bool:
        """Whether a ptxforge error message is this refusal."""
        return re.search(self.match, message) is not None


STRICTER_THAN_PTXAS = (
    Strictness("integer immediates wider than the type", "add.u16 %h0, %h1, 70000;",
               "ptxas keeps the low bits silently; a constant that does not fit is almost always a bug",
               r"immediate -?\w+ does not fit \.\w+"),
    Strictness("barrier thread counts above 1024", "bar.sync 0, 2048;",
               "a CTA has at most 1024 threads, so the barrier could never complete",
               r"exceeds 1024 threads per CTA"),
    Strictness("shfl lane or offset outside 0..31", "shfl.sync.idx.b32 %r2, %r3, 32, 31, 0xffffffff;",
               "only the low 5 bits are used: lane 32 silently reads lane 0, lane -1 lane 31",
               r"shfl lane/offset -?\d+ is outside 0\.\.31"),
    Strictness("zero member masks", "shfl.sync.idx.b32 %r2, %r3, 1, 31, 0;\nbar.warp.sync 0;\n"
               "vote.sync.all.pred %p1, %p2, 0;",
               "a warp-synchronous instruction whose mask names no thread is undefined behaviour",
               r"mask must be a non-zero 32-bit lane mask"),
    Strictness(".maxntid above 1024 threads", "", "no CTA can have more than 1024 threads; the bound is a typo",
               r"a CTA has at most 1024", directives=".maxntid 1025, 1, 1"),
    Strictness("negative nanosleep durations", "nanosleep.u32 -5;",
               "the duration is a .u32: -5 becomes about 4.3 s (capped by the hardware at 1 ms)",
               r"nanosleep takes 0\.\.\d+ nanoseconds"),
    Strictness("mbarrier byte and arrival counts over 20 bits",
               "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [mbar], 1048576;",
               "the transaction and arrival counts of a phase are 20-bit fields; larger values wrap",
               r"is outside [01]\.\.1048575", target="sm_90"),
    Strictness("mbarriers aligned to less than 8 bytes", "mbarrier.init.shared.b64 [smem+4], 1;",
               "an mbarrier is an 8-byte object: a misaligned one faults at run time",
               r"mbarrier is (an 8-byte object and needs 8-byte alignment|8-byte aligned)"),
    Strictness("vector accesses whose constant offset breaks their alignment",
               "ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd0+8];",
               "a v2/v4 access must be aligned to its size; the misaligned address faults at run time",
               r"vector access must be \d+-byte aligned"),
    Strictness("single-value accesses at a constant offset that breaks a variable's alignment",
               "ld.shared.u32 %r2, [smem+2];",
               "the variable's alignment is a multiple of the access size, so the address is not: a misaligned "
               "access faults at run time",
               r"\d+-byte access must be \d+-byte aligned; \w+ is aligned to"),
    Strictness("integer mma fragments in float registers",
               "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r2, %r3, %r4, %r5}, {%f0, %f1, %f2, %f3}, "
               "{%r6, %r7}, {%r2, %r3, %r4, %r5};",
               "packed 8-bit values in .f32 registers are a type confusion; ptxas takes any 32-bit register",
               r"this fragment takes"),
    Strictness("an address of one state space used in another", "ld.shared.u32 %r2, [%rd0];",
               "the builder knows %rd0 holds a global address (param_ptr / cvta.to.global); as a shared "
               "address it reads whatever lies at that offset of the shared window, or faults",
               r"addresses \.\w+ memory through %\w+, which holds"),
    Strictness("a modifier written twice", "mul.sat.ftz.sat.f32 %f0, %f1, %f2;",
               "ptxas ignores the repeat; a doubled modifier is a typo for a different one",
               r"repeated modifier"),
    Strictness("st.param in a kernel", "st.param.u32 [%rd1], %r2;",
               "a kernel's parameters are read-only; st.param only fills the arguments of a call",
               r"st\.param is not allowed"),
    Strictness("ldmatrix and stmatrix counts other than x1, x2 and x4",
               "ldmatrix.sync.aligned.m8n8.x8.shared.b16 {%r2, %r3}, [%r0];",
               "the PTX ISA defines .x1/.x2/.x4; ptxas 13 lets .x8 and .x16 through with any register count",
               r"(ld|st)matrix\.m8n8\.x(?![124]\.)\d+(\.trans)?\.b16 is not a legal form"),
    Strictness("mma.m8n8k4 with .bf16 operands",
               "mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32 {%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}, "
               "{%r2, %r3}, {%r4, %r5}, {%f8, %f9, %f10, %f11, %f12, %f13, %f14, %f15};",
               "the PTX ISA defines m8n8k4 (four products per warp) for .f16 and .f64 only; ptxas 13 also takes "
               ".bf16, with no documented fragment layout or semantics",
               r"mma\.m8n8k4 with A \.bf16"),
    Strictness("one-sided fences below sm_90 or PTX ISA 8.6", "fence.acquire.gpu;\nfence.release.cta;",
               "the PTX ISA introduces fence.acquire / fence.release with PTX 8.6 on sm_90, and nvJitLink 13 (the "
               "assembler the driver's path uses) refuses them elsewhere; the stand-alone ptxas 13.0 takes them",
               r"'fence\.(acquire|release)\.[\w:.]+'.* needs (sm_90|it|PTX ISA 8\.6)"),
    Strictness("bulk copy sizes of 0 bytes", "cp.async.bulk.prefetch.L2.global [%rd0], 0;",
               "a bulk copy, store, reduction or prefetch of no bytes moves nothing (and an mbarrier waiting on its "
               "transaction bytes counts none): a size of 0 is almost always a size computed wrong; ptxas 13 takes it",
               r"cp\.async\.bulk size must be a positive multiple of 16 bytes in 16\.\.\d+, got 0\b",
               target="sm_90"),
    Strictness("alloca sizes below 1", "alloca.u64 %rd2, -1;\nalloca.u64 %rd3, 0;",
               "a size of 0 allocates nothing, and -1 is read as a .u64 near 2^64: neither is a stack allocation",
               r"alloca size -?\d+ must be positive"),
    Strictness("multicast masks naming CTAs beyond the declared cluster",
               "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
               "[%r0], [%rd0], 128, [%r1], 7;",
               "a kernel that declares its clusters (.reqnctapercluster, .maxclusterrank) has no CTA of a higher "
               "rank for a mask bit to name; ptxas takes any 16-bit mask",
               r"multicast ctaMask 0x[0-9a-f]+ names rank \d+, but the kernel's clusters have \d+ CTAs",
               target="sm_90a", directives=".reqnctapercluster 2, 1, 1"),
    Strictness("lop3 lookup tables above 255", "lop3.b32 %r2, %r3, %r4, %r5, 256;",
               "the table is 8 bits; ptxas drops the high bits",
               r"lop3 lookup table must be an int in 0\.\.255"),
)


def markdown_table() -> str:
    """The table as the docs show it: one row per entry, the example in code spans."""
    rows = ["| refused | example ptxas accepts | why |", "|---|---|---|"]
    for s in STRICTER_THAN_PTXAS:
        example = "\n".join(x for x in (s.directives, s.body) if x)
        example = " ".join(f"`{line.strip()}`" for line in example.splitlines() if line.strip())
        rows.append(f"| {s.name} | {example} ({s.target}) | {s.reason} |")
    return "\n".join(rows) + "\n"


def documented(message: str) -> Strictness | None:
    """The table row a ptxforge refusal message belongs to, or None."""
    return next((s for s in STRICTER_THAN_PTXAS if s.matches(message)), None)
