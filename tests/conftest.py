"""Fixtures every test folder may use: where the repository and its reference artifacts are,
the real servers that tests share for the whole session (see docs/testing.md), and the session's
headless Chromium.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chromium import Browser, Page, why_no_browser
from tests.servers import ServerProcess

# The suite's workers share the machine's cores, so every engine it starts (servers, local
# cloud instances, the main job's) runs on one: two engines' intra-op threads then never spin
# against each other (two engines at once: 0.70 x the CPU seconds; measurements/lab/
# test-time.md, "One core per engine", has the clean clones with and without it).
os.environ.setdefault("ENGINE_CORES", "1")
# Tests that run the model directly, not through a backend (which sets its threads from
# ENGINE_CORES), would otherwise get torch's default of one thread per core: beside two busy
# processes a forward pass then took 14 s against 3 s on one thread (measurements/lab/
# test-time.md, "One thread per in-process model").
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
MEASUREMENTS = REPO / "measurements"
REFERENCE_QMAX = MEASUREMENTS / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
REFERENCE_TTOTAL = MEASUREMENTS / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
REFERENCE_PLAN = MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def reference_qmax_path() -> Path:
    return REFERENCE_QMAX


@pytest.fixture(scope="session")
def reference_ttotal_path() -> Path:
    return REFERENCE_TTOTAL


@pytest.fixture(scope="session")
def reference_plan_path() -> Path:
    return REFERENCE_PLAN


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One unbounded server with default settings (onnx, the offline weights), ready, for the
    whole session: the server tests' requests, the real ladders, the fuzzing. Use it only to
    send requests; a test that needs other settings, a drain or a kill starts its own. A test
    that reads the log for what it caused reads from `server.mark()` taken before."""
    process = ServerProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the session (skips, saying why, where none is installed)."""
    if (reason := why_no_browser()) is not None:
        pytest.skip(reason)
    with Browser(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


@pytest.fixture
def browser_page(chromium: Browser) -> Iterator[Page]:
    """A fresh tab of the session's Chromium, closed after the test."""
    page = chromium.new_page()
    yield page
    page.close()


# --------------------------------------------------------------------------- scheduling
# pytest-xdist runs three workers on this 2-core machine (pyproject's addopts): much of the
# suite waits (holds, start-ups, cooldowns), and with two the cores were busy 1.37 of 2 on
# average (a clean clone: 10 min 13 s with two, 8 min 21 s with three). A worker builds a
# session fixture the first time one of its tests asks, so tests that share a costly one run on
# one worker: the ladders against curve instances (about 50 s of holds, little CPU) and the
# engines; every other test stays with its module (its module-scoped servers and clouds are built once,
# its tests keep their order). The groups go by module path because the scheduler sees only
# test ids (pytest 9 ignores the id suffix xdist's own `loadgroup` relies on); `_ORDER` sends
# them out.
LADDER_MODULES = frozenset(
    f"tests/ladder/{name}.py"
    for name in ("test_live_refine", "test_live_hold", "test_live_ladder", "test_web_ui")
)
LADDER_FIXTURES = frozenset({"refined_curve_ladder", "curve_ladder"})
_LADDERS = "curve-ladders"
# The local clouds whose clocks run 30–50 times faster than the wall clock: a busy tenth of a
# second is seconds of their time, so they are one group, run one after another.
COMPRESSED_CLOCK_MODULES = frozenset(
    f"tests/local_cloud/{name}.py"
    for name in (
        "test_curve_cloud",
        "test_rehearse_cloud",
        "test_short_rehearsal",
        "test_fleet_hold_cloud",
    )
)
_COMPRESSED = "compressed-clock"
# The groups whose time is mostly sleeps (compressed clouds, ladders of curve instances,
# stand-in containers) go first: the compressed clouds to one worker, the rest to the others,
# so a compressed clock shares the machine with sleeps rather than with CPU-bound groups for
# most of its time (the 12 compressed tests: 37 CPU-seconds in 143 s). The CPU-bound groups
# follow, longest first, so the workers end together. The order is from measured durations
# (the clean clone's junit profile, measurements/lab/test-time.md) and only affects time.
_ORDER = (
    _COMPRESSED,
    _LADDERS,
    "tests/ladder/test_curve_check.py",
    "tests/ladder/test_live_surge.py",
    "tests/local_cloud/test_curve_contract.py",
    "tests/ladder/test_sonic3_standin.py",
    "tests/local_cloud/test_third_contract.py",
    "tests/chain/test_chain_local_cloud.py",
    "tests/ladder/test_local_run.py",
    "tests/engine",
    "tests/local_cloud/test_bidi_local_cloud.py",
    "tests/local_cloud/test_container_command.py",
    "tests/local_cloud/test_data_plane.py",
    # Then the modules of 15 s and more, longest first, so the last to start is a short one.
    "tests/local_cloud/test_cli.py",
    "tests/infra/test_program.py",
    "tests/server/test_server_lifecycle.py",
    "tests/server/test_server_http.py",
    "tests/server/test_server_admission.py",
    "tests/server/test_server_engine_process.py",
    "tests/ladder/test_distributed_ladder.py",
    "tests/server/test_run_folder.py",
    "tests/aws/test_validate.py",
    "tests/core/test_custody.py",
    "tests/infra/test_preview_cli.py",
    "tests/local_cloud/test_bidi_bridge.py",
    "tests/local_cloud/test_fleet.py",
    "tests/local_cloud/test_deploy.py",
    "tests/server/test_server_robustness.py",
)


def scheduling_group(nodeid: str) -> str:
    """The scheduling group of a test id: the ladders' users, the engine tests, else its module."""
    module = nodeid.split("::")[0]
    if module in LADDER_MODULES:
        return _LADDERS
    if module in COMPRESSED_CLOCK_MODULES:
        return _COMPRESSED
    return "tests/engine" if module.startswith("tests/engine/") else module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    strays = sorted(
        {
            item.nodeid.split("::")[0]
            for item in items
            if LADDER_FIXTURES & set(item.fixturenames)
            and scheduling_group(item.nodeid) != _LADDERS
        }
    )
    if strays:  # a new user of a ladder would build it again on the other worker
        raise pytest.UsageError(f"add {', '.join(strays)} to LADDER_MODULES in tests/conftest.py")
    stale = [name for name in _ORDER if name.startswith("tests/") and not (REPO / name).exists()]
    if stale:  # a renamed module would silently lose its place
        raise pytest.UsageError(f"_ORDER in tests/conftest.py names no module: {', '.join(stale)}")
    rank = {name: i for i, name in enumerate(_ORDER)}
    items.sort(key=lambda item: rank.get(scheduling_group(item.nodeid), len(_ORDER)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """Whole groups to a worker, in the order collected (`--no-loadscope-reorder`)."""

        def _split_scope(self, nodeid: str) -> str:
            return scheduling_group(nodeid)

    return GroupScheduling(config, log)
