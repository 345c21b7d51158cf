#!/bin/bash
# The GEMM lane on an H200, in steps that each fit one device call:
#   tests     every gpu-marked test file, one pytest per file, six at a time, skips turned into failures,
#             beside compute-sanitizer memcheck and racecheck of scripts/hopper_memcheck.py (s4, s8, bf16:
#             every default configuration, K whole and split) and the CLI's main job
#   table     bench/gemm_table_bench.py: the issue's shapes, then the decode shapes (run() and the plan beside
#             cuBLAS and Triton)
#   splitk    bench/splitk_bench.py: K whole, split in the kernel, split by a second launch
# Logs and results go to ${OUT:-bench/results/h200_lane}; a short summary is printed last.
# Usage: bash bench/h200_gemm_lane.sh [tests|table|splitk]...
set -u
OUT=${OUT:-bench/results/h200_lane}
mkdir -p "$OUT" /tmp/gemm_lane
export PYTHONPATH=. PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=gpu PYTHONUNBUFFERED=1
DECODE="1,8192,8192 16,4096,4096 16,14336,4096 16,4096,14336 256,4096,4096 256,8192,8192"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
for s in ${*:-tests}; do
  start=$(date +%s)
  case $s in
    tests)
      rm -f /tmp/gemm_lane/*.log
      for op in s4 s8 bf16; do
        ( for tool in memcheck racecheck; do
            timeout 280 compute-sanitizer --tool $tool --error-exitcode 9 python scripts/hopper_memcheck.py $op \
              > "$OUT/${tool}_$op.log" 2>&1
            echo "$tool $op rc=$?" >> "$OUT/${tool}_$op.log"
          done ) &
      done
      ( timeout 60 python -m ptxforge gemm-int4 > "$OUT/cli.log" 2>&1; echo "cli rc=$?" >> "$OUT/cli.log" ) &
      grep -l "mark.gpu" tests/test_*.py | xargs -P 6 -I{} bash -c 'f={}; b=$(basename $f .py);
        timeout 400 python -m pytest -q -m gpu $f -p no:cacheprovider -rfEs --tb=short > /tmp/gemm_lane/$b.log 2>&1;
        echo "rc=$?" >> /tmp/gemm_lane/$b.log'
      wait
      for f in /tmp/gemm_lane/*.log; do echo "== $f"; cat "$f"; done > "$OUT/gpu_tests.log"
      echo "-- gpu tests (rc, last pytest line):"
      for f in /tmp/gemm_lane/*.log; do
        printf "%-36s %s | %s\n" "$(basename "$f" .log)" "$(tail -1 "$f")" "$(grep -E 'passed|failed|error' "$f" | tail -1)"
      done
      echo "-- sanitizers and CLI:"
      for f in "$OUT"/memcheck_*.log "$OUT"/racecheck_*.log; do
        echo "$(basename "$f" .log): $(grep -c OK "$f") OK, $(grep -c MISMATCH "$f") mismatches, $(grep -E 'SUMMARY' "$f" | tail -1)"
      done
      grep -E "path:|check:|time:|rc=" "$OUT/cli.log" ;;
    table)
      timeout 300 python bench/gemm_table_bench.py --out "$OUT/gemm_table" > "$OUT/gemm_table.log" 2>&1
      echo "gemm_table rc=$?"; tail -20 "$OUT/gemm_table.log"
      timeout 250 python bench/gemm_table_bench.py --shapes $DECODE --out "$OUT/gemm_table_decode" \
        > "$OUT/gemm_table_decode.log" 2>&1
      echo "gemm_table decode rc=$?"; tail -10 "$OUT/gemm_table_decode.log" ;;
    splitk)
      timeout 300 python bench/splitk_bench.py --out "$OUT/splitk" > "$OUT/splitk.log" 2>&1
      echo "splitk rc=$?"; tail -26 "$OUT/splitk.log" ;;
    *) echo "unknown step $s (tests, table, splitk)"; exit 2 ;;
  esac
  echo "step $s took $(( $(date +%s) - start )) s"
done
