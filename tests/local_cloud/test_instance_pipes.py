"""An instance process's output pipe is closed once read to its end (issue 40's soak: the process
cloud kept one descriptor for every instance it ever ran, +1 per scale-out/in cycle, because the
fleet keeps its stopped instances and each held its pipe until collected).

`python -m tts_server --help` as the instance: it prints and exits at once, no engine loads.
"""

from __future__ import annotations

import os

from tts_bench.serving.local_server import LocalServer


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_servers_that_ran_and_exited_hold_no_descriptor() -> None:
    env = {**os.environ}
    kept: list[LocalServer] = []  # referenced, as the fleet references its stopped instances
    before = open_fds()
    for _ in range(5):
        server = LocalServer(["--help"], env=env, on_line=lambda _line: None).start()
        assert server.process is not None
        server.process.wait(timeout=30)
        assert server._reader is not None
        server._reader.join(timeout=30)  # the output read to its end
        kept.append(server)
    assert open_fds() <= before
