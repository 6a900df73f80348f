"""Local T_total: how long a fresh server process takes from spawn to its first served request.

The local stand-in for SageMaker's scale-out (SPEC §4, §8). While a probe holds load on the
running server (so the new process starts on a busy machine, as a new instance starts while
the fleet is loaded), start a fresh `python -m tts_server` and time each stage from its own
source: our spawn call, the server's start-up markers (its JSON log), and the first request it
serves. The artifact (trigger `local-process`) carries the local qmax artifact's fingerprint,
after checking that both the running and the fresh server report that same build.

Stages: `load_applied -> process_spawned` (probe warm-up, recorded, not counted),
`process_spawned -> <first marker>`, one per pair of consecutive markers, and
`ready -> first_request_served`. The measured total runs from the spawn to the first served
request; planned T_total adds the policy detection lag bound, which a local process does not
have but the deployed policy will (60 s by default, SPEC §4).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import Trigger, TtotalArtifact, TtotalEvents
from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ttotal.probe import REQUEST_TIMEOUT_S, Probe, TtotalError, speak
from tts_bench.measure.ttotal.stages import measured_total_s, recorded_events, stages_from_events
from tts_bench.serving.local_server import LocalServer
from tts_bench.serving.server_ping import fetch_ping
from tts_bench.telemetry import STARTUP_MARKERS

DEFAULT_PROBE_CONCURRENCY = 2
SPAWNED = "process_spawned"
SERVED = "first_request_served"
LOCAL_SKEW_S = 0.001  # one clock: the server's markers and ours are this machine's


def startup_events(
    load_applied: float, spawned: float, markers: dict[str, float], served: float
) -> TtotalEvents:
    """From the spawn through the markers the server logged to the first served request."""
    points = [(SPAWNED, spawned)]
    points += [(name, markers[name]) for name in STARTUP_MARKERS if name in markers]
    points.append((SERVED, served))
    return recorded_events(load_applied, points, LOCAL_SKEW_S)


@dataclass(frozen=True, slots=True)
class LocalTtotalRequest:
    qmax_path: Path
    host: str  # the running server the probe loads
    utterances: Sequence[Utterance]
    server_args: Sequence[str] = ()  # flags for the fresh `python -m tts_server`
    probe_concurrency: int = DEFAULT_PROBE_CONCURRENCY
    policy_lag_bound_s: float = DEFAULT_POLICY_LAG_BOUND_S
    ready_timeout_s: float = 600.0
    server_env: dict[str, str] | None = None
    log_path: Path | None = None


def local_qmax(path: Path) -> tuple[QmaxArtifact, Fingerprint]:
    """The ladder and its fingerprint, refused unless it was measured on a local transport."""
    qmax = load_artifact(path, QmaxArtifact)
    if qmax.fingerprint is None or not qmax.fingerprint.transport.is_local:
        raise RefusalError(
            f"{path}: local T_total needs a local ladder (transport local-http or local-ws); "
            "for a SageMaker ladder use `tts-bench ttotal --endpoint NAME`"
        )
    return qmax, qmax.fingerprint


def measure_local_ttotal(
    request: LocalTtotalRequest, progress: Callable[[str], None]
) -> TtotalArtifact:
    _, fingerprint = local_qmax(request.qmax_path)
    running = fetch_ping(request.host)
    if not running.ready:
        raise RefusalError(f"{request.host}/ping says {running.status!r}: wait until it is ready")
    differences = running.fingerprint(fingerprint.transport).differences(fingerprint)
    if differences:
        raise RefusalError(
            f"the running server is not the build {request.qmax_path} measured "
            f"({'; '.join(differences)}); measure its ladder first"
        )

    progress(f"probe: {request.probe_concurrency} closed-loop users on {request.host}")
    speaker = functools.partial(speak, request.host)
    probe = Probe(speaker, request.utterances, request.probe_concurrency)
    load_applied = time.time()
    probe.start()
    fresh = LocalServer(request.server_args, env=request.server_env, log_path=request.log_path)
    try:
        probe.wait_warm(timeout_s=REQUEST_TIMEOUT_S)
        progress("probe warm; spawning a fresh server process")
        fresh.start()
        spawned = fresh.spawned_at or time.time()
        ping = fresh.wait_ready(request.ready_timeout_s, progress)
        progress(
            f"fresh server ready after {time.time() - spawned:.1f} s; sending its first request"
        )
        first = speak(fresh.url, request.utterances[0])
        if not first.ok:
            raise TtotalError(f"the fresh server's first request failed: {first.detail}")
        markers = fresh.markers()
    finally:
        probe.stop()
        fresh.stop()

    fresh_fp = ping.fingerprint(fingerprint.transport)
    if fresh_fp != fingerprint:
        raise RefusalError(
            "the fresh server reports another build than the ladder measured "
            f"({'; '.join(fresh_fp.differences(fingerprint))}); start it with the same flags"
        )
    events = startup_events(load_applied, spawned, markers, first.end)
    stages = stages_from_events(events)
    missing = [m for m in STARTUP_MARKERS if m not in markers]
    measured_total = measured_total_s(stages)
    notes = [probe.summary(spawned, " on the running server during the start-up")]
    if missing:
        notes.append(f"markers not logged: {', '.join(missing)}")
    return TtotalArtifact(
        fingerprint=fingerprint,
        trigger=Trigger.LOCAL_PROCESS,
        stages=stages,
        measured_total_s=measured_total,
        policy_lag_bound_s=request.policy_lag_bound_s,
        planned_total_s=measured_total + request.policy_lag_bound_s,
        recovery_rule="the fresh process serves its first request completely (a done event)",
        qmax_sha256=sha256_file(request.qmax_path),
        provenance=Provenance.now(
            "measured",
            " ".join(["fresh `python -m tts_server", *request.server_args])
            + f"` beside {request.host}",
            command=" ".join(["tts-bench", *sys.argv[1:]]) if sys.argv else None,
            notes="; ".join(notes),
        ),
        events=events,
    )
