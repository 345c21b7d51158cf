"""Triton kernels whose PTX ptxforge must read, and the tool that stores that PTX as test data.

On a machine with a GPU and Triton (the H200 image has both):

    PYTHONPATH=. python scripts/triton_ptx.py [--out tests/data/triton]

compiles each kernel below with Triton, runs it, and writes `<case>.ptx` (Triton's PTX) and
`<case>.json` (kernel name, launch shape, dynamic shared memory, how to make the arguments, which
numpy reference checks the result).  tests/test_parse_triton.py reads those files on any machine
(parse, round trip, the CPU interpreter against numpy) and, on a GPU with Triton, generates the
PTX afresh, launches the parsed module and compares it with Triton's own run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "triton")


# ---------------------------------------------------------------- numpy references (no Triton needed)

def ref_add(x, y, out, n):
    return {2: x + y}


def ref_softmax(x, out, n_cols, stride):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {1: e / e.sum(axis=1, keepdims=True)}


def ref_rowsum(x, out, n_cols, stride):
    return {1: x.sum(axis=1)}


def ref_matmul(a, b, c, m, n, k):
    return {2: a.astype(np.float32) @ b.astype(np.float32)}


REFERENCES = {"add": ref_add, "softmax": ref_softmax, "rowsum": ref_rowsum, "matmul": ref_matmul}


def make_args(specs, seed=0):
    """numpy arguments from the JSON argument specs: arrays (dtype, shape, fill) and ints."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s["kind"] == "int":
            out.append(int(s["value"]))
            continue
        dt = np.dtype(s["dtype"])
        if s["fill"] == "zeros":
            out.append(np.zeros(s["shape"], dt))
        else:
            out.append(rng.standard_normal(s["shape"]).astype(dt))
    return out


# ---------------------------------------------------------------- the Triton side

def triton_cases():
    """(case, jit function, grid, argument specs, constexpr/launch options, reference) for each kernel.

    Integer arguments are never 1: Triton drops arguments equal to 1 from the signature.
    """
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    @triton.jit
    def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)

    @triton.jit
    def rowsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(x, axis=0))

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        # row-major A (M x K), B (K x N), C (M x N); M, N, K multiples of the blocks
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

    f32 = "float32"
    n = 3000
    rows, cols = 6, 100
    m = nn = kk = 64
    arr = lambda shape, fill="rand", dtype=f32: {"kind": "array", "dtype": dtype, "shape": shape, "fill": fill}
    num = lambda v: {"kind": "int", "value": v}
    return [
        ("add", add_kernel, (-(-n // 1024),), [arr([n]), arr([n]), arr([n], "zeros"), num(n)],
         {"BLOCK": 1024, "num_warps": 4}, "add"),
        ("softmax", softmax_kernel, (rows,), [arr([rows, cols]), arr([rows, cols], "zeros"), num(cols), num(cols)],
         {"BLOCK": 128, "num_warps": 4}, "softmax"),
        ("rowsum", rowsum_kernel, (rows,), [arr([rows, cols]), arr([rows], "zeros"), num(cols), num(cols)],
         {"BLOCK": 128, "num_warps": 2}, "rowsum"),
        ("matmul", matmul_kernel, (m // 32, nn // 32),
         [arr([m, kk], dtype="float16"), arr([kk, nn], dtype="float16"), arr([m, nn], "zeros"),
          num(m), num(nn), num(kk)],
         {"BM": 32, "BN": 32, "BK": 32, "num_warps": 4}, "matmul"),
    ]


def to_torch(args):
    import torch
    return [torch.from_numpy(a.copy()).cuda() if isinstance(a, np.ndarray) else a for a in args]


def run_triton(case):
    """Compile and run one case with Triton: (compiled kernel, its PTX, kernel name, block, shared,
    the numpy inputs, Triton's outputs as numpy)."""
    name, fn, grid, specs, meta, ref = case
    args = make_args(specs)
    targs = to_torch(args)
    compiled = fn[grid](*targs, **meta)
    md = compiled.metadata
    get = (lambda k: md[k]) if isinstance(md, dict) else (lambda k: getattr(md, k))
    kname = get("name")
    block = 32 * get("num_warps")
    shared = get("shared")
    outs = [t.cpu().numpy() if hasattr(t, "cpu") else t for t in targs]
    return compiled, compiled.asm["ptx"], kname, block, shared, args, outs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for case in triton_cases():
        name, fn, grid, specs, meta, ref = case
        _, ptx, kname, block, shared, _, _ = run_triton(case)
        with open(os.path.join(a.out, f"{name}.ptx"), "w") as f:
            f.write(ptx)
        with open(os.path.join(a.out, f"{name}.json"), "w") as f:
            json.dump({"kernel": kname, "grid": list(grid), "block": block, "shared": shared, "args": specs,
                       "reference": ref}, f, indent=1)
        print(f"{name}: kernel {kname}, {ptx.count(chr(10))} lines, block {block}, {shared} B shared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
