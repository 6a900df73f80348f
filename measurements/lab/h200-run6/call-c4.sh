#!/bin/bash
# Call C4: the serial ladder of this branch's build (engine in its own process).
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
C=$PWD/.gpuwork/code; N=$C/new
export PYTHONPATH=/tmp/site:$N:$N/container
cd $N
python3 benchmarks/gpu_bench.py device-ladders --model-dir /tmp/kmodel --g2p-table $C/stage/g2p-table.json \
  --mega-cache /tmp/run/mega-cache-float32.bin --dtype float32 --modes serial \
  --serial-coarse 1,16,22,26,30,34,40 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 \
  --hold-s 10 --measure-s 7 --idle-s 1 --out /tmp/ladnews --server-env ENGINE_PROCESS=1 --label new- > /tmp/c4.log 2>&1
grep "gpu-bench:" /tmp/c4.log | grep "passes\|fails\|wrote\|bracket\|ladder \[" | tee $OUT/c4.log; tail -3 /tmp/c4.log
tar czf $OUT/lad-c4.tgz -C /tmp --exclude='server-*.log' ladnews
