"""GPU detection now lives in `ptxforge.runtime.device`; this name remains only for
`schedules/gemm_cli.py`, which imports it until the GEMM command moves beside `ptxforge.cli`."""

from ..runtime.device import gpu_available, gpu_skip_reason

__all__ = ["gpu_available", "gpu_skip_reason"]
