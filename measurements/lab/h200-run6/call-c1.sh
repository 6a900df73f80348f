#!/bin/bash
# Call C1: the batched ladders, run 6 (main's code: the engine in the server's process) and
# this branch's design (the engine in a process of its own), same bench, same grid, same holds.
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
R=$PWD; C=$PWD/.gpuwork/code; N=$C/new
export PYTHONPATH=/tmp/site:$N:$N/container
LAD="--model-dir /tmp/kmodel --g2p-table $C/stage/g2p-table.json --mega-cache /tmp/run/mega-cache-float32.bin --dtype float32 --concurrent-coarse 1,64,128,192,288,432,648,972 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 --hold-s 10 --measure-s 7 --idle-s 1 --modes concurrent --server-logs"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $C/wheels/*.whl
cd $N
uptime
python3 benchmarks/gpu_bench.py device-ladders $LAD --out /tmp/lad6 --server-root $R --label run6- > /tmp/c1-run6.log 2>&1
grep "gpu-bench:" /tmp/c1-run6.log | grep -v "start-up:" | tee $OUT/c1.log; tail -5 /tmp/c1-run6.log
python3 benchmarks/gpu_bench.py device-ladders $LAD --out /tmp/ladnew --server-env ENGINE_PROCESS=1 --label new- > /tmp/c1-new.log 2>&1
grep "gpu-bench:" /tmp/c1-new.log | grep -v "start-up:" | tee -a $OUT/c1.log; tail -5 /tmp/c1-new.log
uptime
for d in lad6 ladnew; do grep -h '"engine_load"\|"engine_failed"\|"error"' /tmp/$d/server-*.log | tail -400 > /tmp/$d/engine-load.jsonl; done
tar czf $OUT/lad-c1.tgz -C /tmp --exclude='server-*.log' lad6 ladnew
