"""A measurement stand-in for test_freeze: freeze scaling, say `frozen`, wait for a signal.

Usage: python freeze_child.py ENDPOINT. AWS settings come from the environment.
"""

from __future__ import annotations

import sys
import time

from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession


def main(endpoint: str) -> int:
    session = AwsSession.from_environment()
    try:
        with frozen_scaling(session, endpoint):
            print("frozen", flush=True)
            time.sleep(120)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
