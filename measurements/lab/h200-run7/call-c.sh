#!/bin/bash
# Run 7, call C: the ladders (engine in its own process, float32, compile cache of call B).
#   1. c = 1 alone, CUDA graphs off, then on (ENGINE_CUDA_GRAPHS=8): p95 TTFAB a quiet caller waits
#   2. the batched ladder of the build GRAPHS names (0 or 8; pass GRAPHS=8 only if call B kept
#      parity through the graphs), scout then refined, with --underrun-slo 0.05; repeated while
#      the call has time
# carry: [".gpu-stage/b"]
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
B=$(realpath ${STAGE:-.gpu-stage})/b; GRAPHS=${GRAPHS:-0}  # STAGE: where scripts/gpu-stage wrote
export PYTHONPATH=/tmp/site:$PWD:$PWD/container
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
L="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json --mega-cache /tmp/run/mega-cache-float32.bin --dtype float32 --modes concurrent --underrun-slo 0.05 --server-logs"
lad() {  # out folder, then device-ladders' own arguments
  python3 benchmarks/gpu_bench.py device-ladders $L --out /tmp/$1 "${@:2}" > /tmp/$1.log 2>&1
  grep "gpu-bench:" /tmp/$1.log | grep "passes\|fails\|bracket\|ladder \[\|ready after\|Q_max" | tee -a $OUT/c.log
  grep -h '"engine_load"' /tmp/$1/server-*.log 2>/dev/null | tail -60 > /tmp/$1/engine-load.jsonl
  python3 benchmarks/gpu_bench.py served /tmp/$1/qmax-*.json --out /tmp/$1/served.jsonl 2>&1 | tail -3 | tee -a $OUT/c.log
  tar czf $OUT/$1.tgz -C /tmp --exclude='server-*.log' $1; echo "[$(el) s] $1 done" | tee -a $OUT/c.log
}
C1="--concurrent-coarse 1 --scout-hold-s 4 --scout-measure-s 2 --hold-s 12 --measure-s 10 --idle-s 1"
lad c1-graphs0 $C1 --label g0-
ENGINE_CUDA_GRAPHS=8 lad c1-graphs8 $C1 --label g8- --server-env ENGINE_CUDA_GRAPHS=8
BAT="--concurrent-coarse 1,288,432,540,648,800 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 --hold-s 10 --measure-s 7 --idle-s 1"
ENV=""; [ "$GRAPHS" != 0 ] && ENV="--server-env ENGINE_CUDA_GRAPHS=$GRAPHS"
lad batched-g$GRAPHS-r1 $BAT --label r1- $ENV
[ $(el) -lt 330 ] && lad batched-g$GRAPHS-r2 $BAT --label r2- $ENV
echo "[$(el) s] call C done"
