#!/bin/bash
# Call A: wheels into /tmp/site, weight parts 1-2 into /tmp/stage (both outlive the call while the machine is warm).
set -u
A=.gpuwork/a
date -u; nproc; free -g | head -2; uptime
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,utilization.gpu --format=csv
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $A/wheels/*.whl || exit 3
mkdir -p /tmp/stage && cp $A/part1.xz $A/part2.xz /tmp/stage/ && ls -la /tmp/stage
PYTHONPATH=/tmp/site python3 -c "
import sys, torch, aiohttp, numpy, pydantic, locust, gevent, soxr, loguru, onnx
print('py', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '-')
print('aiohttp', aiohttp.__version__, 'numpy', numpy.__version__, 'pydantic', pydantic.VERSION, 'locust', locust.__version__, 'soxr', soxr.__version__, 'onnx', onnx.__version__)
"
