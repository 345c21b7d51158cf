"""`lint`: every finding of a PTX file with FILE:LINE.

Findings: lines the tables reject (illegal forms, register-kind mismatches, forms they lack),
lines that need a newer architecture or PTX ISA than the file's `.target`/`.version` (or than
`arch`), instructions the target runs as emulation (s4/u4 mma.sync on sm_90), and a note with
the least `.version` the file needs and the line that needs it.
"""

from __future__ import annotations

import warnings

from ..errors import PtxforgeError
from ..isa.instruction import Instruction
from ..isa.opaque import is_opaque
from ..isa.targets import Target, least_version
from ..isa.tensor import S4_EMULATION_COST
from .reader import Finding, Reader, needing, require_text

_PTXFORGE_INTERNAL = True


def lint(text: str, *, filename: str | None = None, arch: str | None = None) -> list:
    """Findings (errors, warnings, notes) for one PTX file (its text, a str), in line order."""
    require_text(text, "lint")
    name = filename or "<ptx>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = Reader(text, filename, strict=False)
        try:
            reading = reader.read()
        except PtxforgeError as e:  # an error the reader cannot read past: what it found before it, and it
            line = e.loc.lineno if e.loc is not None else 0
            findings = list(reader.findings)
            findings.append(Finding(name, line, "error", e.message.split("\n")[0].split(": ", 1)[-1]))
            findings.append(Finding(name, line, "note", "the reader stops at this error: lines it had not read "
                                                        "yet are not checked"))
            findings.sort(key=lambda f: (f.line, f.severity))
            return findings
    findings = list(reading.findings)
    module = reading.module
    if module is None:
        return findings
    file_target = reading.target
    other = Target.parse(arch) if arch is not None else None
    need = []
    for k in module.kernels:
        for ins in k.body:
            if not isinstance(ins, Instruction) or is_opaque(ins):
                continue
            line = ins.loc.lineno if ins.loc is not None else 0
            need.append((ins.req, (line, ins.mnemonic)))
            if other is not None and other != file_target:
                try:
                    ins.req.check(other, needing(ins))
                except PtxforgeError as e:
                    findings.append(Finding(name, line, "error", f"{e.message} (--arch {other.name})"))
                if ins.opcode == "mma" and ins.info.a_type.name in ("s4", "u4") and not other.mma_s4_native \
                        and file_target.mma_s4_native:
                    findings.append(Finding(name, line, "warning", f"'{ins.mnemonic}' has no 4-bit tensor path "
                                                                   f"on {other.name}: ptxas emulates it "
                                                                   f"({S4_EMULATION_COST})"))
    # instructions kept opaque as too new for the file's target or .version: what the module would need
    need += [(req, where) for req, where in reading.too_new]
    if need:
        target = other or file_target
        arch = max(need, key=lambda x: (x[0].min_sm, x[0].arch_specific))  # wgmma, setmaxnreg: the 'a' target
        findings.append(Finding(name, arch[1][0] if arch[0].min_sm > 80 else reading.target_line, "note",
                                f"the least target the module needs is sm_{arch[0].min_sm}"
                                + ("a" if arch[0].arch_specific else "")
                                + (f" (for '{arch[1][1]}')" if arch[0].min_sm > 80 else "")
                                + f"; the file targets {file_target.name}"))
        worst = max(need, key=lambda x: x[0].ptx_on(target))
        least = least_version(target, [(r, w) for r, w in need])
        if worst[0].ptx_on(target) > target.min_ptx:
            findings.append(Finding(name, worst[1][0], "note",
                                    f"the module needs at least .version {least} (for '{worst[1][1]}'); "
                                    f"the file says {reading.version}"))
        else:
            findings.append(Finding(name, reading.target_line, "note", f"the module needs at least .version {least} "
                                                     f"(for .target {target.name}); the file says {reading.version}"))
        if reading.version is not None and least > reading.version:
            why = (f"'{worst[1][1]}' on line {worst[1][0]}" if worst[0].ptx_on(target) > target.min_ptx
                   else f"{'--arch' if other is not None else '.target'} {target.name}")
            findings.append(Finding(name, reading.version_line, "error",
                                    f".version {reading.version} is older than the {least} the module needs "
                                    f"(for {why})"))
    findings.sort(key=lambda f: (f.line, f.severity))
    return findings


def has_errors(findings) -> bool:
    """Whether any finding is an error (lint's exit status)."""
    return any(f.severity == "error" for f in findings)
