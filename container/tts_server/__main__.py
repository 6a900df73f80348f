"""`python -m tts_server [serve] [--backend B] [--model-dir DIR] [--host H] [--port P] [--serial]`.

The listening socket is opened before anything heavy is imported, so connections are
accepted (the kernel completes them) within a few tens of milliseconds of start; aiohttp takes
them over half a second later and answers `/ping` 503 while the weights load in the
background. A `listening` line gives the bound port (useful with `--port 0`). On SIGTERM or
SIGINT the server drains: `/ping` 503, no new work, in-flight work finishes, what still runs
at the drain deadline ends with an error event, and the process exits before SageMaker's
SIGKILL at 30 s.
"""

from __future__ import annotations

import time

_STARTED = time.time()  # before any other import: when the container process began

import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import TYPE_CHECKING, NoReturn  # noqa: E402

from tts_server.flags import DEFAULT_HOST, DEFAULT_PORT, parse_serve_argv  # noqa: E402
from tts_server.logs import ServerLog, install_json_logging  # noqa: E402

if TYPE_CHECKING:
    from tts_server.settings import ServerSettings


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket: from here on connections queue in the kernel."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one line for a port in use, a host that does not resolve, or no permission."""
    return f"cannot listen on {host}:{port} ({exc}); pick another --port or --host"


async def serve(settings: ServerSettings, log: ServerLog, sock: socket.socket | None = None) -> int:
    """Run until SIGTERM/SIGINT (exit 0 after draining) or until the engine fails to load (1)."""
    import asyncio
    import signal

    from aiohttp import web

    from tts_server.app import GATE, STATE, create_app, drain
    from tts_server.slow_clients import HeaderDeadlineRunner

    app = create_app(settings, log=log)
    runner = HeaderDeadlineRunner(
        app,
        header_read_deadline_s=settings.header_read_deadline_s,
        server_log=log,
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site: web.BaseSite
    if sock is not None:
        site = web.SockSite(runner, sock, shutdown_timeout=1.0)
    else:
        site = web.TCPSite(runner, settings.host, settings.port, shutdown_timeout=1.0)
    await site.start()
    host, port = runner.addresses[0][:2]
    log.event("listening", host=host, port=port, queue_max_depth=settings.max_queue_depth)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signalled_at: list[float] = []

    def on_signal(signum: int) -> None:
        if not signalled_at:
            signalled_at.append(loop.time())
            log.event("signal", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    failed = app[STATE].failed
    waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(stop.wait())]
    if failed is not None:
        waiters.append(asyncio.ensure_future(failed))
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()

    code = 0
    if stop.is_set():
        await drain(app)
    else:
        code = 1
    # Whatever is left of the exit deadline bounds the clean-up (engine close, sockets).
    remaining = settings.exit_deadline_s - (loop.time() - signalled_at[0]) if signalled_at else 5.0
    try:
        async with asyncio.timeout(max(0.5, remaining)):
            await runner.cleanup()
    except TimeoutError:
        log.event("cleanup_timeout", level="warning", in_flight=app[GATE].in_flight)
    log.event("exit", code=code)
    return code


def run(settings: ServerSettings, log: ServerLog, sock: socket.socket | None = None) -> NoReturn:
    """Serve in the foreground, then leave at once: worker threads still finishing a forward
    pass must not hold the process past SageMaker's SIGKILL, and the engine is closed by then.
    What the libraries put in TMPDIR meanwhile goes to a folder of this run, removed on the way
    out (`engine.run_folder`: leaving by `os._exit` skips their own clean-up)."""
    import asyncio

    from tts_server.engine.run_folder import run_in_own_folder

    def serve_until_stopped() -> int:
        # Not asyncio.run: its shutdown waits for every executor thread, which a forward pass
        # for a cancelled request may hold for many seconds.
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(serve(settings, log, sock))

    run_in_own_folder(serve_until_stopped)


def main(argv: Sequence[str] | None = None) -> int:
    log = ServerLog()
    log.marker("container_started", ts=_STARTED, pid=os.getpid())
    args = parse_serve_argv(argv, prog="python -m tts_server")
    host, port = args.host or DEFAULT_HOST, DEFAULT_PORT if args.port is None else args.port
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        log.event("listen_failed", level="error", host=host, port=port, error=str(exc))
        print(f"tts_server: {cannot_listen(host, port, exc)}", file=sys.stderr)
        return 1
    log.event("accepting", host=host, port=sock.getsockname()[1])

    from tts_bench.errors import TtsBenchError
    from tts_server.settings import settings_from_args

    install_json_logging()
    try:
        settings = settings_from_args(args, os.environ)
    except TtsBenchError as exc:
        log.event("bad_settings", level="error", error=str(exc))
        print(f"tts_server: {exc}", file=sys.stderr)
        return 2
    return run(settings, log, sock)


if __name__ == "__main__":
    sys.exit(main())
