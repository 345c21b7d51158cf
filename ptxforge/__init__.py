"""ptxforge: write NVIDIA PTX from Python, check it, assemble it, run it."""

from ._version import __version__

from .errors import (AssemblyError, ContextLost, DriverError, JitError, LaunchError, PtxforgeError, SyncTimeout,
                     TargetError, ToolchainError, ToolchainMissing, ValidationError)
from .isa import types
from .isa.types import (b1, b8, b16, b32, b64, b128, bf16, bf16x2, f16, f16x2, f32, f64, pred, s4, s8, s16, s32,
                        s64, s16x2, u4, u8, u16, u32, u64, u16x2)
from .isa.operands import Addr, Imm, Label, Reg, Symbol, Vec, DISCARD
from .isa.targets import PtxVersion, Target
from .isa.tensor import EmulatedInstructionWarning, IgnoredInstructionWarning
from .kernel import Kernel, Param
from .builder import FunctionBuilder, KernelBuilder
from .declarations import Function, Prototype, Variable, pragma, source_file, variable
from .module import Module
from .assembler import AssemblyResult, KernelResources, assemble
from . import parse  # PTX text in: ptxforge.parse(text, filename=..., strict=...) -> Module

# The runtime (driver, arrays, launches, timing) loads on first use, so `import ptxforge` stays fast
# and works on machines without a GPU or driver.
_RUNTIME_NAMES = frozenset({
    "load", "LoadedModule", "KernelFunction", "BoundLaunch", "In", "Out", "InOut", "DeviceBuffer", "Stream",
    "benchmark", "Timing", "EventTimer", "device_info", "synchronize", "query",
})
# The schedules load on first use too.
_SCHEDULE_NAMES = frozenset({"TileCopy", "GemmSchedule", "Int4Gemm", "Int8Gemm", "HopperGemm", "Bf16Gemm"})


def __getattr__(name):
    if name in _RUNTIME_NAMES or name == "runtime":
        import importlib
        runtime = importlib.import_module(".runtime", __name__)
        return runtime if name == "runtime" else getattr(runtime, name)
    if name in _SCHEDULE_NAMES:
        import importlib
        return getattr(importlib.import_module(".schedules", __name__), name)
    raise AttributeError(f"module 'ptxforge' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _RUNTIME_NAMES | _SCHEDULE_NAMES)


__all__ = [
    "__version__", "KernelBuilder", "FunctionBuilder", "Function", "Prototype", "Variable", "variable", "pragma", "source_file",
    "Kernel", "Module", "Param", "Target", "PtxVersion", "types",
    "Addr", "Imm", "Label", "Reg", "Symbol", "Vec", "DISCARD",
    "PtxforgeError", "ValidationError", "TargetError", "AssemblyError", "JitError", "LaunchError",
    "DriverError", "ContextLost", "SyncTimeout", "ToolchainError", "ToolchainMissing", "EmulatedInstructionWarning", "IgnoredInstructionWarning", "assemble", "AssemblyResult",
    "KernelResources", "parse",
    "b1", "b8", "b16", "b32", "b64", "b128", "bf16", "bf16x2", "f16", "f16x2", "f32", "f64", "pred",
    "s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64", "u16x2", "s16x2",
    *sorted(_RUNTIME_NAMES), *sorted(_SCHEDULE_NAMES),
]

