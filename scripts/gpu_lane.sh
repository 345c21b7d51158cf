#!/usr/bin/env bash
# The GPU lane: the whole test suite with the GPU skip turned into a failure, compute-sanitizer
# (memcheck and racecheck) on the examples and on a ragged Hopper GEMM, then the benchmarks.
# Run from the repository root on a machine with a GPU:
#     scripts/gpu_lane.sh [OUTDIR]          (stages: PTXFORGE_LANE="tests sanitizer bench"; TEST_SHARDS=N;
#                                           SANITIZE="files", SAN_TOOLS="memcheck racecheck")
# The tests and the sanitizer runs go side by side (neither is timed); the benchmarks run after
# both, alone on the GPU.  Every log goes to OUTDIR (default ./gpu-lane-out), packed as
# OUTDIR/lane-logs.tgz too; a short summary is printed last and kept in OUTDIR/summary.txt.
set -u
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-lane-out}}
logs="$out/logs"
mkdir -p "$logs"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$(pwd) PYTHONUNBUFFERED=1
export PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-gpu}
# the cubin cache stays in its per-user default (private, mode 0700) unless PTXFORGE_CACHE_DIR names one
stages=${PTXFORGE_LANE:-tests sanitizer bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | tee "$logs/gpu.txt"

# TEST_SHARDS=N runs the test files in N pytest processes side by side (file i goes to shard i % N);
# each shard's log is tests-<i>.log, and tests.summary has one line per shard.
run_tests() {
  local shards=${TEST_SHARDS:-1} files=(tests/test_*.py) i j pids=()
  : >"$logs/tests.summary"
  for ((i = 0; i < shards; i++)); do
    local sel=()
    for j in "${!files[@]}"; do ((j % shards == i)) && sel+=("${files[$j]}"); done
    ( timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest -q -p no:cacheprovider -rfEs --tb=short ${PYTEST_ARGS:-} \
        "${sel[@]}" >"$logs/tests-$i.log" 2>&1
      echo "tests shard $i/$shards: rc=$? $(grep -E '[0-9]+ (passed|failed)' "$logs/tests-$i.log" | tail -n 1)" \
        >>"$logs/tests.summary" ) &
    pids+=($!)
  done
  for j in "${pids[@]}"; do wait "$j"; done
  cat "$logs"/tests-*.log >"$logs/tests.log"
}

SANITIZE=${SANITIZE:-"examples/int4_gemm.py examples/dependent_launch.py examples/hopper_tma_copy.py examples/hopper_wgmma_tile.py examples/hopper_cluster_multicast.py examples/tma_reduce.py examples/tensormap_edit.py examples/wmma_gemm.py scripts/hopper_memcheck.py"}
run_sanitizer() {
  : >"$logs/sanitizer.summary"
  for ex in $SANITIZE; do
    [ -f "$ex" ] || continue
    for tool in ${SAN_TOOLS:-memcheck racecheck}; do
      log="$logs/sanitizer-$(basename "$ex" .py)-$tool.log"
      PTXFORGE_CACHE=0 timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        python3 "$ex" --sanitizer >"$log" 2>&1
      rc=$?
      echo "$tool $(basename "$ex"): rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)" \
        >>"$logs/sanitizer.summary"
    done
  done
}

pids=()
[[ " $stages " == *" tests "* ]] && { run_tests & pids+=($!); }
[[ " $stages " == *" sanitizer "* ]] && { run_sanitizer & pids+=($!); }
for p in "${pids[@]}"; do wait "$p"; done

: >"$logs/bench.summary"
if [[ " $stages " == *" bench "* ]]; then
  BENCHES=${BENCHES:-"bench/hopper_gemm_bench.py --bench --ops s8,s4,bf16 --top 1 --shape 8192,8192,8192 --shape 4096,4096,4096 --shape 128,8192,8192 --shape 32,8192,8192 --out $logs/hopper_gemm.json
bench/run_overhead_bench.py --out $logs/run_overhead
bench/gemm_table_bench.py --out $logs/gemm_table
bench/gemm_table_bench.py --shapes 1,8192,8192 16,4096,4096 16,14336,4096 16,4096,14336 256,4096,4096 256,8192,8192 --out $logs/gemm_table_decode
bench/splitk_bench.py --out $logs/splitk
bench/hopper_bench.py --json $logs/hopper.json
bench/runtime_bench.py"}
  while IFS= read -r b; do
    [ -n "$b" ] || continue
    name=$(basename "${b%% *}" .py)
    [ -e "$logs/$name.log" ] && name="$name-$(ls "$logs/$name"*.log | wc -l)"  # a bench run twice keeps both logs
    timeout "${BENCH_TIMEOUT:-240}" python3 $b >"$logs/$name.log" 2>&1
    echo "bench $name: rc=$?" >>"$logs/bench.summary"
  done <<<"$BENCHES"
fi

for f in "$logs"/*bench*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done
cat "$logs"/*.summary 2>/dev/null | tee "$out/summary.txt"
tar czf "$out/lane-logs.tgz" -C "$logs" . 2>/dev/null
echo "==== summary"
cat "$out/summary.txt"
