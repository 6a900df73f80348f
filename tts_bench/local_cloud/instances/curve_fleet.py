"""A local cloud of curve instances: the artifacts loaded and paired, and the identity it deploys.

The endpoint carries the ladder's fingerprint (model, instance type, image digest, performance
env), so the program's plan gate deploys a plan of that build's scaling resources as it would
for that build; the plan named (if any) is the only one in the measurements folder the deploy
reads, and the stack's SLO and surge ratio are the plan's. The Model's env says
`TTS_BENCH_INSTANCE_MODEL=curve`, so whatever measures the endpoint knows what it measures.
Every refusal is one line naming the flag.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tts_bench.artifacts.companions import plan_files
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.clock import ServiceClock
from tts_bench.errors import ArtifactError, RefusalError
from tts_bench.local_cloud.control_plane.deploy import Deployment
from tts_bench.local_cloud.instances.curve_instance import (
    INSTANCE_MODEL,
    CurveHost,
    CurveIdentity,
    curve_launcher,
)
from tts_bench.local_cloud.instances.curve_model import CurveModel, StartupTimeline
from tts_bench.local_cloud.instances.fleet import Launch
from tts_bench.local_cloud.settings import REPO_ROOT, CurveInstances
from tts_bench.planning.from_files import source_file
from tts_bench.telemetry import ENV_INSTANCE_MODEL, ENV_RATE_SCALE

_SAGEMAKER_TYPE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")


def _load(path: Path, model: type, flag: str):  # type: ignore[no-untyped-def]
    try:
        return load_artifact(path, model)
    except ArtifactError as exc:
        raise RefusalError(f"{flag}: {exc}") from None


def _same_build(a: Fingerprint | None, b: Fingerprint | None) -> bool:
    return (
        a is not None
        and b is not None
        and (a.model, a.instance_type, a.image_digest, a.performance_env)
        == (b.model, b.instance_type, b.image_digest, b.performance_env)
    )


@dataclass(frozen=True)
class CurveFleet:
    settings: CurveInstances
    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    plan: PlanArtifact | None
    model: CurveModel
    timeline: StartupTimeline
    identity: CurveIdentity

    @property
    def fingerprint(self) -> Fingerprint:
        assert self.qmax.fingerprint is not None  # checked by `load`
        return self.qmax.fingerprint

    @classmethod
    def load(cls, settings: CurveInstances) -> CurveFleet:
        qmax: QmaxArtifact = _load(settings.qmax, QmaxArtifact, "--qmax")
        fp = qmax.fingerprint
        if fp is None:
            raise RefusalError("--qmax: the ladder has no fingerprint; curve instances carry it")
        if not _SAGEMAKER_TYPE.match(fp.instance_type):
            raise RefusalError(
                f"--qmax: its instance type {fp.instance_type} is no SageMaker instance type; "
                "use a ladder measured on an endpoint (or through the local cloud)"
            )
        plan: PlanArtifact | None = None
        if settings.plan is not None:
            plan = _load(settings.plan, PlanArtifact, "--plan")
            if not _same_build(plan.fingerprint, fp):
                raise RefusalError(
                    f"--plan: {settings.plan.name} was made for another build than --qmax "
                    f"{settings.qmax.name} (model, instance type, image digest, performance env)"
                )
        ttotal_path = settings.ttotal
        if ttotal_path is None:
            if plan is None or settings.plan is None:
                raise RefusalError(
                    "--ttotal: curve instances start along a ttotal artifact's stages; pass "
                    "--ttotal T (or a --plan that names one)"
                )
            ttotal_path = source_file(plan, settings.plan, "ttotal", "--ttotal", (REPO_ROOT,))
        ttotal: TtotalArtifact = _load(ttotal_path, TtotalArtifact, "--ttotal")
        if not _same_build(ttotal.fingerprint, fp):
            raise RefusalError(
                f"--ttotal: {ttotal_path.name} was measured on another build than --qmax "
                f"{settings.qmax.name}"
            )
        model = CurveModel.from_qmax(qmax, settings.rate_scale, settings.service)
        identity = CurveIdentity(
            fp.model, fp.instance_type, fp.image_digest, fp.performance_env, settings.rate_scale
        )
        return cls(
            settings, qmax, ttotal, plan, model, StartupTimeline.from_ttotal(ttotal), identity
        )

    def plans_dir(self, folder: Path) -> Path:
        """A measurements folder holding only the plan and what it was made from, so the gate
        re-derives it there (empty without one: no scaling)."""
        plans = folder / "measurements"
        plans.mkdir(parents=True, exist_ok=True)
        if self.settings.plan is not None and self.plan is not None:
            for part in plan_files(self.settings.plan, self.plan):
                shutil.copyfile(part, plans / part.name)
        return plans

    def stack_overrides(self) -> dict[str, object]:
        fp = self.fingerprint
        overrides: dict[str, object] = {
            "model": fp.model,
            "instanceType": fp.instance_type,
            "performanceEnv": dict(fp.performance_env),
        }
        if self.plan is not None:
            overrides["sloMs"] = self.plan.inputs.slo_ms
            overrides["surgeRatio"] = self.plan.inputs.surge_ratio
            overrides["planRule"] = self.plan.rule  # the gate deploys the plan of the stack's rule
        return overrides

    def mark(self, deployment: Deployment) -> Deployment:
        """The Model's env says what serves it, and how much slower than the ladder."""
        container = dict(deployment.model["PrimaryContainer"])
        container["Environment"] = {
            **container["Environment"],
            ENV_INSTANCE_MODEL: INSTANCE_MODEL,
            ENV_RATE_SCALE: f"{self.settings.rate_scale:g}",
        }
        return replace(deployment, model={**deployment.model, "PrimaryContainer": container})

    def provisioning_wall_s(self, clock: ServiceClock) -> float:
        return clock.wall_seconds(self.timeline.provisioning_s)

    def launcher(self, host: CurveHost, clock: ServiceClock) -> Launch:
        seeds = np.random.SeedSequence(self.settings.seed)
        return curve_launcher(host, self.model, self.identity, self.timeline, clock, seeds)
