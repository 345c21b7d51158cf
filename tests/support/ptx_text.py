"""Hand-written PTX for cross-checking the validator against the real assembler.

`raw_kernel` wraps a few instruction lines in a complete module with a fixed set of
declared registers, so a test can feed ptxas exactly the input that ptxforge's validator
refuses and confirm that ptxas refuses it too (and accepts the corrected line).
"""

from __future__ import annotations

from ptxforge.assembler import assemble, available_backends
from ptxforge.errors import AssemblyError
from ptxforge.isa.targets import PtxVersion, Target

#: Registers every raw kernel declares (names follow the PTX examples: %r, %rd, %f, %p ...).
RAW_DECLS = """\
    .reg .pred  %p<8>;
    .reg .b16   %h<8>;
    .reg .b32   %r<32>;
    .reg .b64   %rd<16>;
    .reg .f32   %f<16>;
    .reg .f64   %fd<8>;
    .shared .align 128 .b8 smem[4096];
    .shared .align 8 .b64 mbar;"""


def raw_kernel(body: str, target: str = "sm_80", version: str | None = None, decls: str = "",
               directives: str = "") -> str:
    """A module with one kernel `raw(.param .u64 p)` whose body is `body` (and whose entry directives are
    `directives`).

    Before the body: `%rd0` = the global pointer parameter, `%r0` = address of `smem`,
    `%r1` = address of `mbar`.  `version` defaults to the least the target accepts, but at
    least 8.0 so that the forms under test, not the header, decide the outcome.
    """
    t = Target.parse(target)
    v = PtxVersion.parse(version) if version is not None else max(t.min_ptx, PtxVersion(8, 0))
    lines = [
        f".version {v}",
        f".target {t.name}",
        ".address_size 64",
        "",
        ".visible .entry raw(.param .u64 p)",
        *([directives] if directives else []),
        "{",
        RAW_DECLS,
        decls,
        "    ld.param.u64 %rd0, [p];",
        "    cvta.to.global.u64 %rd0, %rd0;",
        "    mov.u32 %r0, smem;",
        "    mov.u32 %r1, mbar;",
        *("    " + line.strip() for line in body.strip().splitlines()),
        "    ret;",
        "}",
        "",
    ]
    return "\n".join(lines)


def assembler_verdict(ptx: str, arch: str | None = None, backend: str | None = None) -> str | None:
    """None when the assembler accepts `ptx`; otherwise its diagnostics joined into one string.

    The stand-alone ptxas is preferred (it is the reference); nvJitLink runs the same assembler.
    """
    if backend is None:
        backend = "ptxas" if "ptxas" in available_backends() else "auto"
    try:
        assemble(ptx, arch, backend=backend)
    except AssemblyError as e:
        found = "; ".join(msg for _, sev, msg in e.diagnostics if sev != "warning")
        return found or e.log.strip() or str(e)
    return None
