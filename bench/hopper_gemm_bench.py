"""Hopper GEMM (sm_90a, TMA + wgmma, warp-specialized, persistent) against cuBLAS and Triton on one GPU.

    python bench/hopper_gemm_bench.py --check               # exactness on ragged shapes (poisoned C)
    python bench/hopper_gemm_bench.py --bench --shape 8192,8192,8192 --out results.json
    python bench/hopper_gemm_bench.py --variants --check --bench --ops s8,bf16   # clusters, TMA-store epilogue

--check: every configuration given runs ragged shapes and compares with numpy (int: exact; bf16: the
f32-accumulation bound), C filled with 0xFF bytes first; at the bench shape it also compares with
cuBLAS (exact for int).  --bench: CUDA events over back-to-back launches after warm-up, inputs
rotated over several sets larger than the 60 MB L2 together, random non-zero data; beside ours
torch._int_mm / torch.matmul (cuBLAS) and a Triton matmul written here (autotuned over a few
configurations).  TOPS = 2 M N K / time.  The table comes last.
--variants: the configurations of `schedules.hopper.tuning.CANDIDATES` instead of the built-in list:
the default first, then 2-CTA clusters with TMA multicast (cluster_m=2 shares B, cluster_n=2
shares A) and the shared-memory + TMA-store epilogue (epilogue='tma'), side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxforge.schedules.hopper import CANDIDATES, DEFAULTS, HopperGemm, prepare, reference  # noqa: E402

L2_BYTES = 60 << 20

CONFIGS = {  # the first of each: what for_shape picks (DEFAULTS, pdl included)
    "s8": [dict(DEFAULTS["s8"]), dict(block_n=256, wg_m=64, consumers=2, stages=4),
           dict(block_n=256, wg_m=64, consumers=2, stages=4, raster_group=16),
           dict(block_n=128, wg_m=128, consumers=2, stages=4)],
    "bf16": [dict(block_n=256, wg_m=64, consumers=2, stages=3),
             dict(block_n=256, wg_m=64, consumers=2, stages=4)],
    "s4": [dict(DEFAULTS["s4"]), dict(block_n=256, wg_m=64, consumers=2, stages=2, block_k_bytes=256, scaled=True),
           dict(block_n=256, wg_m=64, consumers=2, stages=2, block_k_bytes=256, biased=True),
           dict(block_n=192, wg_m=64, consumers=2, stages=3, block_k_bytes=256, biased=True),
           dict(block_n=128, wg_m=64, consumers=2, stages=4, block_k_bytes=256, biased=True)],
}
RAGGED = [(200, 328, 272), (64, 64, 64), (257, 511, 1040), (96, 131, 64), (1000, 130, 4096), (384, 512, 8192),
          (40, 300, 1792, 3), (32, 1024, 8192), (257, 512, 1040), (96, 132, 64), (300, 260, 1024, 2)]


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------- data
def host_operands(op, m, n, k, rng):
    if op == "s8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)
    if op == "s4":
        return (rng.integers(0, 256, (m, k // 2), dtype=np.uint8).view(np.int8),
                rng.integers(0, 256, (n, k // 2), dtype=np.uint8).view(np.int8))
    import torch
    a = torch.randn(m, k, dtype=torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    b = torch.randn(n, k, dtype=torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return a, b


def to_dev(x, op):
    import torch
    t = torch.from_numpy(np.ascontiguousarray(x)).cuda()
    if op == "bf16":
        t = t.view(torch.bfloat16)
    return t


def dev_operands(op, m, n, k, gen):
    import torch
    if op == "s8":
        return (torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda", generator=gen),
                torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda", generator=gen))
    if op == "s4":  # packed bytes, two values each: uint8, as the s4 schedules take them
        return (torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device="cuda", generator=gen),
                torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda", generator=gen))
    return (torch.randn(m, k, dtype=torch.bfloat16, device="cuda", generator=gen),
            torch.randn(n, k, dtype=torch.bfloat16, device="cuda", generator=gen))


def widen_torch(p):
    """[r, k/2] packed s4 bytes (uint8 or int8; even k in the low nibble) -> int8 [r, k] on the GPU."""
    import torch
    p = p.view(torch.int8)  # arithmetic shifts sign-extend each nibble
    lo = (p << 4) >> 4
    hi = p >> 4
    return torch.stack([lo, hi], dim=-1).reshape(p.shape[0], 2 * p.shape[1]).contiguous()


def out_tensor(op, m, n, cfg=None):
    """C on the GPU, poisoned (0xFF bytes): int32, float32, or with cfg.c16 the 16-bit type."""
    import torch
    if cfg is not None and cfg.c16:
        dt = torch.bfloat16 if op == "bf16" else torch.float16
    else:
        dt = torch.int32 if op in ("s8", "s4") else torch.float32
    c = torch.empty((m, n), dtype=dt, device="cuda")
    c.view(torch.uint8).fill_(0xFF)
    return c


# ---------------------------------------------------------------- checks
def check_config(cfg, shapes, rng):
    import torch
    ok = True
    for (m, n, k, *sp) in shapes:
        splits = sp[0] if sp else None
        a, b = host_operands(cfg.operand, m, n, k, rng)
        if cfg.c16:
            if splits:
                continue  # 16-bit C rounds the whole sum: no split K
            splits = None
        c = out_tensor(cfg.operand, m, n, cfg)
        p = prepare(cfg, to_dev(a, cfg.operand), to_dev(b, cfg.operand), c, k=k, splits=splits)
        p.launch()
        torch.cuda.synchronize()
        got = c.float().cpu().numpy()
        ref = reference(cfg, a.view(np.uint8) if cfg.operand == "s4" else a, b.view(np.uint8)
                        if cfg.operand == "s4" else b)
        if cfg.operand in ("s8", "s4"):
            good = np.array_equal(got.astype(np.int64), ref)
            err = int(np.abs(got.astype(np.int64) - ref).max())
        else:
            af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            bound = k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30
            if cfg.c16:  # one rounding to bf16: half an ulp
                bound = bound * 1.01 + 2.0 ** -8 * np.abs(ref)
            d = np.abs(got.astype(np.float64) - ref)
            good = bool(np.all(np.isfinite(got)) and np.all(d <= bound))
            err = float(np.nanmax(d / bound))
        ok &= good
        log(f"  check {cfg.kernel_name} {m}x{n}x{k} splits {p.splits}: {'OK' if good else 'MISMATCH'} "
            f"(max err {err})")
        if not good and cfg.operand in ("s8", "s4"):
            bad = np.argwhere(got.astype(np.int64) != ref)
            log(f"    {len(bad)} wrong of {got.size}; first {bad[:5].tolist()}; got {got[tuple(bad[0])]} "
                f"want {ref[tuple(bad[0])]}")
    return ok


# ---------------------------------------------------------------- timing
def time_launches(fn_list, iters, warmup=3):
    """Median-free: total time of `iters` back-to-back launches cycling fn_list, CUDA events, ms each."""
    import torch
    for i in range(warmup):
        fn_list[i % len(fn_list)]()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        s.record()
        for i in range(iters):
            fn_list[i % len(fn_list)]()
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / iters)
    return best


def n_sets(bytes_per_set):
    return int(max(2, -(-2 * L2_BYTES // int(bytes_per_set))))


def triton_matmul(op):
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": 128, "BN": 256, "BK": 128 if op == "s8" else 64, "G": 8}, num_stages=3,
                             num_warps=8),
               triton.Config({"BM": 128, "BN": 128, "BK": 128 if op == "s8" else 64, "G": 8}, num_stages=4,
                             num_warps=4),
               triton.Config({"BM": 256, "BN": 128, "BK": 128 if op == "s8" else 64, "G": 8}, num_stages=3,
                             num_warps=8),
               # skinny problems (few rows of A): tiles that do not pad M to 128
               triton.Config({"BM": 64, "BN": 128, "BK": 128 if op == "s8" else 64, "G": 8}, num_stages=4,
                             num_warps=4),
               triton.Config({"BM": 32, "BN": 128, "BK": 256 if op == "s8" else 128, "G": 8}, num_stages=4,
                             num_warps=4)]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kern(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             G: tl.constexpr, ACC: tl.constexpr):
        pid = tl.program_id(0)
        npm = tl.cdiv(M, BM)
        npn = tl.cdiv(N, BN)
        per_group = G * npn
        group = pid // per_group
        first = group * G
        gsz = min(npm - first, G)
        pm = first + (pid % per_group) % gsz
        pn = (pid % per_group) // gsz
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_p = a_ptr + rm[:, None] * K + rk[None, :]
        b_p = b_ptr + rn[None, :] * K + rk[:, None]  # B is N x K: load a [BK, BN] tile of B^T
        acc = tl.zeros((BM, BN), dtype=ACC)
        for kk in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_p, mask=(rm[:, None] < M) & (rk[None, :] + kk * BK < K), other=0)
            b = tl.load(b_p, mask=(rn[None, :] < N) & (rk[:, None] + kk * BK < K), other=0)
            acc = tl.dot(a, b, acc, out_dtype=ACC)
            a_p += BK
            b_p += BK
        c_p = c_ptr + rm[:, None] * N + rn[None, :]
        tl.store(c_p, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def call(a, b, c):
        M, K = a.shape
        N = b.shape[0]
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
        kern[grid](a, b, c, M, N, K, ACC=tl.int32 if op == "s8" else tl.float32)
    return call


def bench_shape(op, shape, configs, rows):
    import torch
    m, n, k = shape
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    ops = 2.0 * m * n * k
    per_set = (m + n) * k * (0.5 if op == "s4" else 1 if op == "s8" else 2)
    sets = [dev_operands(op, m, n, k, gen) for _ in range(n_sets(per_set))]
    c = out_tensor(op, m, n)
    iters = max(10, min(200, int(2e12 / ops * 20)))
    # reference on the GPU: cuBLAS
    if op == "s8":
        ref_fn = lambda a, b: torch._int_mm(a, b.t())  # noqa: E731
    elif op == "s4":
        ref_fn = lambda a, b: torch._int_mm(widen_torch(a), widen_torch(b).t())  # noqa: E731
    else:
        ref_fn = lambda a, b: torch.matmul(a, b.t()).float()  # noqa: E731
    ref = ref_fn(*sets[0])
    for kw in configs:
        try:
            cfg = HopperGemm(op, **kw)
            c = out_tensor(op, m, n, cfg)
            plans = [prepare(cfg, a, b, c, k=k) for a, b in sets]
            c.view(torch.uint8).fill_(0xFF)
            plans[0].launch()
            torch.cuda.synchronize()
            if op in ("s8", "s4"):
                good = bool(torch.equal(c, ref))
            else:
                good = bool(torch.allclose(c.float(), ref, rtol=2e-2, atol=2e-1 * (k ** 0.5) / 8))
            ms = time_launches([p.launch for p in plans], iters)
            rows.append(dict(impl=f"ptxforge {cfg.kernel_name}", op=op, shape=shape, ms=ms, tops=ops / ms / 1e9,
                             exact=good))
            log(f"  {cfg.kernel_name}: {ops / ms / 1e9:7.1f} TOPS  {ms * 1e3:8.1f} us  "
                f"{'matches cuBLAS' if good else 'DIFFERS from cuBLAS'}")
        except Exception as e:  # keep the other configurations' numbers
            log(f"  {kw}: FAILED {type(e).__name__}: {e}")
    # cuBLAS
    if op in ("s8", "s4"):
        if op == "s4":
            wsets = [(widen_torch(a), widen_torch(b)) for a, b in sets[:2]]
        else:
            wsets = sets
        fns = [lambda a=a, b=b: torch._int_mm(a, b.t()) for a, b in wsets]
        name = "cuBLAS int8 torch._int_mm"
    else:
        fns = [lambda a=a, b=b: torch.matmul(a, b.t()) for a, b in sets]
        name = "cuBLAS bf16 torch.matmul"
    if op != "s4" or True:
        ms = time_launches(fns, iters)
        rows.append(dict(impl=name, op=op, shape=shape, ms=ms, tops=ops / ms / 1e9, exact=True))
        log(f"  {name}: {ops / ms / 1e9:7.1f} TOPS")
    if op in ("s8", "bf16"):
        try:
            tm = triton_matmul(op)
            ct = torch.empty((m, n), dtype=torch.int32 if op == "s8" else torch.float32, device="cuda")
            tm(sets[0][0], sets[0][1], ct)
            torch.cuda.synchronize()
            good = bool(torch.equal(ct, ref)) if op == "s8" else bool(torch.allclose(ct, ref, rtol=2e-2, atol=1))
            ms = time_launches([lambda a=a, b=b: tm(a, b, ct) for a, b in sets], iters)
            rows.append(dict(impl=f"Triton {op} (written here)", op=op, shape=shape, ms=ms, tops=ops / ms / 1e9,
                             exact=good))
            log(f"  Triton {op}: {ops / ms / 1e9:7.1f} TOPS {'ok' if good else 'DIFFERS'}")
        except Exception as e:
            log(f"  Triton {op}: FAILED {type(e).__name__}: {e}")
    del sets
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--ops", default="s8,bf16,s4")
    ap.add_argument("--shape", action="append", default=None)
    ap.add_argument("--configs", default=None, help="JSON {op: [kwargs, ...]} replacing the built-in list")
    ap.add_argument("--out", default=None)
    ap.add_argument("--top", type=int, default=0, help="bench only the first N configurations per op")
    ap.add_argument("--variants", action="store_true",
                    help="the tuning candidates (default, clusters with multicast, TMA-store epilogue) instead")
    args = ap.parse_args()
    configs = json.loads(args.configs) if args.configs else CANDIDATES if args.variants else CONFIGS
    ops = args.ops.split(",")
    rng = np.random.default_rng(7)
    if args.check:
        allok = True
        for op in ops:
            for kw in configs.get(op, []):
                cfg = HopperGemm(op, **kw)
                t = time.time()
                _ = cfg.module
                log(f"{cfg.kernel_name}: emitted in {1e3 * (time.time() - t):.0f} ms")
                shapes = [s for s in RAGGED if (op != "s4" or s[2] % 32 == 0)
                          and (cfg.epilogue != "tma" or s[1] * cfg.c_bytes % 16 == 0)]  # TMA-stored C: 16-byte rows
                allok &= check_config(cfg, shapes, rng)
        log("CHECK", "PASS" if allok else "FAIL")
    rows = []
    if args.bench:
        shapes = [tuple(int(x) for x in s.split(",")) for s in (args.shape or ["8192,8192,8192"])]
        for op in ops:
            for shape in shapes:
                log(f"{op} {shape}:")
                cl = configs.get(op, [])
                bench_shape(op, shape, cl[:args.top] if args.top else cl, rows)
        log("\n| impl | op | M,N,K | us | TOPS |\n|---|---|---|---|---|")
        for r in rows:
            log(f"| {r['impl']} | {r['op']} | {','.join(map(str, r['shape']))} | {r['ms'] * 1e3:.1f} | "
                f"{r['tops']:.0f}{'' if r['exact'] else ' (WRONG)'} |")
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
