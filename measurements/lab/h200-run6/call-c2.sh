#!/bin/bash
# Call C2: the serial ladder (run 6, main's code), then the serving-path bench of this branch
# (soxr against the polyphase filter, one loop) on this machine.
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
R=$PWD; C=$PWD/.gpuwork/code; N=$C/new
export PYTHONPATH=/tmp/site:$N:$N/container
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $C/wheels/*.whl
cd $N
uptime
python3 benchmarks/gpu_bench.py device-ladders --model-dir /tmp/kmodel --g2p-table $C/stage/g2p-table.json \
  --mega-cache /tmp/run/mega-cache-float32.bin --dtype float32 --modes serial \
  --serial-coarse 1,16,24,28,32,36,40,48 --keep-below 1 --scout-hold-s 6 --scout-measure-s 4 \
  --hold-s 10 --measure-s 7 --idle-s 1 --out /tmp/lad6s --server-root $R --label run6- > /tmp/c2-serial.log 2>&1
grep "gpu-bench:" /tmp/c2-serial.log | grep -v "start-up:" | tee $OUT/c2.log; tail -5 /tmp/c2-serial.log
python3 benchmarks/serving_path_bench.py --seconds 6 --concurrency 64,256 --clients 8 \
  --out /tmp/lad6s/serving-path-h200.json > /tmp/c2-serving.log 2>&1
sed -n '/^Serving path/,$p' /tmp/c2-serving.log | tee -a $OUT/c2.log; grep "serving-path:" /tmp/c2-serving.log | tail -8
uptime
tar czf $OUT/lad-c2.tgz -C /tmp --exclude='server-*.log' lad6s
for D in float32 bfloat16 float16; do
  ENGINE_COMPILE=1 ENGINE_DTYPE=$D ENGINE_COMPILE_CACHE=/tmp/run/mega-cache-$D.bin python3 benchmarks/gpu_bench.py offline \
    --label compiled-$D --model-dir /tmp/kmodel --g2p-table $C/stage/g2p-table.json --out /tmp/lad6s/parity-$D.json \
    --batch-sizes 64 --parity $( [ $D = float32 ] && echo --profile 1,64 ) 2>&1 | grep "gpu-bench:" | tee -a $OUT/c2.log
done
tar czf $OUT/lad-c2.tgz -C /tmp --exclude='server-*.log' lad6s
