"""Offline assembly (no GPU): PTX -> cubin through nvJitLink (pip) or ptxas (PATH).

Returns the cubin and the resource usage ptxas reports (registers, shared memory,
spills).  When the assembler rejects the PTX, the error quotes its message with
the offending PTX line and the Python line that emitted it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from .errors import AssemblyError, ToolchainMissing
from .isa.targets import PtxVersion, Target, ptx_for_cuda, ptx_header

_PTXFORGE_INTERNAL = True

BACKENDS = ("nvjitlink", "ptxas")


@dataclass(frozen=True)
class KernelResources:
    name: str
    registers: int = 0
    barriers: int = 0
    shared: int = 0  # static shared memory, bytes
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem: int = 0

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    def __str__(self) -> str:
        return (f"{self.name}: {self.registers} registers, {self.shared} B static smem, {self.barriers} barriers, "
                f"{self.stack} B stack, spills {self.spill_stores} B stored / {self.spill_loads} B loaded")


@dataclass(frozen=True)
class AssemblyResult:
    cubin: bytes
    arch: str
    backend: str
    version: PtxVersion
    ptx: str
    log: str
    kernels: dict = field(default_factory=dict)  # name -> KernelResources

    def resources(self, kernel: str | None = None) -> KernelResources:
        if kernel is None:
            if len(self.kernels) != 1:
                raise KeyError(f"{len(self.kernels)} kernels; name one of {sorted(self.kernels)}")
            return next(iter(self.kernels.values()))
        return self.kernels[kernel]

    def report(self) -> str:
        head = f"{self.arch} via {self.backend}, PTX ISA {self.version}, cubin {len(self.cubin)} bytes"
        return "\n".join([head] + ["  " + str(k) for k in self.kernels.values()])

    def sass(self) -> str:
        """Disassembly of the cubin (needs nvdisasm or cuobjdump: PATH or NVIDIA's pip wheels)."""
        return disassemble(self.cubin)

    def sass_opcodes(self, kernel: str | None = None) -> Counter:
        """Counter of SASS opcodes with their modifiers (e.g. 'IMMA.16832.S8.S8')."""
        return sass_opcodes(self.sass(), kernel)


# ---------------------------------------------------------------- tools

def _pip_bin(name: str) -> str | None:
    try:
        import nvidia  # namespace package from NVIDIA's wheels
    except ImportError:
        return None
    for base in getattr(nvidia, "__path__", []):
        for sub in ("cu13/bin", "cu12/bin", f"cuda_{name}/bin", "cuda_nvcc/bin"):
            p = os.path.join(base, sub, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> str | None:
    """A CUDA tool (ptxas, nvdisasm, cuobjdump) from PATH, CUDA_HOME or NVIDIA's pip wheels."""
    p = shutil.which(name)
    if p:
        return p
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.path.isfile(os.path.join(root, "bin", name)):
            return os.path.join(root, "bin", name)
    if os.path.isfile(f"/usr/local/cuda/bin/{name}"):
        return f"/usr/local/cuda/bin/{name}"
    return _pip_bin(name)


@functools.lru_cache(maxsize=None)
def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()  # loads the shared library; raises if the wheel is missing
        return nvjitlink
    except Exception:
        return None


def available_backends() -> tuple:
    out = []
    if _nvjitlink() is not None:
        out.append("nvjitlink")
    if find_tool("ptxas"):
        out.append("ptxas")
    return tuple(out)


@functools.lru_cache(maxsize=None)
def backend_ptx_cap(backend: str) -> PtxVersion:
    """The newest PTX ISA the backend accepts."""
    if backend == "nvjitlink":
        major, minor = _nvjitlink().version()
        return ptx_for_cuda(major * 1000 + minor * 10)
    out = subprocess.run([find_tool("ptxas"), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        raise ToolchainMissing(f"cannot read the ptxas version from: {out!r}")
    return ptx_for_cuda(int(m.group(1)) * 1000 + int(m.group(2)) * 10)


def _pick_backend(backend: str) -> str:
    have = available_backends()
    if backend == "auto":
        if not have:
            raise ToolchainMissing("no PTX assembler found: install NVIDIA's nvJitLink wheel "
                                   "(pip install nvidia-nvjitlink) or put ptxas on PATH")
        return have[0]
    if backend not in BACKENDS:
        raise ToolchainMissing(f"unknown assembler backend {backend!r}; one of {BACKENDS} or 'auto'")
    if backend not in have:
        raise ToolchainMissing(f"assembler backend {backend!r} is not available here (available: {have or 'none'})")
    return backend


# ---------------------------------------------------------------- assemble

def assemble(source, arch=None, *, backend: str = "auto", options=(), version=None) -> AssemblyResult:
    """Assemble a Module (or PTX text) to a cubin for `arch` (default: the module's target).

    Returns an AssemblyResult with per-kernel resource usage.  Raises AssemblyError with the
    assembler's messages mapped to PTX lines and, for Modules, to the Python lines that emitted them.
    """
    from .module import Module
    be = _pick_backend(backend)
    module = source if isinstance(source, Module) else None
    if module is not None:
        target = Target.parse(arch) if arch is not None else module.target
        rendered = module.render(version=version, cap=None if version is not None else backend_ptx_cap(be))
        ptx, ptx_version = rendered.text, rendered.version
    else:
        ptx = str(source)
        ptx_version, named = ptx_header(ptx)
        ptx_version = ptx_version or PtxVersion(0, 0)
        if arch is None:
            if named is None:
                raise AssemblyError("PTX text has no .target line; pass arch=")
            arch = named
        target = Target.parse(arch)
    if be == "nvjitlink":
        ok, cubin, log = _run_nvjitlink(ptx, target, options)
    else:
        ok, cubin, log = _run_ptxas(ptx, target, options)
    if not ok:
        raise _assembly_error(log, module, ptx, target, be, version)
    return AssemblyResult(cubin, target.name, be, ptx_version, ptx, log, parse_resources(log))


def _run_nvjitlink(ptx: str, target: Target, options):
    nvj = _nvjitlink()
    opts = [f"-arch={target.name}", "-verbose", *options]
    h = nvj.create(len(opts), opts)
    ok = True
    try:
        data = ptx.encode()
        try:
            nvj.add_data(h, nvj.InputType.PTX, data, len(data), "ptxforge.ptx")
            nvj.complete(h)
        except nvj.nvJitLinkError:
            ok = False
        info = _log(nvj, h, "info")
        err = _log(nvj, h, "error")
        cubin = b""
        if ok:
            n = nvj.get_linked_cubin_size(h)
            buf = bytearray(n)
            nvj.get_linked_cubin(h, buf)
            cubin = bytes(buf)
        return ok, cubin, (err + "\n" + info).strip()
    finally:
        nvj.destroy(h)


def _log(nvj, h, which):
    size = getattr(nvj, f"get_{which}_log_size")(h)
    if not size:
        return ""
    buf = bytearray(size)
    getattr(nvj, f"get_{which}_log")(h, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def _run_ptxas(ptx: str, target: Target, options):
    tool = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="ptxforge-") as d:
        src, out = os.path.join(d, "ptxforge.ptx"), os.path.join(d, "out.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        p = subprocess.run([tool, f"-arch={target.name}", "-v", *options, src, "-o", out],
                           capture_output=True, text=True)
        log = (p.stdout + p.stderr).replace(src, "ptxforge.ptx")
        if p.returncode != 0:
            return False, b"", log
        with open(out, "rb") as f:
            return True, f.read(), log


_DIAG = re.compile(r"ptxas[^,\n]*?(?:ptx input|\.ptx), line (\d+); (error|warning|fatal)\s*:\s*(.*)")
# e.g. "ptxas warning : Program uses 32-bit address on line '14' which is conflicting with .address_size 64"
_DIAG_ON_LINE = re.compile(r"ptxas (error|warning|fatal)\s*:\s*(.*\bon line '(\d+)'.*)")
# a fatal message with no line ("32-Bit compilation is no longer supported"); the summary line is noise
_FATAL = re.compile(r"ptxas fatal\s*:(.*)")


def diagnostics(log: str):
    """(line, severity, message) for each ptxas diagnostic in a log that names a PTX line."""
    out = [(int(m.group(1)), m.group(2), m.group(3).strip()) for m in _DIAG.finditer(log)]
    out += [(int(m.group(3)), m.group(1), m.group(2).strip()) for m in _DIAG_ON_LINE.finditer(log)]
    return sorted(out, key=lambda d: d[0])


def _assembly_error(log, module, ptx, target, backend, version) -> AssemblyError:
    diags = diagnostics(log)
    lines = ptx.splitlines()
    parts = [f"{backend} rejected the PTX for {target.name}:"]
    for line, sev, msg in diags:
        if module is not None:
            where = module.describe_line(line, version=version)
        else:
            where = f"PTX line {line}: {lines[line - 1].strip() if 0 < line <= len(lines) else '?'}"
        parts.append(f"  {sev}: {msg}\n    {where}")
    if not diags:
        parts.append("  " + (log.strip() or "(the assembler gave no message)").replace("\n", "\n  "))
    else:
        fatal = [m.group(1).strip() for m in _FATAL.finditer(log)]
        parts += [f"  fatal: {msg}" for msg in fatal if msg and not msg.startswith("Ptx assembly aborted")]
    return AssemblyError("\n".join(parts), log=log, diagnostics=diags)


_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?([A-Za-z_$][\w$]*)'?")
# ptxas 13 adds "N bytes cumulative stack size" before the smem clause for kernels with a stack frame;
# the frame itself is read from the "bytes stack frame" line (_SPILL).
_USED = re.compile(r"[Uu]sed (\d+) registers(?:, used (\d+) barriers)?(?:, \d+ bytes cumulative stack size)?"
                   r"(?:, (\d+) bytes smem)?(?:, (\d+) bytes cmem\[0\])?")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


_LINK_USED = re.compile(r"used (\d+) registers, used (\d+) barriers, (\d+) stack, (\d+) bytes smem, "
                        r"(\d+) bytes cmem\[0\], (\d+) bytes lmem")


_RESERVED_SMEM = 1024


def parse_resources(log: str) -> dict:
    """Resource usage per kernel from a ptxas -v (or nvJitLink -verbose) log.

    ptxas's own lines are preferred.  Some nvJitLink builds print only their summary
    ("info : used N registers, ..., N bytes lmem"); it has no spill counts, so there the
    local-memory bytes beyond the stack frame stand in for them (a spilling kernel has some).
    """
    ptxas = _parse_ptxas_lines(log)
    if ptxas:
        return ptxas
    return _parse_link_summary(log)


def _parse_ptxas_lines(log: str) -> dict:
    out: dict = {}
    cur = None
    vals: dict = {}
    for line in log.splitlines():
        if line.startswith("info"):
            continue  # nvJitLink's own summary repeats what ptxas said
        m = _FUNC.search(line)
        if m:
            cur = m.group(1)
            vals = out.setdefault(cur, {"name": cur})
            continue
        if cur is None:
            continue
        m = _SPILL.search(line)
        if m:
            vals.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m:
            vals.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0), shared=int(m.group(3) or 0),
                        cmem=int(m.group(4) or 0))
    return {k: KernelResources(**v) for k, v in out.items()}


def _parse_link_summary(log: str) -> dict:
    out: dict = {}
    cur = None
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            cur = m.group(1)
            continue
        m = _LINK_USED.search(line)
        if m and cur is not None:
            regs, bars, stack, smem, cmem, lmem = (int(g) for g in m.groups())
            beyond = max(0, lmem - stack)
            # the summary adds the 1 KB the driver reserves for any block that uses shared memory
            # (sm_80 and newer); ptxas's figure, which the rest of ptxforge uses, is without it
            shared = max(0, smem - _RESERVED_SMEM) if smem else 0
            out[cur] = KernelResources(cur, regs, bars, shared, stack, beyond, beyond, cmem)
    return out


# ---------------------------------------------------------------- disassembly

def disassembler() -> str | None:
    return find_tool("nvdisasm") or find_tool("cuobjdump")


@functools.lru_cache(maxsize=32)  # per-kernel opcode counts disassemble the same cubin again
def disassemble(cubin: bytes) -> str:
    tool = disassembler()
    if tool is None:
        raise ToolchainMissing("no disassembler found: install nvidia-cuda-nvdisasm (pip) or put nvdisasm/cuobjdump "
                               "on PATH")
    with tempfile.TemporaryDirectory(prefix="ptxforge-") as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        args = [tool, "-c", path] if tool.endswith("nvdisasm") else [tool, "--dump-sass", path]
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise AssemblyError(f"{os.path.basename(tool)} failed: {p.stderr.strip()}")
        return p.stdout


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", re.I)
_SASS_FUNC = re.compile(r"(?:\.text\.|Function : )([A-Za-z_$][\w$]*)")


def sass_opcodes(sass: str, kernel: str | None = None) -> Counter:
    """Count SASS opcodes (with modifiers) in a disassembly, optionally for one kernel only."""
    counts: Counter = Counter()
    current = None
    for line in sass.splitlines():
        m = _SASS_FUNC.search(line)
        if m and ("Function :" in line or line.lstrip().startswith(".text.")):
            current = m.group(1).rstrip(":")
            continue
        if kernel is not None and current != kernel:
            continue
        m = _SASS_LINE.search(line)
        if m:
            counts[m.group(2)] += 1
    return counts
