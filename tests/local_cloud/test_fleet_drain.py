"""A drain takes the instance out of routing before its server stops admitting (issue 40's soak:
one request in 3,700 was routed in the instant a curve instance began to drain and was refused
with 503 `draining`, a 424 "Received server error (503)" to the client).

The fleet alone, with a server that records what reaches it; no process starts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.local_cloud.idle_server import IdleServer
from tts_bench.local_cloud.errors import NoInstanceError
from tts_bench.local_cloud.instances.fleet import GONE_KEPT, Fleet, Instance, InstanceState


class Server(IdleServer):
    """An instance server that admits until it is asked to stop, as the container does."""

    def answer(self) -> int:
        """What a request arriving now gets: 200, or 503 `draining` once stopping."""
        return 503 if self.stopped.is_set() else 200


class Shipper:
    def open_stream(self, endpoint_name: str, stream: str) -> None:
        pass

    def ship(self, endpoint_name: str, stream: str, line: str) -> None:
        pass


def fleet_of_one(routed_wait_s: float) -> tuple[Fleet, Instance, Server]:
    server = Server()

    def launch(env: dict[str, str], log_path: Path | None, on_line: Any) -> Server:
        return server

    fleet = Fleet(
        "e", "v", Shipper(), [], {}, say=lambda _line: None, on_change=lambda: None,
        launch=launch, routed_wait_s=routed_wait_s,
    )  # fmt: skip
    instance = fleet.spawn({}, 1, 0.0, 5.0)
    until(lambda: instance.state == InstanceState.IN_SERVICE)
    return fleet, instance, server


def until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the fleet did not get there"
        time.sleep(0.01)


def test_a_request_routed_before_the_drain_is_served_then_the_server_stops() -> None:
    fleet, instance, server = fleet_of_one(routed_wait_s=60.0)
    routed = fleet.acquire()  # the router picked it; the request is still on its way
    fleet.drain(routed)
    with pytest.raises(NoInstanceError):
        fleet.pick()  # out of routing at once
    # The drain's thread has had its chance to run: the server must still admit.
    assert not server.stopped.wait(0.5)
    assert server.answer() == 200
    fleet.release(routed)
    until(lambda: instance.state == InstanceState.STOPPED)
    assert instance.exit_code == 0


def test_a_request_that_never_ends_holds_the_drain_only_its_deadline() -> None:
    fleet, instance, _server = fleet_of_one(routed_wait_s=0.3)
    fleet.acquire()  # never released: a stream its client keeps open
    fleet.drain(instance)
    until(lambda: instance.state == InstanceState.STOPPED)  # stopped with it still in flight
    assert instance.in_flight == 1


def test_a_fleet_that_scales_out_and_in_all_day_holds_only_its_live_servers() -> None:
    """Issue 40's soak: the curve cloud's memory grew with every instance it had ever started,
    each stopped one still holding its server (a curve server's queue and its random draws)."""
    servers: list[Server] = []

    def launch(env: dict[str, str], log_path: Path | None, on_line: Any) -> Server:
        servers.append(Server())
        return servers[-1]

    fleet = Fleet(
        "e", "v", Shipper(), [], {}, say=lambda _line: None, on_change=lambda: None,
        launch=launch, routed_wait_s=0.0,
    )  # fmt: skip
    started = [fleet.spawn({}, 1, 0.0, 5.0) for _ in range(GONE_KEPT + 40)]
    until(lambda: all(i.state == InstanceState.IN_SERVICE for i in started))
    for instance in started[:-1]:  # scale in to one
        fleet.drain(instance)
    until(lambda: all(i.state == InstanceState.STOPPED for i in started[:-1]))
    assert all(i.server is None for i in started[:-1])  # nothing of a stopped server is held
    # each instance launches on its own thread, so the live one's server is whichever it got
    assert started[-1].server is not None
    assert any(started[-1].server is s for s in servers)
    kept = fleet.instances()
    assert len(kept) == GONE_KEPT + 1  # the newest stopped records and the live one
    assert started[-1] in kept and started[0] not in kept
    assert fleet.pick() is started[-1]
