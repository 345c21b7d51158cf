"""A HopperGemm launched on the CPU interpreter: host tensor maps over numpy operands, the biased path's
row sums, the grid and the shared memory, as a GPU plan would launch it.

    args, grid, shared = interpreter_launch(cfg, a, b, c, k)
    report = interp.run(interpreter_module(cfg, m, n), grid=grid, block=cfg.threads, shared=shared, args=args)

a [M, K(/2)], b [N, K(/2)] in the schedule's format (`random_operands` makes them); c the C array the
kernel writes: [M, N] (also [1, M, N]), or with split_reduce='launch' and K split, [splits, M, N] (each
split's partial sums, which a second launch would add).
"""

from __future__ import annotations

import numpy as np

from ...errors import ValidationError
from .convert import widen_numpy
from .splitk import check_reduce, check_splits, nonempty_splits, workspace_bytes

_PTXFORGE_INTERNAL = True


def interpreter_launch(cfg, a, b, c, k: int, *, splits: int = 1, clusters: int | None = None) -> tuple:
    """(kernel arguments, grid, dynamic shared bytes) of `cfg` over host operands `a`, `b` and output `c`.

    splits: K split this many ways (every split must be non-empty, as a plan makes them; with
    split_reduce='launch' c is then [splits, M, N]); clusters: the grid in clusters (default: one per work
    unit; 1 makes one CTA, or one cluster, walk every unit of the persistent loop).  The kernel is the one
    `interpreter_module` gives for the same splits.
    """
    from ...interp import host_tensor_map
    m, n = a.shape[0], b.shape[0]
    ka, kb, km, kn = (b, a, n, m) if cfg.swap_ab else (a, b, m, n)  # swap_ab: the kernel computes B . A^T
    check_reduce(cfg, splits, m * n)
    ktiles = cfg.tile_counts(km, kn, k)[2]
    if nonempty_splits(ktiles, splits) != splits:  # the last splits would wait for stages nobody loads
        raise ValidationError(f"K={k} is {ktiles} k-stages of {cfg.block_k}: split {splits} ways its last splits "
                              f"are empty (ceil({ktiles} / {splits}) stages each); "
                              f"{nonempty_splits(ktiles, splits)} splits cover the same K")
    kernel = cfg.for_launch(kn, splits, m * n)
    slices = splits if splits > 1 and not kernel.reduces_in_kernel else 1
    if c.shape[-2:] != (m, n) or c.ndim not in (2, 3) or (c.ndim == 3 and c.shape[0] != slices) \
            or (c.ndim == 2 and slices > 1):
        raise ValidationError(f"C must be [{m}, {n}]" + (f" (or [1, {m}, {n}])" if slices == 1 else
                              f" split {splits} ways: [{splits}, {m}, {n}] (split_reduce='launch')") +
                              f", got {c.shape}")
    la, lb = cfg.load_tiles
    box_a, box_b = cfg.load_boxes
    args = [host_tensor_map(ka, box_a, dtype=la.dtype, swizzle=128),
            host_tensor_map(kb, box_b, dtype=lb.dtype, swizzle=128), c, km, kn, k, splits]
    if cfg.biased:  # the biased row sums, padded to whole (pairs of) tiles as the plan pads them
        tiles_m, tiles_n, _ = cfg.tile_counts(km, kn, k)
        for x, tiles, cl, blk in ((ka, tiles_m, cfg.cluster_m, cfg.block_m),
                                  (kb, tiles_n, cfg.cluster_n, cfg.block_n)):
            sums = np.zeros(-(-tiles // cl) * cl * blk, np.int32)
            sums[:x.shape[0]] = (widen_numpy(x).astype(np.int64) + 8).sum(1)
            args.append(sums)
    if kernel.reduces_in_kernel:  # the workspace of every split's partial sums, and the tiles' counters at 0
        nbytes, tiles = workspace_bytes(cfg, km, kn, splits)
        args += [np.zeros(nbytes // 4, np.int32), np.zeros(tiles, np.uint32)]
    if cfg.epilogue == "tma":
        c3 = c if c.ndim == 3 else c.reshape(1, m, n)
        args.append(host_tensor_map(c3, (*cfg.store_box, 1), dtype=cfg.c_type, swizzle=128))
    return args, interpreter_grid(cfg, m, n, splits=splits, clusters=clusters), cfg.smem_bytes


def interpreter_module(cfg, m: int, n: int, splits: int = 1):
    """The Module an M x N problem split `splits` ways over K runs, as a plan picks it (`for_launch` over the
    kernel's N, the problem's M with swap_ab)."""
    return cfg.for_launch(m if cfg.swap_ab else n, splits, m * n).module


def interpreter_grid(cfg, m: int, n: int, *, splits: int = 1, clusters: int | None = None) -> int:
    """CTAs of the launch of an M x N problem: `clusters` clusters, or one (cluster) per work unit."""
    km, kn = (n, m) if cfg.swap_ab else (m, n)
    return (clusters or cfg.cluster_tiles(km, kn) * splits) * cfg.cluster_size


def interpret(cfg, a, b, c=None, *, k: int | None = None, splits: int = 1, clusters: int | None = None,
              order: str = "lowest-pc", check: bool = True, races: bool = True) -> tuple:
    """(C, the interpreter's report) of C = A . B^T run by `cfg`'s kernel on the CPU interpreter.

    a [M, K(/2)], b [N, K(/2)]: numpy operands as `run` takes them (checked by `run.host_problem`).  c: the
    [M, N] array to write (default: a new one of `c_numpy_type(cfg)`, poisoned with -7, 0xFFFF bits or NaN, so
    an element the kernel leaves shows).  splits: K split this many ways, added as the configuration says
    (`split_reduce`: in the kernel, or by the reduction kernel, which runs on the interpreter too); clusters: the
    grid in clusters (default: one per work unit; 1 makes one CTA or cluster walk every unit).  A split count
    whose last splits would be empty is lowered as `run` and `plan` lower it (`splitk.nonempty_splits`: each split
    takes ceil(k-stages / splits) stages).  order, races:
    as `interp.run`.  check=True raises `InterpError` on the first finding (a race, a read of bytes not yet
    landed, a missing proxy fence, ...); check=False collects them in the report.
    """
    from ... import interp
    from .operands import c_numpy_type, check_host_c, host_problem
    m, n, k = host_problem(cfg, a, b, k)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)  # as run() copies them in
    splits = check_splits(splits, auto=False)
    check_reduce(cfg, splits, m * n)
    splits = nonempty_splits(cfg.tile_counts(*((n, m) if cfg.swap_ab else (m, n)), k)[2], splits)
    dt = c_numpy_type(cfg)
    poison = 0xFFFF if dt == np.uint16 else np.nan if dt == np.float16 else -7
    if c is None:
        c = np.full((m, n), poison, dt)
    else:
        check_host_c(cfg, c, m, n, a, b)
    launch_reduce = splits > 1 and not cfg.for_launch(n if not cfg.swap_ab else m, splits, m * n).reduces_in_kernel
    out = np.full((splits, m, n), poison, dt) if launch_reduce else c
    args, grid, shared = interpreter_launch(cfg, a, b, out, k, splits=splits, clusters=clusters)
    report = interp.run(interpreter_module(cfg, m, n, splits), grid=grid, block=cfg.threads, shared=shared,
                        args=args, check=check, races=races, order=order)
    if launch_reduce:  # the second launch a plan makes: C = the partial sums added in split order
        from .splitk import REDUCE_THREADS, reduce_module
        count = m * n
        reduced = interp.run(reduce_module(cfg.c_type), grid=-(-count // REDUCE_THREADS), block=REDUCE_THREADS,
                             args=[out.reshape(-1), c.reshape(-1), count, splits], check=check, races=races)
        report.findings = report.findings + reduced.findings
    return c, report
