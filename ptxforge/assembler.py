"""Offline assembly (no GPU): PTX -> cubin through nvJitLink (pip) or ptxas (PATH).

Returns the cubin and the resource usage ptxas reports (registers, shared memory,
spills).  When the assembler rejects the PTX, the error quotes its message with
the offending PTX line and the Python line that emitted it.

The tools run bounded: ptxas and nvdisasm/cuobjdump get a timeout (``timeout=``, else
$PTXFORGE_TOOL_TIMEOUT seconds, default 300; ``inf`` for none), their temporary directory is removed whatever
happens, a tool killed by a signal is reported as a crash naming the signal, PTX holding a NUL
character is refused before any tool sees it (a C string would end there), and a bad option or
unknown architecture is a ToolchainError, not a raw nvJitLinkError.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from .errors import AssemblyError, TargetError, ToolchainError, ToolchainMissing
from .isa.targets import PtxVersion, Target, ptx_for_cuda, ptx_header
from .module import ptx_lines

_PTXFORGE_INTERNAL = True

BACKENDS = ("nvjitlink", "ptxas")

#: Environment variable bounding each ptxas / nvdisasm / cuobjdump run, in seconds.
TOOL_TIMEOUT_ENV = "PTXFORGE_TOOL_TIMEOUT"
DEFAULT_TOOL_TIMEOUT = 300.0
#: The longest finite limit a subprocess wait can take (the OS's poll() counts milliseconds in an int):
#: 1e6 s, about 11.6 days; `inf` means no limit.
MAX_TOOL_TIMEOUT = 1e6


def tool_timeout(timeout=None) -> float | None:
    """Seconds a toolchain subprocess may run: `timeout`, else $PTXFORGE_TOOL_TIMEOUT, else 300; None (no limit)
    for infinity.  Zero, negative, NaN or finite values above MAX_TOOL_TIMEOUT are a ToolchainError."""
    if timeout is None:
        raw = os.environ.get(TOOL_TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_TOOL_TIMEOUT
        try:
            timeout = float(raw)
        except ValueError:
            raise ToolchainError(f"{TOOL_TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    try:
        timeout = float(timeout)
    except (TypeError, ValueError, OverflowError):
        raise ToolchainError(f"a toolchain timeout is a number of seconds, got {timeout!r}") from None
    if not timeout > 0:
        raise ToolchainError(f"a toolchain timeout must be a positive number of seconds, got {timeout}")
    if math.isinf(timeout):
        return None
    if timeout > MAX_TOOL_TIMEOUT:
        raise ToolchainError(f"a toolchain timeout of {timeout:g} s is beyond what a process wait can take (at most "
                             f"{MAX_TOOL_TIMEOUT:g} s); use inf (or {TOOL_TIMEOUT_ENV}=inf) for no limit")
    return timeout


def refuse_nul(ptx: str) -> None:
    """Raise AssemblyError naming the line and column of a NUL character in PTX text.

    The driver and nvJitLink read PTX as a C string, so everything after a NUL would silently vanish.
    """
    i = ptx.find("\0")
    if i < 0:
        return
    line = ptx.count("\n", 0, i) + 1
    col = i - (ptx.rfind("\n", 0, i) + 1) + 1
    raise AssemblyError(f"the PTX holds a NUL character at line {line}, column {col}; the assembler would read only "
                        "the text before it (kernels after it would silently go missing)")


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def run_tool(args, what: str, timeout=None, **kwargs) -> subprocess.CompletedProcess:
    """Run a toolchain command bounded by `timeout`; a hang or a death by signal is a ToolchainError."""
    limit = tool_timeout(timeout)
    try:
        p = subprocess.run(args, capture_output=True, timeout=limit, **kwargs)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{what} did not finish within {limit:g} s and was killed (raise the limit with "
                             f"timeout= or {TOOL_TIMEOUT_ENV})") from None
    except OSError as e:
        raise ToolchainMissing(f"cannot run {what} ({args[0]}): {e.strerror or e}") from None
    if p.returncode < 0:
        out = p.stderr if isinstance(p.stderr, str) else (p.stderr or b"").decode(errors="replace")
        raise ToolchainError(f"{what} crashed: killed by {_signal_name(p.returncode)}"
                             + (f"\n  {out.strip()}" if out and out.strip() else ""))
    return p


@dataclass(frozen=True)
class KernelResources:
    """What the assembler reports for one kernel of a cubin.

    Attributes:
        name: the kernel's name.
        registers: registers per thread.
        barriers: named barriers used.
        shared: static shared memory, bytes.
        stack: stack frame, bytes.
        spill_stores: bytes of register spills stored.
        spill_loads: bytes of register spills loaded.
        cmem: constant memory (bank 0), bytes.
    """
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
        """Spilled bytes, stored and loaded together (0 for a kernel that fits in registers)."""
        return self.spill_stores + self.spill_loads

    def __str__(self) -> str:
        return (f"{self.name}: {self.registers} registers, {self.shared} B static smem, {self.barriers} barriers, "
                f"{self.stack} B stack, spills {self.spill_stores} B stored / {self.spill_loads} B loaded")


@dataclass(frozen=True)
class AssemblyResult:
    """The outcome of `assemble`: the cubin, how it was made and what each kernel uses.

    Attributes:
        cubin: the SASS binary.
        arch: the ``sm_XX`` it was assembled for.
        backend: "nvjitlink" or "ptxas".
        version: the PTX ``.version`` the text carried.
        ptx: the PTX text assembled.
        log: the assembler's info log.
        kernels: kernel name -> `KernelResources`.
    """
    cubin: bytes
    arch: str
    backend: str
    version: PtxVersion
    ptx: str
    log: str
    kernels: dict = field(default_factory=dict)  # name -> KernelResources

    def resources(self, kernel: str | None = None) -> KernelResources:
        """The `KernelResources` of `kernel`, or of the only kernel when `kernel` is None (KeyError naming the
        kernels otherwise).
        """
        if kernel is None:
            if len(self.kernels) != 1:
                raise KeyError(f"{len(self.kernels)} kernels; name one of {sorted(self.kernels)}")
            return next(iter(self.kernels.values()))
        return self.kernels[kernel]

    def report(self) -> str:
        """One line naming the arch and the assembler with its version, then one per kernel's resources."""
        head = f"{self.arch} via {assembler_name(self.backend)}, PTX ISA {self.version}, cubin {len(self.cubin)} bytes"
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
    """The offline assemblers found on this machine, in order of preference: "nvjitlink" (the pip wheel) and/or
    "ptxas" (PATH or pip).
    """
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
    out = run_tool([find_tool("ptxas"), "--version"], "ptxas --version", text=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        raise ToolchainMissing(f"cannot read the ptxas version from: {out!r}")
    return ptx_for_cuda(int(m.group(1)) * 1000 + int(m.group(2)) * 10)


@functools.lru_cache(maxsize=None)
def assembler_name(backend: str) -> str:
    """The backend with its version, e.g. "nvJitLink 13.0" or "ptxas 13.0 (V13.0.88)"; register counts
    and resources can differ between versions."""
    try:
        if backend == "nvjitlink":
            major, minor = _nvjitlink().version()
            return f"nvJitLink {major}.{minor}"
        if backend == "ptxas":
            out = run_tool([find_tool("ptxas"), "--version"], "ptxas --version", text=True).stdout
            m = re.search(r"release (\d+\.\d+), (V[\d.]+)", out)
            return f"ptxas {m.group(1)} ({m.group(2)})" if m else "ptxas"
    except Exception:  # the report still names the backend
        pass
    return backend


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

def assemble(source, arch=None, *, backend: str = "auto", options=(), version=None,
             timeout: float | None = None) -> AssemblyResult:
    """Assemble a Module (or PTX text, a str) to a cubin for `arch` (default: the module's target); anything else
    is an AssemblyError naming what it got.

    `version` writes a Module at that `.version` (default: the least that covers it, within what the
    backend accepts); one below what the module needs is a TargetError naming what needs more.
    `options` are further command-line options of the backend, as strings (e.g. ``("-O3",)`` or
    ``("-maxrregcount=64",)``, which both backends take); `backend` is "auto" (nvJitLink
    where installed, else ptxas), "nvjitlink" or "ptxas".

    The PTX keeps its own ``.target``: an `arch` it cannot be assembled for (an older GPU than the module or
    text targets, or another than an arch-specific sm_XYa target) is a TargetError saying how to rebuild it,
    raised before the assembler runs.

    Returns an AssemblyResult with per-kernel resource usage.  Raises AssemblyError with the
    assembler's messages mapped to PTX lines and, for Modules, to the Python lines that emitted them;
    ToolchainError when the assembler crashed, ran past `timeout` seconds (ptxas; default
    $PTXFORGE_TOOL_TIMEOUT or 300) or refused an option or the arch.
    """
    from .module import Module
    _refuse_unassemblable(source)
    be = _pick_backend(backend)
    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise ToolchainError(f"options= takes a sequence of option strings, got {options!r}")
    module = source if isinstance(source, Module) else None
    if module is not None:
        target = Target.parse(arch) if arch is not None else module.target
        if target != module.target:
            check_for_target(module, target)  # first: an instruction's own requirement names its line
            refuse_unreachable_target(module.target, target, "the module")
        rendered = module.render(version=version, cap=None if version is not None else backend_ptx_cap(be))
        ptx, ptx_version = rendered.text, rendered.version
    else:
        ptx = str(source)
        ptx_version, named = ptx_header(ptx)
        ptx_version = ptx_version or PtxVersion(0, 0)
        if named is None:  # (ptxas and nvJitLink refuse such text whatever arch= says)
            raise AssemblyError("PTX text has no .target line: PTX needs one after .version (e.g. '.target sm_90')"
                                + ("" if arch is None else f"; arch={arch!r} names the machine code, not the PTX's "
                                   "target"))
        if arch is None:
            arch = named
        try:
            target = Target.parse(arch)
        except TargetError as e:
            raise ToolchainError(f"cannot assemble for {arch!r}: {e.message}") from None
        if named is not None:
            try:
                built = Target.parse(named)
            except TargetError:
                built = None  # a target ptxforge does not model: the assembler decides
            if built is not None and built != target:
                refuse_unreachable_target(built, target, "the PTX")
    refuse_nul(ptx)
    if be == "nvjitlink":
        ok, cubin, log = _run_nvjitlink(ptx, target, options)
    else:
        ok, cubin, log = _run_ptxas(ptx, target, options, timeout)
    if not ok:
        raise _assembly_error(log, module, ptx, target, be, version)
    return AssemblyResult(cubin, target.name, be, ptx_version, ptx, log, parse_resources(log))


def _refuse_unassemblable(source) -> None:
    """Raise AssemblyError unless `source` is what `assemble` takes, a Module or PTX text (a str), naming what it
    is and, for bytes, a Kernel or a KernelBuilder, how to make it one."""
    from .builder import KernelBuilder
    from .kernel import Kernel
    from .module import Module
    if isinstance(source, (Module, str)):
        return
    got = "None" if source is None else type(source).__name__
    hint = ""
    if isinstance(source, (bytes, bytearray, memoryview)):
        hint = ": decode it first, e.g. data.decode('utf-8')"
    elif isinstance(source, KernelBuilder):
        hint = ": finish it into a Module first (k.module())"
    elif isinstance(source, Kernel):
        hint = ": put it in a Module first (pf.Module([kernel]))"
    raise AssemblyError(f"assemble() takes a Module or PTX text (a str), got {got}{hint}")


def refuse_unreachable_target(built: Target, target: Target, what: str) -> None:
    """Raise TargetError when PTX whose ``.target`` is `built` cannot be assembled for `target`: an older GPU
    (the PTX may use what only `built` has), or any other than `built` for arch-specific (sm_XYa) PTX.  The PTX
    keeps its ``.target`` (assembling never re-targets it), so the error says how to rebuild it."""
    how = (f"rebuild it for {target.name} (KernelBuilder(..., target='{target.name}'), or the PTX's .target line "
           "for text)")
    if built.arch_specific and built != target:
        raise TargetError(f"{what} targets {built.name}, whose arch-specific PTX assembles only for {built.name}; "
                          f"assemble it for {built.name}, or {how}")
    if built.sm > target.sm:
        raise TargetError(f"{what} targets {built.name}; assemble it for {built.name} or newer, or {how}")


def check_for_target(module, target: Target) -> None:
    """Re-check a module built for one target against another before assembling it there.

    Every instruction's requirement (least sm, arch-specific forms) and every sm_90 special
    register is checked against `target`, and the error names the Python line that emitted the
    culprit; 4-bit mma.sync that `target` runs as a software routine warns
    (`EmulatedInstructionWarning`), as the builder does for a kernel built for that target.
    """
    from .isa.operands import SPECIAL_REQUIREMENTS, SpecialReg
    from .isa.tensor import MmaForm, warn_emulated
    for k in module.kernels:
        for ins in k.instructions:
            try:
                for op in ins.operands:
                    req = SPECIAL_REQUIREMENTS.get(op.name) if type(op) is SpecialReg else None
                    if req is not None and target.sm < req.min_sm:
                        raise TargetError(f"%{op.name} needs sm_{req.min_sm} or newer; kernel {k.name} was built "
                                          f"for {module.target.name} and is assembled for {target.name}")
                if ins.req.min_sm > target.sm or ins.req.arch_specific:
                    ins.req.check(target, f"'{ins.mnemonic}' (kernel {k.name}, built for {module.target.name})")
            except TargetError as e:
                e.loc = ins.loc or e.loc  # the line that emitted the instruction, not the assemble() call
                raise
            form = ins.info
            if (ins.opcode == "mma" and isinstance(form, MmaForm) and form.a_type.bits == 4
                    and not target.mma_s4_native):
                warn_emulated(form, target, ins.loc)


def _run_nvjitlink(ptx: str, target: Target, options):
    nvj = _nvjitlink()
    opts = [f"-arch={target.name}", "-verbose", *options]
    try:
        h = nvj.create(len(opts), opts)
    except nvj.nvJitLinkError as e:
        raise ToolchainError(f"nvJitLink refused the options {' '.join(opts)} ({e}); check the arch and options") \
            from None
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


_PTXAS_USAGE = re.compile(r"ptxas fatal\s*:\s*(Unknown option|Value '[^']*' is not defined for option|"
                          r"Missing value for option|Invalid value)[^\n]*")


def _run_ptxas(ptx: str, target: Target, options, timeout=None):
    tool = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="ptxforge-") as d:
        src, out = os.path.join(d, "ptxforge.ptx"), os.path.join(d, "out.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        p = run_tool([tool, f"-arch={target.name}", "-v", *options, src, "-o", out], "ptxas", timeout, text=True)
        log = (p.stdout + p.stderr).replace(src, "ptxforge.ptx")
        if p.returncode != 0:
            m = _PTXAS_USAGE.search(log)
            if m:
                raise ToolchainError(f"ptxas refused its command line ({m.group(0).strip()}); "
                                     f"arch {target.name}, options {list(options)}")
            return False, b"", log
        if not os.path.isfile(out):
            first = log.strip().splitlines()[:1]
            raise ToolchainError(f"ptxas wrote no cubin (arch {target.name}, options {list(options)}): an option "
                                 "such as --version or --help makes it print and stop instead of compiling; pass "
                                 "only options that compile" + (f"\n  it said: {first[0]}" if first else ""))
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
    lines = ptx_lines(ptx)  # (numbered as ptxas numbers them: a form feed is no line break)
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
    """The path of nvdisasm or cuobjdump (PATH or NVIDIA's pip wheels), or None when neither is found."""
    return find_tool("nvdisasm") or find_tool("cuobjdump")


@functools.lru_cache(maxsize=32)  # per-kernel opcode counts disassemble the same cubin again
def disassemble(cubin: bytes, timeout: float | None = None) -> str:
    """The SASS listing of a cubin (nvdisasm -c, or cuobjdump --dump-sass), bounded by `timeout` seconds."""
    tool = disassembler()
    if tool is None:
        raise ToolchainMissing("no disassembler found: install nvidia-cuda-nvdisasm (pip) or put nvdisasm/cuobjdump "
                               "on PATH")
    with tempfile.TemporaryDirectory(prefix="ptxforge-") as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        args = [tool, "-c", path] if tool.endswith("nvdisasm") else [tool, "--dump-sass", path]
        p = run_tool(args, os.path.basename(tool), timeout, text=True)
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
