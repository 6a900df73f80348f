#!/bin/bash
# Run 8, call A: the wheels into /tmp/site and weight parts 1-2 into /tmp/stage. Both outlive the
# call while the machine stays warm (30 s after a call): call B must follow at once.
# carry: [".gpu-stage/a"]
set -u
A=${STAGE:-.gpu-stage}/a  # STAGE: where scripts/gpu-stage wrote (default .gpu-stage)
date -u; nproc; free -g | head -2
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,utilization.gpu --format=csv
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $A/wheels/*.whl || exit 3
mkdir -p /tmp/stage && cp $A/part1.xz $A/part2.xz /tmp/stage/ && ls -la /tmp/stage
PYTHONPATH=/tmp/site:$PWD:$PWD/container python3 -c "
import sys, torch, triton, aiohttp, numpy, pydantic, locust, gevent, soxr, loguru, onnx, websocket
print('py', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name())
print('aiohttp', aiohttp.__version__, 'numpy', numpy.__version__, 'pydantic', pydantic.VERSION, 'locust', locust.__version__, 'soxr', soxr.__version__, 'onnx', onnx.__version__)
" 2>&1 | tee $OUT/a.log
