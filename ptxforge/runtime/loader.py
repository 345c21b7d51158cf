"""Load PTX on the GPU: the driver's linker makes a cubin (cached), the cubin becomes a module.

``load(module)`` renders the module with its ``.version`` capped at what the installed
driver accepts, checks the target against the device, and looks the result up in the
in-process and disk caches.  On a miss the driver's own JIT compiles it
(cuLinkCreate / cuLinkAddData(PTX) / cuLinkComplete, with error and info log buffers),
so cached cubins are exactly what the driver would have produced.  A JIT failure raises
JitError quoting the driver's log, each line mapped to the PTX line and the Python line
that emitted it.  Every kernel symbol is then looked up, so a missing entry fails here
and not at the first launch.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
import weakref
from dataclasses import dataclass

from ..errors import DriverError, JitError, LaunchError, TargetError
from ..isa import types as T
from ..isa.targets import PtxVersion, Target, ptx_header
from . import cache as _cache
from . import driver as _drv
from . import faults
from .culink import link_ptx
from .driver import api, check, driver_error

_PTXFORGE_INTERNAL = True

#: Bytes reserved for each of the driver JIT's error and info logs.
LOG_BYTES = 1 << 16


class JitWarning(UserWarning):
    """The driver's JIT compiled the PTX but warned about it."""


@dataclass(frozen=True)
class EntryDesc:
    """What a launch needs to know about one kernel, from a Module or parsed from PTX text: its name, parameters,
    `.maxntid`/`.reqntid`, and per parameter the alignment a pointer's memory must have by its `.ptr .align`
    (PTX text only; empty when none is declared)."""

    name: str
    params: tuple
    block_limit: tuple | None = None
    pointer_aligns: tuple = ()


@dataclass(frozen=True)
class Source:
    """PTX ready to load: text, its version and target, its kernels, and the Module it came from."""

    text: str
    version: PtxVersion | None
    target: Target | None
    entries: tuple
    module: object = None  # ptxforge Module, for mapping JIT errors to Python lines


# ---------------------------------------------------------------- targets and versions

def check_target(target: Target | None, compute_capability: tuple) -> None:
    """A module must not target a newer GPU than the device; sm_XYa runs only on exactly X.Y."""
    if target is None:
        return
    major, minor = compute_capability
    sm = major * 10 + minor
    if target.sm > sm:
        raise TargetError(f"the module targets {target.name}, but the GPU is sm_{sm} (compute capability "
                          f"{major}.{minor}); build it for sm_{sm} or older")
    if target.arch_specific and target.sm != sm:
        raise TargetError(f"the module targets {target.name}, whose arch-specific features run only on compute "
                          f"capability {target.sm // 10}.{target.sm % 10}; the GPU is {major}.{minor}")


def jit_target_name(target: Target | None, compute_capability: tuple) -> str:
    """The SASS target the driver compiles for: the device's own, or the module's sm_XYa."""
    if target is not None and target.arch_specific:
        return target.name
    major, minor = compute_capability
    return f"sm_{major}{minor}"


def source_of(obj, ptx_cap: PtxVersion | None) -> Source:
    """Turn a Module, KernelBuilder, Kernel or PTX text into a Source capped at `ptx_cap`."""
    from ..kernel import Kernel
    from ..module import Module
    if isinstance(obj, Kernel) or hasattr(obj, "finish"):  # a Kernel or a KernelBuilder
        obj = Module([obj])
    if isinstance(obj, Module):
        try:
            r = obj.render(cap=ptx_cap)
        except TargetError as e:
            raise TargetError(f"{e.message} (the installed driver's JIT accepts PTX ISA <= {ptx_cap})", e.loc) from e
        # kernels only: a device function (.func) has no handle the driver hands out
        entries = tuple(EntryDesc(k.name, tuple(k.params), k.block_limit) for k in obj.entries)
        return Source(r.text, r.version, obj.target, entries, obj)
    if isinstance(obj, bytes):
        obj = obj.decode()
    if not isinstance(obj, str):
        raise TypeError(f"load() takes a Module, a KernelBuilder or PTX text, got {type(obj).__name__}")
    return source_of_text(obj, ptx_cap)


def source_of_text(text: str, ptx_cap: PtxVersion | None) -> Source:
    """A `Source` for PTX text given as a string: its ``.version`` (checked against `ptx_cap`, the newest the
    driver's JIT accepts) and ``.target`` read from the text.
    """
    version, named = ptx_header(text)
    if version is not None and ptx_cap is not None and version > ptx_cap:
        raise TargetError(f"the PTX says .version {version}, but the installed driver's JIT accepts at most {ptx_cap}")
    target = None
    if named is not None:
        try:
            target = Target.parse(named)
        except TargetError:
            target = None  # an older target ptxforge does not model; the driver decides
    return Source(text, version, target, parse_entries(text))


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)\s*(\((.*?)\))?(.*?)\{", re.S)
_BLOCK = re.compile(r"\.(maxntid|reqntid)\s+(\d+(?:\s*,\s*\d+){0,2})")
_TOKEN = re.compile(r"\.[A-Za-z_]\w*|\d+|[A-Za-z_$%][\w$]*|\[\s*\d*\s*\]|\S")
_SPACES = ("global", "shared", "const", "local")


def parse_param(decl: str, kernel: str = ""):
    """One `.param` declaration of an entry, in any spelling nvcc, clang/LLVM or Triton emit, as a Param.

    ``.param .u64 p``; ``.param .u64 .ptr .global .align 8 p`` (a pointer: `.ptr`, an optional state
    space and the pointee's alignment, which `parse_entries` keeps in `EntryDesc.pointer_aligns`);
    ``.param .align 8 .b8 s[24]`` (a by-value struct); ``.param .u32 a[4]`` (an array: 16 bytes, aligned as its
    element unless `.align` says more).
    """
    return _parse_param(decl, kernel)[0]


def _parse_param(decl: str, kernel: str = ""):
    """(`parse_param`'s Param, the alignment a pointer's memory must have: 1 unless `.ptr .align A` says A)."""
    from ..kernel import Param
    where = f" of kernel '{kernel}'" if kernel else ""
    toks = _TOKEN.findall(decl)
    if not toks or toks[0] != ".param":
        raise LaunchError(f"cannot read parameter declaration {decl.strip()!r}{where}: it does not start with .param")
    align = pointee_align = None
    tname = name = None
    pointer = False
    space = None
    dims = []
    i = 1
    while i < len(toks):
        t = toks[i]
        if t == ".align":
            if i + 1 >= len(toks) or not toks[i + 1].isdigit():
                raise LaunchError(f"parameter declaration {decl.strip()!r}{where}: .align needs a number")
            if pointer:
                pointee_align = int(toks[i + 1])  # `.ptr .align A`: what the pointer points at is A-aligned
            else:
                align = int(toks[i + 1])
            i += 2
            continue
        if t == ".ptr":
            pointer = True
        elif t.startswith(".") and t[1:] in _SPACES:
            space = t[1:]
        elif t.startswith("."):
            if tname is not None:
                raise LaunchError(f"parameter declaration {decl.strip()!r}{where} has two types")
            tname = t[1:]
        elif t.startswith("[") and t.endswith("]"):
            inner = t[1:-1].strip()
            if not inner:
                raise LaunchError(f"parameter declaration {decl.strip()!r}{where}: an array parameter needs its size")
            dims.append(int(inner))
        elif name is None and (t[0].isalpha() or t[0] in "_$%"):
            name = t
        else:
            raise LaunchError(f"cannot read parameter declaration {decl.strip()!r}{where} (at {t!r})")
        i += 1
    if tname is None or name is None:
        raise LaunchError(f"cannot read parameter declaration {decl.strip()!r}{where}: it needs a type and a name")
    try:
        ty = T.lookup(tname)
    except Exception:
        raise LaunchError(f"parameter {name}{where} has type .{tname}, which ptxforge does not know") from None
    if dims:
        n = 1
        for d in dims:
            n *= d
        elem = max(ty.bits // 8, 1)
        return Param(name, T.b8, None, None, n * elem, max(align or 1, elem)), 1
    if pointer:
        if ty.bits != 64:
            raise LaunchError(f"parameter {name}{where} is a .ptr of .{tname}; a pointer parameter is 64 bits")
        return Param(name, ty, None, space or "global"), pointee_align or 1
    if align is not None and align > ty.bits // 8:
        return Param(name, ty, align=align), 1  # an over-aligned scalar
    return Param(name, ty), 1


def _split_params(body: str) -> list:
    return [d for d in (x.strip() for x in body.split(",")) if d]


def parse_entries(text: str) -> tuple:
    """The kernels of PTX text: names, parameters (as ptxforge Params) and .maxntid/.reqntid."""
    out = []
    for m in _ENTRY.finditer(_COMMENTS.sub("", text)):
        parsed = [_parse_param(d, m.group(1)) for d in _split_params(m.group(3) or "")]
        limit = None
        b = _BLOCK.search(m.group(4) or "")
        if b:
            limit = (b.group(1), tuple(int(x) for x in b.group(2).split(",")))
        aligns = tuple(a for _, a in parsed)
        out.append(EntryDesc(m.group(1), tuple(p for p, _ in parsed), limit,
                             aligns if any(a > 1 for a in aligns) else ()))
    return tuple(out)


# ---------------------------------------------------------------- JIT errors

_DIAG = re.compile(r"line (\d+); (error|warning)\s*:\s*(.*)")


def diagnostics(log: str):
    """(PTX line, severity, message) for each diagnostic in a driver JIT log."""
    return [(int(m.group(1)), m.group(2), m.group(3).strip()) for m in _DIAG.finditer(log)]


def describe(src: Source, line: int) -> str:
    """PTX line `line` of `src` for error messages, with the Python line that emitted it when the source is a
    Module.
    """
    if src.module is not None:
        return src.module.describe_line(line, version=src.version)
    lines = src.text.splitlines()
    return f"PTX line {line}: {lines[line - 1].strip() if 0 < line <= len(lines) else '?'}"


def jit_error(src: Source, target: str, code_name: str, error_log: str, info_log: str) -> JitError:
    """A JitError quoting the driver's log, each diagnostic mapped to its PTX and Python lines."""
    log = "\n".join(x for x in (error_log.strip(), info_log.strip()) if x)
    diags = diagnostics(log)
    parts = [f"the driver JIT rejected the PTX for {target} ({code_name}):"]
    seen = set()
    for line, sev, msg in diags:
        if (line, sev, msg) in seen:
            continue
        seen.add((line, sev, msg))
        parts.append(f"  {sev}: {msg}\n    {describe(src, line)}")
    if not diags:
        parts.append("  " + (log or "(the driver left its logs empty)").replace("\n", "\n  "))
    if "UNSUPPORTED_PTX_VERSION" in code_name:
        parts.append("  the driver is older than the PTX ISA version this module needs; update the driver or "
                     "avoid the newer instructions")
    return JitError("\n".join(parts), log=log, diagnostics=diags)


def _warn_jit(src: Source, log: str) -> None:
    diags = [d for d in diagnostics(log) if d[1] == "warning"]
    if diags:
        text = "\n".join(f"  warning: {msg}\n    {describe(src, line)}" for line, _, msg in diags)
        warnings.warn(JitWarning("the driver JIT warned:\n" + text), stacklevel=4)


# ---------------------------------------------------------------- compile and load

def jit_options(max_registers: int | None = None, opt_level: int | None = None) -> tuple:
    """The JIT options that change the cubin, as (name, value) pairs (part of the cache key)."""
    opts = []
    for name, value, lo, hi, option in (("max_registers", max_registers, 16, 255, "CU_JIT_MAX_REGISTERS"),
                                         ("opt_level", opt_level, 0, 4, "CU_JIT_OPTIMIZATION_LEVEL")):
        if value is None:
            continue
        if not T.is_integer(value) or not lo <= value <= hi:  # (a float would be truncated, a bool taken as 0/1)
            raise ValueError(f"{name} must be an int in {lo}..{hi}, got {value!r}")
        opts.append((option, int(value)))
    return tuple(opts)


def jit_link(src: Source, target: str, options: tuple = ()) -> tuple:
    """Compile PTX to a cubin with the driver's linker; returns (cubin bytes, info log)."""
    d = api()
    opts = [(int(getattr(d.CUjit_option, name)), value) for name, value in options]
    if target.endswith("a"):
        enum = getattr(d.CUjit_target, f"CU_TARGET_COMPUTE_{target[3:-1]}A", None)
        if enum is not None:
            opts.append((int(d.CUjit_option.CU_JIT_TARGET), int(enum)))
    from ..assembler import refuse_nul
    refuse_nul(src.text)
    res = link_ptx(src.text.encode() + b"\0", opts, LOG_BYTES)  # the driver reads PTX as a C string
    if res.code and (faults.is_not_the_inputs(res.code) or faults.dead_reason() is not None):
        raise driver_error(res.code, f"{res.step} (the driver JIT compiling for {target})")  # not the PTX's fault
    if res.code:
        try:
            name = d.CUresult(res.code).name
        except Exception:  # a code newer than these bindings
            name = f"CUresult {res.code}"
        raise jit_error(src, target, f"{name} from {res.step}", res.error_log, res.info_log)
    _warn_jit(src, res.info_log + "\n" + res.error_log)
    return res.cubin, res.info_log


def _load_cubin(cubin: bytes):
    return check(api().cuModuleLoadData(cubin), "cuModuleLoadData")


def _jit_and_load(src: Source, target: str, options: tuple):
    cubin, log = jit_link(src, target, options)
    _cache.stats.compiles += 1
    return _load_cubin(cubin), cubin, log


def _unload(handle) -> None:
    """Finalizer of a collected LoadedModule, in ptxforge's context (the caller's given back); errors dropped."""
    _drv.quietly_in_ours(lambda d: d.cuModuleUnload(handle))


class LoadedModule:
    """A module on the GPU: its kernels by name (``m["saxpy"]``), the JIT log and where it came from.

    The module is unloaded by ``unload()``, or when it is collected: every KernelFunction of it (``module``),
    every BoundLaunch and prepared launch of those (``function``) and every plan holding one keeps it alive, so
    a module is only unloaded once nothing can launch its kernels any more.
    """

    def __init__(self, handle, src: Source, *, key: str, jit_target: str, jit_log: str, origin: str, cubin: bytes,
                 memory_key=None):
        from .kernel import KernelFunction
        self._handle = handle
        self._memory_key = memory_key
        self.ptx = src.text
        self.version = src.version
        self.target = src.target
        self.jit_target = jit_target
        self.cache_key = key
        self.jit_log = jit_log
        self.origin = origin  # "jit" (compiled now) or "disk" (read from the cubin cache)
        self.cubin = cubin
        self.source_module = src.module
        d = api()
        self.functions = {}
        for e in src.entries:
            res = d.cuModuleGetFunction(handle, e.name.encode())
            if res[0]:
                raise JitError(f"kernel '{e.name}' is not in the loaded module ({getattr(res[0], 'name', res[0])}); "
                               f"entries declared: {', '.join(x.name for x in src.entries)}")
            self.functions[e.name] = KernelFunction(self, e.name, res[1], e.params, e.block_limit,
                                                    pointer_aligns=e.pointer_aligns)
        # last: a constructor that raised leaves the handle to its caller (`_build` unloads it)
        self._finalizer = weakref.finalize(self, _unload, handle)

    @property
    def names(self) -> tuple:
        """The names of the module's kernels, in module order."""
        return tuple(self.functions)

    def __getitem__(self, name: str):
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no kernel '{name}' in this module; kernels: {', '.join(self.functions)}") from None

    def __contains__(self, name) -> bool:
        return name in self.functions

    def __iter__(self):
        return iter(self.functions.values())

    def __len__(self) -> int:
        return len(self.functions)

    def __call__(self, *args, **kwargs):
        """Launch the module's only kernel (see KernelFunction.__call__)."""
        if len(self.functions) != 1:
            raise TypeError(f"this module has {len(self.functions)} kernels; pick one: module['name'](...)")
        return next(iter(self.functions.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return (f"<LoadedModule {', '.join(self.functions)} for {self.jit_target}, PTX ISA {self.version}, "
                f"from {self.origin}>")

    def __copy__(self) -> "LoadedModule":
        return self  # one loaded module, one object: a copy's unload() would pull it from under this one's kernels

    def __deepcopy__(self, memo) -> "LoadedModule":
        return self

    def __reduce__(self):
        raise TypeError("a LoadedModule is loaded in this process's CUDA context and cannot be pickled; pickle its "
                        "ptx (or the ptxforge Module) and load() it there")

    @property
    def loaded(self) -> bool:
        """False once unload() ran."""
        return self._handle is not None

    def unload(self) -> None:
        """Unload the module now: it leaves the in-process cache (the next load() makes a new one), and its
        kernels and bound launches raise LaunchError from then on."""
        if self._handle is None:
            return
        self._finalizer.detach()
        handle, self._handle = self._handle, None
        if self._memory_key is not None:
            _cache.memory_drop(self._memory_key, self)
        if faults.dead_reason() is not None:
            return  # the context is gone, and its modules with it
        prev = _drv.enter()
        try:
            check(api().cuModuleUnload(handle), "cuModuleUnload")
        finally:
            _drv.leave(prev)


_prepared_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _prepared(source, info, options: tuple):
    """(Source, JIT target, cache key); remembered per Module, so loading it again costs a dict lookup."""
    from ..module import Module
    memo_key = (info.ptx_cap, info.compute_capability, info.driver_id, options)
    if isinstance(source, Module):
        hit = _prepared_memo.get(source, {}).get(memo_key)
        if hit is not None:
            src, target, key = hit
            return dataclasses.replace(src, module=source), target, key
    src = source_of(source, info.ptx_cap)
    check_target(src.target, info.compute_capability)
    target = jit_target_name(src.target, info.compute_capability)
    key = _cache.cache_key(src.text, target, options, info.driver_id)
    if isinstance(source, Module):
        # the memo must not refer to the Module, or the weak key would never be released
        _prepared_memo.setdefault(source, {})[memo_key] = (dataclasses.replace(src, module=None), target, key)
    return src, target, key


def load(source, *, max_registers: int | None = None, opt_level: int | None = None,
         cache: bool = True) -> LoadedModule:
    """Load a Module (or KernelBuilder, Kernel, PTX text) on the GPU; returns its kernels by name.

    `max_registers` (16..255) caps the registers per thread and `opt_level` (0..4) sets the JIT's
    optimization level (the driver's CU_JIT_MAX_REGISTERS and CU_JIT_OPTIMIZATION_LEVEL; both are part of
    the cache key).  `cache=False` skips both caches (always JIT-compiles, stores nothing).  Threads loading one
    module at once share one JIT compilation (a lock per module key).  A cached cubin is
    replaced only when the driver refuses it as an image; an error of the context (a kernel
    fault) or of memory is raised as it is and leaves the cache alone.
    """
    prev = _drv.enter()
    try:
        ctx = _drv._state
        info = ctx.info
        options = jit_options(max_registers, opt_level)
        src, target, key = _prepared(source, info, options)
        mkey = (key, ctx.handle)
        if not cache:
            return _build(src, target, key, options, info, None, None)
        hit = _cache.memory_get(mkey)
        if hit is not None:
            _cache.stats.memory_hits += 1
            return hit
        with _cache.key_lock(mkey):
            hit = _cache.memory_get(mkey)  # another thread may have loaded it meanwhile
            if hit is not None:
                _cache.stats.memory_hits += 1
                return hit
            lm = _build(src, target, key, options, info, _cache.disk_cache(), mkey)
            _cache.memory_put(mkey, lm)
            return lm
    finally:
        _drv.leave(prev)


def _build(src: Source, target: str, key: str, options: tuple, info, disk, mkey) -> LoadedModule:
    handle = cubin = None
    log, origin = "", "jit"
    if disk is not None:
        got = disk.get(key)
        if got is not None:
            cubin, meta = got
            try:
                handle = _load_cubin(cubin)
                log, origin = str(meta.get("jit_log", "")), "disk"
                _cache.stats.disk_hits += 1
            except DriverError as e:
                if not faults.is_image_rejection(e.code):
                    raise  # the context or memory failed, not the entry: leave it alone
                _cache.stats.corrupt += 1  # intact file the driver refuses: rebuilt and replaced below
                handle = cubin = None
    if handle is None:
        handle, cubin, log = _jit_and_load(src, target, options)
        if disk is not None:
            disk.put(key, cubin, {"jit_log": log, "target": target, "ptx_version": str(src.version),
                                  "kernels": [e.name for e in src.entries], "driver": info.driver_id})
    try:
        return LoadedModule(handle, src, key=key, jit_target=target, jit_log=log, origin=origin, cubin=cubin,
                            memory_key=mkey)
    except BaseException:
        if faults.dead_reason() is None:
            api().cuModuleUnload(handle)  # a kernel missing from the module: do not leak it
        raise
