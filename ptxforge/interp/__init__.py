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
exactly once, become array checks.  `order="last-warpgroup-first"` steps the highest-numbered
warpgroup that can run instead of every thread at the lowest pc (`ORDERS`), so warpgroups running
the same code no longer move in lockstep and a barrier missing between them shows.

Differences from a GPU, on purpose: %warpid is the linear thread index / 32 (on hardware it is
a physical slot that changes), %smid is 0, clocks count interpreter steps.  Registers and shared
memory start with a poison pattern.  Hopper: wgmma (every form, descriptors decoded bit for bit,
exec_wgmma), TMA tile loads/stores from `host_tensor_map` arguments (element strides and
interleave included), im2col loads from `host_im2col_map` arguments, and 1-D bulk copies with their
bulk commit/wait groups (exec_tma), bulk and TMA reductions into global memory or a cluster CTA's shared
memory (exec_reduce; not the .im2col_no_offs mode), tensor maps edited on the device (exec_tensormap) and
named by TMA copies in global memory, mbarrier transaction counts, clusters with distributed shared
memory (`run(..., cluster=)`, exec_cluster; mapa and its inverse getctarank), bar.red (exec_sync),
st.async / red.async into a cluster CTA's shared memory landing on its mbarrier (exec_async_store);
setmaxnreg moves registers within each CTA's pool (exec_regpool): an .inc asking for more than the
launch gave waits, and ends in a deadlock finding.  alloca / stacksave / stackrestore work on a
per-thread stack in local memory (exec_stack): bytes released by stackrestore or a device function's
return are out of bounds, and an overflow is a finding.  wmma.load / wmma.mma / wmma.store run every
form (exec_wmma) through a fragment layout of the interpreter's own, as PTX leaves the layout to the
implementation: loads, products, stores and per-element operations agree with a GPU.  printf (a call
to vprintf, from `k.printf` or nvcc) formats as C does into `Report.printed` and stdout (exec_printf).
Floats round as PTX asks, once: the directed modes (.rz/.rm/.rp) of arithmetic and cvt and the fused
f64 fma through exact rationals where numpy cannot (rounding.py).
Float min/max, in the instructions, the half atomics and the bulk reductions alike, follow the rule
measured on the H200 (minmax.py): -0 below +0, a NaN operand losing to a number, a NaN result canonical.
Not modelled, and refused with `InterpUnsupported` when executed: ldmatrix .m16n16 (sm_100a),
interleaved tensor maps whose box row is not the whole slice or
whose box reaches outside the tensor, swizzled maps whose inner box is not the swizzle span,
tensor maps outside the kernel parameters and global memory, im2col maps with 16/32-byte interleave,
textures and surfaces, multimem, brkpt.
mma.sp and wgmma.mma_async.sp spread A's stored half over K as the metadata of the lanes the selector
names says (exec_tensor, exec_wgmma; the layout in `ptxforge.isa.sparse`, as an H100 showed it), and
metadata the PTX ISA leaves undefined is a "sparse" finding.
128-bit registers (.b128) hold 16-byte records: ld/st.b128 and mov.b128 (a copy, or two 64-bit
halves packed and unpacked).  Memory orders (.relaxed/.acquire/.release/.volatile) change no value
here, and the shared-memory race check does not treat them as synchronizing.  Not checked: races on
global memory, between CTAs of different clusters, and between CTAs of one cluster that only a
CTA-local bar.sync separates.

Modules: `launch` (run, Report), `findings` (Finding, InterpError, InterpUnsupported),
`machine` and `scheduler` (execution), `memory` / `access` (address spaces, checks), `traffic`
(per-byte read / write counts of the arguments), `exec_*` (instruction semantics by family;
`exec_regpool` the setmaxnreg register pool),
`tensormaps` (tensor-map arguments), `proxy` (generic vs async proxy visibility), `exec_call`
(calls to device functions, indirect calls and brx.idx, expanded in place when a kernel is compiled),
`exec_stack` (the alloca stack), `minmax` (float min/max as the hardware computes them).
The mma / ldmatrix fragment layouts it executes through live in `ptxforge.isa.fragments` (and
are re-exported here, usable as numpy models).
"""

from .findings import DEFAULT_CHECKS, KINDS, Finding, InterpError, InterpUnsupported, ThreadId
from .launch import ORDERS, Report, compile_kernel, run
from ..isa.fragments import Fragment, MatrixLayout, matrix_layout, mma_fragment, pack_fragment, unpack_fragment
from .tensormaps import HostTensorMap, host_im2col_map, host_tensor_map
from .traffic import AccessCounts

__all__ = ["run", "ORDERS", "Report", "AccessCounts", "compile_kernel", "Finding", "InterpError", "InterpUnsupported",
           "ThreadId", "KINDS", "DEFAULT_CHECKS", "mma_fragment", "matrix_layout", "pack_fragment", "unpack_fragment",
           "Fragment", "MatrixLayout", "host_tensor_map", "host_im2col_map", "HostTensorMap"]
