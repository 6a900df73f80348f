#!/bin/bash
# Run 5: the serving path, run-4 code (main) vs this branch, one machine, back to back.
# Layout it ran from (carried, since removed): .gpuwork/serve5/{main,new}/container/tts_server (main at d742d4b,
# this branch at 6b5be2c), serving_path_bench.py of 6b5be2c, wheels/ = pydantic 2.14.4 and its four
# needs from .whl/a. Stopped by the 540 s limit during the uvloop step.
set -u
B=.gpuwork/serve5
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/*.whl || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -c "import aiohttp, pydantic, numpy, sys; print('py', sys.version.split()[0], 'aiohttp', aiohttp.__version__, 'pydantic', pydantic.VERSION, 'numpy', numpy.__version__)"
nproc; nproc >> $OUT/run5.log
bench() {  # name, code, extra args
  name=$1; code=$2; shift 2
  echo "=== $name"
  PYTHONPATH=/tmp/site:.:$B/$code/container python3 $B/serving_path_bench.py --seconds 8 \
    --concurrency 16,64,256,512 --clients 8 --out $OUT/serving-path-$name.json "$@" \
    > /tmp/stdout-$name.log 2> >(grep serving-path: | tee -a $OUT/run5.log >&2)
  sed -n '/^Serving path/,$p' /tmp/stdout-$name.log | tee -a $OUT/run5.log
}
bench run4-code main
bench new-code new
bench run4-code-again main
bench new-code-again new
bench new-code-uvloop new --event-loop uvloop
