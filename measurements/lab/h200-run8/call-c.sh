#!/bin/bash
# Run 8, call C (run it twice: r1,r2 then r3,serial): refined batched ladders of the candidate
# build (float16 with f0n,post in float32, CUDA graphs <= 8 for both halves) with
# --underrun-slo 0.05, using call B's mega-cache; then, if the call has time, one serial ladder.
#   REPEATS="r1 r2" (default) or "r3"; SERIAL=1 adds the serial ladder at the end
# carry: [".gpu-stage/b"]
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
B=$(realpath ${STAGE:-.gpu-stage})/b  # STAGE: where scripts/gpu-stage wrote
export PYTHONPATH=/tmp/site:$PWD:$PWD/container
export ENGINE_FP32_GROUPS=f0n,post ENGINE_CUDA_GRAPHS=8 ENGINE_TEXT_GRAPHS=1  # the servers inherit these
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
L="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json --mega-cache /tmp/run/mega-cache-fast.bin --dtype float16 --underrun-slo 0.05 --server-logs"
lad() {  # out folder, then device-ladders' own arguments
  python3 benchmarks/gpu_bench.py device-ladders $L --out /tmp/$1 "${@:2}" > /tmp/$1.log 2>&1
  grep "gpu-bench:" /tmp/$1.log | grep "passes\|fails\|bracket\|ladder \[\|ready after\|Q_max" | tee -a $OUT/c.log
  grep -h '"engine_load"' /tmp/$1/server-*.log 2>/dev/null | tail -60 > /tmp/$1/engine-load.jsonl
  python3 benchmarks/gpu_bench.py served /tmp/$1/qmax-*.json --out /tmp/$1/served.jsonl 2>&1 | tail -3 | tee -a $OUT/c.log
  tar czf $OUT/$1.tgz -C /tmp --exclude='server-*.log' $1; echo "[$(el) s] $1 done" | tee -a $OUT/c.log
}
BAT="--modes concurrent --concurrent-coarse 1,288,432,540,648,800 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 --hold-s 10 --measure-s 7 --idle-s 1"
for r in ${REPEATS:-r1 r2}; do
  [ $(el) -lt 300 ] && lad batched-$r $BAT --label $r-
done
[ "${SERIAL:-0}" = 1 ] && [ $(el) -lt 360 ] && lad serial-r1 --modes serial --serial-coarse 1,16,24,32,40 \
  --keep-below 1 --hold-s 10 --measure-s 7 --label s1-
echo "[$(el) s] call C done"
