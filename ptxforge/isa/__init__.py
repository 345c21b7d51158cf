"""The PTX instruction set as data: types, targets, operands and one module per instruction family.

Nothing here does I/O or touches CUDA.
"""

from . import types
from .targets import DeviceLimits, PtxVersion, Requirement, Target, SUPPORTED_TARGETS
from .operands import Addr, Guard, Imm, Label, Reg, Symbol, Vec, DISCARD
from .instruction import Instruction

__all__ = ["types", "DeviceLimits", "PtxVersion", "Requirement", "Target", "SUPPORTED_TARGETS", "Addr", "Guard", "Imm", "Label",
           "Reg", "Symbol", "Vec", "DISCARD", "Instruction"]
