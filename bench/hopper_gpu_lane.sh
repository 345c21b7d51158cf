#!/bin/bash
# The Hopper GPU lane: GPU tests (skip turned into failure), the examples at full size,
# compute-sanitizer memcheck and racecheck on the examples (small sizes), and the benchmark.
# Everything goes to one log, ${OUT:-bench/results/hopper}/hopper_lane.log (plus the benchmark's JSON).
# Usage: bash bench/hopper_gpu_lane.sh [tests|examples|sanitizer|bench]...
set -u
OUT=${OUT:-bench/results/hopper}
mkdir -p "$OUT"
LOG="$OUT/hopper_lane.log"
export PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=gpu PYTHONUNBUFFERED=1
EXAMPLES="hopper_tma_copy hopper_wgmma_tile hopper_cluster_multicast"
step() {  # step <name> <timeout> <command...>: run, append its output and exit status to the log
  local name=$1 limit=$2; shift 2
  echo "==== $name: $*" >> "$LOG"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "==== $name rc=$rc" >> "$LOG"
  echo "$name rc=$rc"
}
for s in ${*:-tests examples bench sanitizer}; do
  case $s in
    tests) for t in test_hopper_cluster_gpu test_hopper_gpu; do
             step "$t" 60 python -m pytest -q -rfE --tb=short -p no:cacheprovider "tests/$t.py"; done ;;
    examples) for ex in $EXAMPLES; do step "$ex" 30 python "examples/$ex.py"; done ;;
    bench) step hopper_bench 60 python bench/hopper_bench.py --json "$OUT/hopper_h200.json" ;;
    sanitizer) for ex in $EXAMPLES; do for tool in memcheck racecheck; do
                 step "$tool $ex" 25 compute-sanitizer --tool "$tool" --error-exitcode 9 python "examples/$ex.py" --sanitizer
               done; done ;;
  esac
done
