#!/usr/bin/env bash
# The GPU lane: the whole test suite with the GPU skip turned into a failure, compute-sanitizer on the
# examples, then the benchmarks.  Run from the repository root on a machine with a GPU:
#     scripts/gpu_lane.sh [OUTDIR]            (stages: PTXFORGE_LANE="tests sanitizer bench")
# Logs go to OUTDIR (default: ./gpu-lane-out); a short summary is printed last.
set -u
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-lane-out}}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$(pwd) PYTHONUNBUFFERED=1
export PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-gpu}
export PTXFORGE_CACHE_DIR=${PTXFORGE_CACHE_DIR:-/tmp/ptxforge-cache}
stages=${PTXFORGE_LANE:-tests sanitizer bench}
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"

if [[ " $stages " == *" tests "* ]]; then
  python3 -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tee "$out/tests.log" | tail -n 40
  summary+=("tests: $(grep -E '^[0-9]+ (passed|failed)|passed|failed' "$out/tests.log" | tail -n 1)")
fi

if [[ " $stages " == *" sanitizer "* ]]; then
  for ex in ${SANITIZE_EXAMPLES:-examples/saxpy.py examples/shared_reverse.py examples/tile_copy.py examples/int4_gemm.py examples/hopper_tma_copy.py examples/hopper_wgmma_tile.py examples/hopper_cluster_multicast.py}; do
    [ -f "$ex" ] || continue
    for tool in memcheck racecheck; do
      log="$out/sanitizer-$(basename "$ex" .py)-$tool.log"
      PTXFORGE_CACHE=0 compute-sanitizer --tool "$tool" --error-exitcode 9 python3 "$ex" --sanitizer >"$log" 2>&1
      rc=$?
      summary+=("$tool $(basename "$ex"): rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)")
    done
  done
fi

if [[ " $stages " == *" bench "* ]]; then
  for b in ${BENCHES:-bench/emit_bench.py bench/runtime_bench.py bench/copy_bench.py bench/interp_bench.py bench/gemm_bench.py bench/hopper_bench.py}; do
    [ -f "$b" ] || continue
    python3 "$b" ${BENCH_ARGS:-} >"$out/$(basename "$b" .py).log" 2>&1
    summary+=("bench $(basename "$b"): rc=$?")
  done
  for b in "$out"/*bench*.log; do echo "== $b"; tail -n 25 "$b"; done
fi

echo "==== summary"
printf '%s\n' "${summary[@]}"
