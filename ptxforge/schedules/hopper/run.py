"""Running a HopperGemm on the GPU: the kernel (whole-program ptxas cubin), tensor maps, the launch.

    g = HopperGemm("s8")
    plan = prepare(g, a_dev, b_dev, c_dev)     # tensor maps encoded, arguments packed once
    plan.launch()                              # one cuLaunchKernel
    c = run(g, a, b)                           # numpy in, numpy out (allocates, copies, launches)

The kernel is assembled by ptxas as a whole program when ptxas is available: the driver's linker
compiles PTX for linking, where ptxas ignores `setmaxnreg` (info C7504) and the consumer
warpgroups would keep the entry cap of 168 registers.  Without ptxas the driver JIT is used.
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import ValidationError


_PTXFORGE_INTERNAL = True

_kernels: dict = {}
_lock = threading.Lock()


def assembled(cfg):
    """AssemblyResult of the configuration by whole-program ptxas (None when ptxas is missing)."""
    from ...assembler import assemble, find_tool
    if not find_tool("ptxas"):
        return None
    return assemble(cfg.module, "sm_90a", backend="ptxas")


def load_kernel(cfg):
    """The KernelFunction of `cfg`, loaded once per process."""
    hit = _kernels.get(cfg)
    if hit is not None:
        return hit
    from ...runtime import load
    from ...runtime import driver as drv
    from ...runtime.loader import LoadedModule, source_of
    r = assembled(cfg)
    if r is None:
        fn = load(cfg.module)[cfg.kernel_name]
    else:
        info = drv.context().info
        src = source_of(cfg.module, info.ptx_cap)
        handle = drv.check(drv.api().cuModuleLoadData(r.cubin), "cuModuleLoadData")
        lm = LoadedModule(handle, src, key=f"ptxas:{cfg.kernel_name}", jit_target="sm_90a", jit_log=r.log,
                          origin="ptxas", cubin=r.cubin)
        fn = lm[cfg.kernel_name]
        fn._loaded_module = lm  # keep the module alive as long as the function
    with _lock:
        _kernels[cfg] = fn
    return fn


def _ptr_shape(x, what):
    from ...runtime import DeviceBuffer
    from ...runtime.arrays import device_view
    if isinstance(x, DeviceBuffer):
        return x.ptr, tuple(x.shape)
    v = device_view(x)
    if v is None or isinstance(v, np.ndarray):
        raise ValidationError(f"{what} must be a GPU array (DeviceBuffer, __cuda_array_interface__ or DLPack)")
    if not v.contiguous:
        raise ValidationError(f"{what} must be C-contiguous")
    return v.ptr, tuple(v.shape)


class Plan:
    """A prepared launch of one HopperGemm on fixed device operands: `launch()` is one driver call."""

    def __init__(self, cfg, a, b, c, *, k: int | None = None, sms: int | None = None,
                 splits: int | None = None, stream=None):
        from ...runtime import TensorMap
        from ...runtime import driver as drv
        a_ptr, a_shape = _ptr_shape(a, "A")
        b_ptr, b_shape = _ptr_shape(b, "B")
        c_ptr, c_shape = _ptr_shape(c, "C")
        m, row_bytes = a_shape[0], a_shape[1] * (1 if cfg.operand in ("s8", "s4") else 2)
        n = b_shape[0]
        if k is None:
            k = row_bytes * 8 // cfg.bits
        cfg.check_problem(m, n, k)
        if c_shape != (m, n):
            raise ValidationError(f"C must be [{m}, {n}], got {c_shape}")
        self.cfg, self.m, self.n, self.k = cfg, m, n, k
        la, lb = cfg.load_tiles
        tdt = la.dtype
        inner = k * cfg.bits // 8 // (T_BYTES[tdt])
        self.tmap_a = TensorMap(tdt, a_ptr, (inner, m), la.tma_box, (k * cfg.bits // 8,), swizzle=128)
        self.tmap_b = TensorMap(tdt, b_ptr, (inner, n), lb.tma_box, (k * cfg.bits // 8,), swizzle=128)
        tiles_m, tiles_n, ktiles = cfg.tile_counts(m, n, k)
        if sms is None:
            sms = drv.device_info().sm_count
        from .splitk import REDUCE_THREADS, choose_splits, reduce_module
        if splits is None:
            splits = choose_splits(tiles_m * tiles_n, ktiles, sms)
        kper = -(-ktiles // max(1, int(splits)))
        self.splits = -(-ktiles // kper)  # every split non-empty
        self.grid = (max(1, min(tiles_m * tiles_n * self.splits, sms)), 1, 1)
        self.fn = load_kernel(cfg)
        post = ()
        c_arg = c_ptr
        if self.splits > 1:
            from ...runtime import DeviceBuffer, load
            self.workspace = DeviceBuffer.empty((self.splits, m, n), np.int32 if cfg.c_type == "s32" else np.float32)
            c_arg = self.workspace
            red = load(reduce_module(cfg.c_type))[f"splitk_reduce_{cfg.c_type}"]
            post = (red.bind((-(-(m * n) // REDUCE_THREADS), 1, 1), (REDUCE_THREADS, 1, 1), self.workspace, c_ptr,
                             m * n, self.splits, stream=stream),)
        self.post = post
        extra, self.pre = (), ()
        if cfg.biased:
            from ...runtime import DeviceBuffer, load
            from .convert import SUMS_ROWS_PER_CTA
            sums_fn = load(cfg.sums_module)["biased_row_sums"]
            row_bytes = k // 2
            self.sums = []
            pre = []
            for ptr, rows, pad in ((a_ptr, m, tiles_m * cfg.block_m), (b_ptr, n, tiles_n * cfg.block_n)):
                buf = DeviceBuffer.empty((pad,), np.int32)
                buf.fill_bytes(0)  # rows past the matrix stay 0: the epilogue reads whole tiles
                self.sums.append(buf)
                pre.append(sums_fn.bind((-(-rows // SUMS_ROWS_PER_CTA), 1, 1), (32 * SUMS_ROWS_PER_CTA, 1, 1),
                                        ptr, buf, rows, row_bytes, stream=stream))
            self.pre = tuple(pre)
            extra = tuple(self.sums)
        self.bound = self.fn.bind(self.grid, (cfg.threads, 1, 1), self.tmap_a, self.tmap_b, c_arg, m, n, k,
                                  self.splits, *extra, shared=cfg.smem_bytes, stream=stream)

    def launch(self) -> None:
        """Launch once (asynchronous on the plan's stream): the row sums first on the biased path."""
        for p in self.pre:
            p.launch()
        self.bound.launch()
        for p in self.post:
            p.launch()


T_BYTES = {"s8": 1, "u8": 1, "bf16": 2, "f16": 2}


def prepare(cfg, a, b, c, **kw) -> Plan:
    """A Plan over device operands A [M, K(/2)], B [N, K(/2)] and C [M, N] (see Plan)."""
    return Plan(cfg, a, b, c, **kw)


def reference(cfg, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy C for host operands (s4: packed bytes, widened first; bf16: uint16 bit patterns)."""
    if cfg.operand == "s8":
        return a.astype(np.int64) @ b.astype(np.int64).T
    if cfg.operand == "s4":
        from .convert import widen_numpy
        return widen_numpy(a).astype(np.int64) @ widen_numpy(b).astype(np.int64).T
    if cfg.operand == "f16":
        return a.astype(np.float32) @ b.astype(np.float32).T
    af = (a.astype(np.uint32) << 16).view(np.float32)
    bf = (b.astype(np.uint32) << 16).view(np.float32)
    return af.astype(np.float64) @ bf.astype(np.float64).T


def run(cfg, a: np.ndarray, b: np.ndarray, *, k: int | None = None, splits: int | None = None
        ) -> np.ndarray:
    """C for host operands: copies to the device, launches once, copies C back (splits: K splits, None: auto)."""
    from ...runtime import DeviceBuffer
    m, n = a.shape[0], b.shape[0]
    out_dt = np.int32 if cfg.c_type == "s32" else np.float32
    da, db = DeviceBuffer.from_host(np.ascontiguousarray(a)), DeviceBuffer.from_host(np.ascontiguousarray(b))
    dc = DeviceBuffer.empty((m, n), out_dt)
    dc.fill_bytes(0xFF)
    p = Plan(cfg, da, db, dc, k=k, splits=splits)
    p.launch()
    return dc.to_host()
