#!/bin/bash
# The Hopper GPU lane: GPU tests (skip turned into failure), the examples at full size,
# compute-sanitizer memcheck and racecheck on the examples (small sizes), and the benchmark.
# Writes everything under ${OUT:-bench/results}.  Usage: bash bench/hopper_gpu_lane.sh [tests|examples|sanitizer|bench]...
set -u
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=gpu PYTHONUNBUFFERED=1
steps=${*:-tests examples sanitizer bench}
for step in $steps; do
  case $step in
    tests) for t in test_hopper_cluster_gpu test_hopper_gpu; do
             timeout 60 python -m pytest -q -rfE --tb=short -p no:cacheprovider tests/$t.py > "$OUT/$t.txt" 2>&1
             echo "$t rc=$?"; done ;;
    examples) for ex in hopper_tma_copy hopper_wgmma_tile hopper_cluster_multicast; do
                [ -f examples/$ex.py ] && timeout 30 python examples/$ex.py > "$OUT/$ex.txt" 2>&1; echo "$ex rc=$?"; done ;;
    sanitizer) for ex in hopper_tma_copy hopper_wgmma_tile hopper_cluster_multicast; do
                 [ -f examples/$ex.py ] || continue
                 for tool in memcheck racecheck; do
                   timeout 25 compute-sanitizer --tool $tool --error-exitcode 9 python examples/$ex.py --sanitizer \
                     > "$OUT/sanitizer_${tool}_$ex.txt" 2>&1; echo "$tool $ex rc=$?"; done; done ;;
    bench) timeout 45 python bench/hopper_bench.py --json "$OUT/hopper_h200.json" > "$OUT/hopper_bench.txt" 2>&1
           echo "bench rc=$?" ;;
  esac
done
