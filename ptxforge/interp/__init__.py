"""Run ptxforge kernels on the CPU with numpy: exact semantics and a sanitizer in one.

    from ptxforge import interp
    report = interp.run(module, "gemm", grid=(4, 4), block=128, args=[a, b, c, m, n, k], shared=nbytes)

The interpreter executes a built Module's instructions (never PTX text): all threads of a batch
of CTAs at once as numpy arrays, with per-thread program counters so divergent branches
reconverge.  Integer results are bit-identical to a GPU's; floating-point results agree within
rounding.  It reports, naming the instruction, the threads and the Python line that emitted
the instruction: out-of-bounds and misaligned accesses, shared-memory races (no barrier between
two threads' accesses), reads of cp.async destinations before their wait, warp-collective
instructions reached by part of a warp, divergent bra.uni, barrier deadlocks.  `check=True`
(default) raises `InterpError` at the first finding; `check=False` collects them in the Report.
`count_accesses=True` also counts every read and write of every byte of the pointer arguments
(`Report.accesses`): what a kernel touched outside its data, and whether copies cover a tile
exactly once, become array checks.

Differences from a GPU, on purpose: %warpid is the linear thread index / 32 (on hardware it is
a physical slot that changes), %smid is 0, clocks count interpreter steps.  Registers and shared
memory start with a poison pattern.  Not modelled, and refused with `InterpUnsupported` when
executed: wgmma, setmaxnreg, tensor (TMA) bulk copies and cp.async.bulk.commit_group /
wait_group, ldmatrix .m16n16 (sm_100a), bar.red, directed rounding (.rz/.rm/.rp) on float
arithmetic and cvt, .local/.const memory; 128-bit (.b128) registers cannot be stored.  Not
checked: races on global memory and between CTAs.

Modules: `launch` (run, Report), `findings` (Finding, InterpError, InterpUnsupported),
`machine` and `scheduler` (execution), `memory` / `access` (address spaces, checks), `traffic`
(per-byte read / write counts of the arguments), `exec_*` (instruction semantics by family).
The mma / ldmatrix fragment layouts it executes through live in `ptxforge.isa.fragments` (and
are re-exported here, usable as numpy models).
"""

from .findings import DEFAULT_CHECKS, KINDS, Finding, InterpError, InterpUnsupported, ThreadId
from .launch import Report, compile_kernel, run
from ..isa.fragments import Fragment, MatrixLayout, matrix_layout, mma_fragment, pack_fragment, unpack_fragment
from .traffic import AccessCounts

__all__ = ["run", "Report", "AccessCounts", "compile_kernel", "Finding", "InterpError", "InterpUnsupported",
           "ThreadId", "KINDS", "DEFAULT_CHECKS", "mma_fragment", "matrix_layout", "pack_fragment", "unpack_fragment",
           "Fragment", "MatrixLayout"]
