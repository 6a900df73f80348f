"""A local stand-in for `pulumi preview --policy-pack policies` (SPEC §8).

Two processes, as the Pulumi CLI would run them: the program runs under Pulumi's mocks in one
(`preview_recorder`), recording every resource it registers; the policy pack runs in another,
started the way the CLI starts a Python pack (`python -m pulumi.policy <engine> <pack dir>`),
serving pulumi-policy's own analyzer over gRPC on loopback. Each recorded resource is sent to
`Analyze`, the whole set to `AnalyzeStack`; the answers are the pack's own diagnostics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tts_bench.errors import TtsBenchError
from tts_bench.infra.preview_recorder import STACK_TYPE, RecordedResource, Recording

PACK_START_TIMEOUT_S = 60
PROGRAM_TIMEOUT_S = 300
RPC_TIMEOUT_S = 120  # one analyzer call; a hung pack must not hang the preview
LEVELS = ("advisory", "mandatory", "remediate", "disabled")


class PreviewError(TtsBenchError):
    """The program or the policy pack could not be run."""


class Diagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str
    level: str
    message: str
    urn: str = ""


class PolicyOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    level: str
    description: str
    diagnostics: list[Diagnostic] = Field(default_factory=list)

    @property
    def verdict(self) -> str:
        if any(d.level == "mandatory" for d in self.diagnostics):
            return "FAIL"
        return "WARN" if self.diagnostics else "pass"


class PreviewResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recording: Recording
    pack: str
    policies: list[PolicyOutcome]

    @property
    def mandatory_violations(self) -> list[Diagnostic]:
        return [d for p in self.policies for d in p.diagnostics if d.level == "mandatory"]


def record(program_dir: Path, stack: str, *, preview: bool = True) -> Recording:
    """Run the program in a fresh process under mocks and return what it registered."""
    if not (program_dir / "__main__.py").is_file():
        raise PreviewError(
            f"{program_dir}: no __main__.py; pass --program <Pulumi Python program folder>"
        )
    with tempfile.TemporaryDirectory(prefix="tts-bench-preview-") as tmp:
        out = Path(tmp) / "recording.json"
        command = [
            sys.executable,
            "-m",
            "tts_bench.infra.preview_recorder",
            str(program_dir),
            "--stack",
            stack,
            "--out",
            str(out),
        ]
        if not preview:
            command.append("--no-preview")
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S, env=_child_env()
        )
        if done.returncode != 0 or not out.exists():
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise PreviewError(f"the program could not be run under mocks: {last}")
        recording = Recording.model_validate_json(out.read_text(encoding="utf-8"))
    if recording.error:
        raise PreviewError(f"the program failed: {recording.error.strip()}")
    return recording


def evaluate_pack(
    pack_dir: Path, recording: Recording, policy_config: dict[str, Any] | None = None
) -> tuple[str, list[PolicyOutcome]]:
    """Serve the pack and run its analyzer over the recorded resources."""
    import grpc

    try:
        return _analyze(pack_dir, recording, policy_config or {})
    except grpc.RpcError as exc:
        details = exc.details() if hasattr(exc, "details") else str(exc)
        raise PreviewError(f"the policy pack {pack_dir} failed: {details}") from None


def _analyze(
    pack_dir: Path, recording: Recording, policy_config: dict[str, Any]
) -> tuple[str, list[PolicyOutcome]]:
    import grpc
    from google.protobuf import empty_pb2, json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

    def struct(props: dict[str, Any]) -> struct_pb2.Struct:
        return json_format.ParseDict(props, struct_pb2.Struct())

    with _served_pack(pack_dir) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = analyzer_pb2_grpc.AnalyzerStub(channel)
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=RPC_TIMEOUT_S)
        outcomes = {
            p.name: PolicyOutcome(
                name=p.name, level=LEVELS[p.enforcementLevel], description=p.description
            )
            for p in info.policies
        }
        stub.Configure(
            _configure_request(analyzer_pb2, outcomes, policy_config, struct),
            timeout=RPC_TIMEOUT_S,
        )
        stub.ConfigureStack(
            analyzer_pb2.AnalyzerStackConfigureRequest(
                stack=recording.stack, project=recording.project, dry_run=recording.preview
            ),
            timeout=RPC_TIMEOUT_S,
        )
        responses = _analyze_resources(stub, analyzer_pb2, recording, struct)
    _collect_diagnostics(responses, outcomes)
    return info.name, list(outcomes.values())


def _analyze_resources(
    stub: Any, analyzer_pb2: Any, recording: Recording, struct: Any
) -> list[Any]:
    """Each custom resource through Analyze, then the whole stack through AnalyzeStack."""

    def options(resource: RecordedResource) -> Any:
        return analyzer_pb2.AnalyzerResourceOptions(
            protect=resource.protect, parent=resource.parent or ""
        )

    responses = [
        stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=r.type,
                properties=struct(r.properties),
                urn=r.urn,
                name=r.name,
                options=options(r),
            ),
            timeout=RPC_TIMEOUT_S,
        )
        for r in recording.resources
        if r.custom
    ]
    stack_resources = [
        analyzer_pb2.AnalyzerResource(
            type=r.type,
            properties=struct(r.properties),
            urn=r.urn,
            name=r.name,
            options=options(r),
            parent=r.parent or "",
            dependencies=r.dependencies,
            propertyDependencies={
                k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v)
                for k, v in r.property_dependencies.items()
            },
        )
        for r in recording.resources
    ]
    responses.append(
        stub.AnalyzeStack(
            analyzer_pb2.AnalyzeStackRequest(resources=stack_resources), timeout=RPC_TIMEOUT_S
        )
    )
    return responses


def _collect_diagnostics(responses: list[Any], outcomes: dict[str, PolicyOutcome]) -> None:
    """Every diagnostic under its policy's outcome (a policy the pack did not list gets one)."""
    for response in responses:
        for d in response.diagnostics:
            outcome = outcomes.setdefault(
                d.policyName, PolicyOutcome(name=d.policyName, level="?", description=d.description)
            )
            message = d.message.removeprefix(d.description).strip() or d.message
            outcome.diagnostics.append(
                Diagnostic(
                    policy=d.policyName,
                    level=LEVELS[d.enforcementLevel],
                    message=message,
                    urn=d.urn,
                )
            )


def run_preview(
    program_dir: Path, stack: str, pack_dir: Path, policy_config: dict[str, Any] | None = None
) -> PreviewResult:
    recording = record(program_dir, stack)
    pack, outcomes = evaluate_pack(pack_dir, recording, policy_config)
    return PreviewResult(recording=recording, pack=pack, policies=outcomes)


# --------------------------------------------------------------------------- rendering


def render_tree(recording: Recording) -> list[str]:
    """The resources as the engine would show them: indented under their parents."""
    children: dict[str | None, list[RecordedResource]] = {}
    urns = {r.urn for r in recording.resources}
    for resource in recording.resources:
        parent = resource.parent if resource.parent in urns else None
        children.setdefault(parent, []).append(resource)
    lines = [f"{STACK_TYPE}  {recording.project}-{recording.stack}"]

    def walk(parent: str | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for index, resource in enumerate(kids):
            last = index == len(kids) - 1
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{resource.type}  {resource.name}")
            walk(resource.urn, prefix + ("   " if last else "│  "))

    walk(None, "")
    return lines


def render(result: PreviewResult) -> list[str]:
    lines = [
        "Resources (recorded under mocks):",
        *("  " + line for line in render_tree(result.recording)),
    ]
    said = [log for log in result.recording.logs if log.level in ("info", "warning", "error")]
    if said:
        lines.append("Program diagnostics:")
        lines += [f"  {log.level}: {log.message}" for log in said]
    names = {r.urn: f"{r.type}  {r.name}" for r in result.recording.resources}
    lines.append(f"Policy pack {result.pack}:")
    for outcome in result.policies:
        lines.append(f"  [{outcome.verdict}] {outcome.name} ({outcome.level})")
        for d in outcome.diagnostics:
            where = f" [{names.get(d.urn, d.urn)}]" if d.urn else ""
            lines.append(f"      {d.level}:{where} {d.message}")
    count = len(result.mandatory_violations)
    lines.append(
        f"{count} mandatory policy violation(s): the deployment would be blocked"
        if count
        else "No mandatory policy violations."
    )
    return lines


# --------------------------------------------------------------------------- plumbing


def _configure_request(
    analyzer_pb2: Any, outcomes: dict[str, PolicyOutcome], config: dict[str, Any], struct: Any
) -> Any:
    """Pulumi's policy-pack config format: `{"policy": "mandatory" | {"enforcementLevel": …, …}}`.
    Every policy is sent with its level, as the engine does, since an omitted level reads as advisory."""
    unknown = sorted(set(config) - set(outcomes) - {"all"})
    if unknown:
        raise PreviewError(f"policy config names unknown policies: {', '.join(unknown)}")
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    default_level = config.get("all")
    for name, outcome in outcomes.items():
        entry = config.get(name, {})
        if isinstance(entry, str):
            entry = {"enforcementLevel": entry}
        level = entry.get("enforcementLevel", default_level or outcome.level)
        if level not in LEVELS:
            raise PreviewError(
                f"policy config: {name}: enforcement level {level!r} is not one of {LEVELS}"
            )
        outcome.level = level
        properties = {k: v for k, v in entry.items() if k != "enforcementLevel"}
        request.policyConfig[name].CopyFrom(
            analyzer_pb2.PolicyConfig(
                enforcementLevel=LEVELS.index(level), properties=struct(properties)
            )
        )
    return request


@contextmanager
def _served_pack(pack_dir: Path) -> Iterator[int]:
    """Start the pack as the Pulumi CLI does and yield its gRPC port; stop it afterwards."""
    if not (pack_dir / "PulumiPolicy.yaml").is_file():
        raise PreviewError(f"{pack_dir}: no PulumiPolicy.yaml; pass --policy-pack <pack folder>")
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(pack_dir)],
        cwd=pack_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.strip().isdigit():
            process.kill()
            _, err = process.communicate(timeout=PACK_START_TIMEOUT_S)
            last = (err.strip().splitlines() or [line.strip() or "(no output)"])[-1]
            raise PreviewError(f"the policy pack {pack_dir} did not start: {last}")
        yield int(line)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()


def _child_env() -> dict[str, str]:
    """Children import the same `tts_bench` as this process (a checkout may shadow an install)."""
    import tts_bench

    env = dict(os.environ)
    here = str(Path(tts_bench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def dump(result: PreviewResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2)
