"""Runtime costs of ptxforge on the GPU.

* cold JIT: a new process loads a module with the driver's compute cache off
  (CUDA_CACHE_DISABLE=1) and ptxforge's cache off (PTXFORGE_CACHE=0);
* warm load: a new process loads the same module from ptxforge's own disk cache;
* in-process cache hit: load() of a module already loaded;
* host overhead per launch of a cached 4-argument kernel (saxpy on DeviceBuffers):
  many back-to-back calls timed with a host clock, without a sync (launch only) and with
  one sync at the end; also for a BoundLaunch and for a bare cuLaunchKernel as the floor.

Run: python bench/runtime_bench.py [--launches N] [--runs R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import ptxforge as pf  # noqa: E402
from ptxforge import f32  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402
from ptxforge.testing.kernels import saxpy  # noqa: E402

TARGET_US = 20.0


def saxpy_module() -> pf.Module:
    """The 4-argument kernel of the overhead measurement: y = a*x + y with a guarded tail."""
    return saxpy()


def large_module(steps: int = 250) -> pf.Module:
    """About 4 instructions per step: a long straight-line kernel, for JIT time that is not all overhead."""
    k = pf.KernelBuilder("long_chain", target="sm_80", maxntid=256)
    x = k.param_ptr("x", f32)
    i = k.global_index()
    p = k.add(x, k.mul(i, 4, mode="wide"))
    acc = k.ld(p, type=f32)
    for s in range(steps):
        v = k.ld(p, type=f32, offset=4 * (s % 64))
        acc = k.fma(acc, v, float(s % 7 + 1))
        acc = k.max(acc, -1e30)
    k.st(p, acc)
    return k.module()


MODULES = {"saxpy": saxpy_module, "large": large_module}


# ---------------------------------------------------------------- child process: one timed load

def child(module_name: str) -> None:
    pf.device_info()  # context creation is not part of the load time
    m = MODULES[module_name]()
    ptx_lines = len(str(m).splitlines())
    t0 = time.perf_counter()
    lm = pf.load(m)
    dt = time.perf_counter() - t0
    print(json.dumps({"ms": 1e3 * dt, "origin": lm.origin, "ptx_lines": ptx_lines}))


def timed_children(module_name: str, runs: int, env: dict) -> dict:
    out = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", module_name],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"the timed load of '{module_name}' failed in its process:\n{p.stdout}{p.stderr}")
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    ms = [r["ms"] for r in out]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "runs": runs,
            "origins": sorted({r["origin"] for r in out}), "ptx_lines": out[0]["ptx_lines"]}


# ---------------------------------------------------------------- in-process measurements

def host_overhead(launches: int) -> dict:
    from ptxforge.runtime.driver import api
    fn = pf.load(saxpy_module())["saxpy"]
    n, block = 1 << 12, 256
    grid = (n + block - 1) // block
    x = pf.DeviceBuffer.from_host(np.ones(n, np.float32))
    y = pf.DeviceBuffer.from_host(np.zeros(n, np.float32))
    res = {}

    def loop(call, count):
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        t1 = time.perf_counter()
        pf.synchronize()
        t2 = time.perf_counter()
        return 1e6 * (t1 - t0) / count, 1e6 * (t2 - t0) / count

    call = lambda: fn(grid, block, x, y, n, 1.0)  # noqa: E731
    loop(call, 1000)
    res["call_launch_only_us"], res["call_with_sync_us"] = loop(call, launches)

    bound = fn.bind(grid, block, x, y, n, 1.0)
    loop(bound.launch, 1000)
    res["bound_launch_only_us"], res["bound_with_sync_us"] = loop(bound.launch, launches)

    d = api()
    func, argv, sobj = fn._func, bound._blob.addr, d.CUstream(0)
    raw = lambda: d.cuLaunchKernel(func, grid, 1, 1, block, 1, 1, 0, sobj, argv, 0)  # noqa: E731
    loop(raw, 1000)
    res["raw_cuLaunchKernel_us"], _ = loop(raw, launches)

    res["gpu_time_per_launch_us"] = pf.benchmark(fn, grid, block, x, y, n, 1.0, warmup=100, repeat=50,
                                                 batch=20).median_us
    check = np.ones(n, np.float32) * (1000 + 2 * launches + 1000 + 1000 + launches + 100 + 50 * 20)
    res["result_ok"] = bool(np.array_equal(y.to_host(), check))
    return res


def memory_hit_us(repeat: int = 2000) -> float:
    m = saxpy_module()
    pf.load(m)
    t0 = time.perf_counter()
    for _ in range(repeat):
        pf.load(m)
    return 1e6 * (time.perf_counter() - t0) / repeat


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="ptxforge runtime costs")
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5, help="processes per load measurement")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    reason = gpu_skip_reason()
    if reason is not None:
        print(f"runtime_bench: no GPU here ({reason}); nothing to measure")
        return 0

    info = pf.device_info()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results = {"device": str(info), "launches": args.launches, "loads": {}}
    with tempfile.TemporaryDirectory(prefix="ptxforge-bench-cache-") as cache:
        for name in MODULES:
            cold = timed_children(name, args.runs, dict(env, CUDA_CACHE_DISABLE="1", PTXFORGE_CACHE="0"))
            warm_env = dict(env, CUDA_CACHE_DISABLE="1", PTXFORGE_CACHE="1", PTXFORGE_CACHE_DIR=cache)
            timed_children(name, 1, warm_env)  # fills ptxforge's cache
            warm = timed_children(name, args.runs, warm_env)
            results["loads"][name] = {"cold": cold, "warm": warm}
    results["memory_hit_us"] = memory_hit_us()
    results["overhead"] = host_overhead(args.launches)

    o = results["overhead"]
    rows = []
    for name, r in results["loads"].items():
        c, w = r["cold"], r["warm"]
        rows.append((f"cold JIT, {name} ({c['ptx_lines']} PTX lines), new process, caches off",
                     f"{c['median_ms']:.1f} ms", f"min {c['min_ms']:.1f}, max {c['max_ms']:.1f}, n={c['runs']}"))
        rows.append((f"warm load, {name}, new process, ptxforge disk cache",
                     f"{w['median_ms']:.2f} ms", f"min {w['min_ms']:.2f}, max {w['max_ms']:.2f}, from {'/'.join(w['origins'])}"))
    rows += [
        ("load() of a module already loaded (in-process cache)", f"{results['memory_hit_us']:.1f} us", ""),
        ("host overhead per launch, fn(grid, block, x, y, n, a), launch only",
         f"{o['call_launch_only_us']:.2f} us", f"target < {TARGET_US:.0f} us: "
         + ("met" if o["call_launch_only_us"] < TARGET_US else "MISSED")),
        ("  same, including the final sync (amortized)", f"{o['call_with_sync_us']:.2f} us", ""),
        ("BoundLaunch.launch(), launch only", f"{o['bound_launch_only_us']:.2f} us", ""),
        ("bare cuLaunchKernel through cuda.bindings (the floor)", f"{o['raw_cuLaunchKernel_us']:.2f} us", ""),
        ("GPU time per launch (events, batches of 20)", f"{o['gpu_time_per_launch_us']:.2f} us", ""),
    ]
    print(f"ptxforge runtime bench on {results['device']}; {args.launches} launches per overhead loop")
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"| {'measure':<{w0}} | {'value':>{w1}} | notes")
    print(f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|------")
    for a, b, c in rows:
        print(f"| {a:<{w0}} | {b:>{w1}} | {c}")
    if not o["result_ok"]:
        print("WARNING: the saxpy results after the timing loops are not what the launches should produce")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if o["result_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
