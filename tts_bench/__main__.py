import sys

from tts_bench.cli import main

sys.exit(main())
