"""`tts-bench serve`: run the serving container's server in the foreground (SPEC §3).

The same server and flags as `python -m tts_server`; `MAX_QUEUE_DEPTH` in the environment
bounds admission (unset = unbounded, as Q_max is measured).
"""

from __future__ import annotations

import argparse
import os

from tts_bench.errors import TtsBenchError


def register(subparsers: argparse._SubParsersAction) -> None:
    from tts_server.flags import add_serve_arguments  # argparse only

    parser = subparsers.add_parser(
        "serve",
        description="Serve Kokoro-82M with the SageMaker contract: /ping, /invocations, "
        "/invocations-bidirectional-stream. MAX_QUEUE_DEPTH bounds admission.",
    )
    add_serve_arguments(parser)
    parser.set_defaults(handler=handle)


class ListenError(TtsBenchError):
    """The server cannot listen where it was asked to (port in use, unknown host)."""


def handle(args: argparse.Namespace) -> int:
    from tts_server.__main__ import cannot_listen, listening_socket, run
    from tts_server.logs import ServerLog, install_json_logging
    from tts_server.settings import settings_from_args

    settings = settings_from_args(args, os.environ)  # SettingsError is a TtsBenchError
    # Bind before logging starts, as `python -m tts_server` does: a busy port or a host that
    # does not resolve is one line, not a traceback from inside the event loop.
    try:
        sock = listening_socket(settings.host, settings.port)
    except OSError as exc:
        raise ListenError(cannot_listen(settings.host, settings.port, exc)) from None
    install_json_logging()
    log = ServerLog()
    log.marker("container_started", pid=os.getpid())
    return run(settings, log, sock)
