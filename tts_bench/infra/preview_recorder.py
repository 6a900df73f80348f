"""Run a Pulumi Python program under Pulumi's mocks and record every resource it registers.

This is the engine half of the local preview: no Pulumi CLI, no provider plugins. The program
runs with its stack's config; each `RegisterResource` request is kept as the engine would see
it (type, name, parent, inputs with unknowns as Pulumi's sentinels, dependencies), together with
what the program logged. In preview mode a resource's outputs that are not among its inputs stay
unknown, as they would before the resource exists.

Run in a fresh process (`python -m tts_bench.infra.preview_recorder …`): the Pulumi runtime is global
state, so one program per process.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

STACK_TYPE = "pulumi:pulumi:Stack"


class RecordedResource(BaseModel):
    """One registration as the engine received it."""

    model_config = ConfigDict(extra="forbid")

    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    dependencies: list[str] = Field(default_factory=list)
    property_dependencies: dict[str, list[str]] = Field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool = False


class LogRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: str
    message: str


class Recording(BaseModel):
    """What one program run registered and said."""

    model_config = ConfigDict(extra="forbid")

    project: str
    stack: str
    preview: bool
    resources: list[RecordedResource]
    logs: list[LogRecord]
    error: str | None = None


def record_program(program_dir: Path, stack: str, *, preview: bool) -> Recording:
    """Run `program_dir`'s `__main__.py` under mocks with its stack config (in this process)."""
    import pulumi
    from pulumi.runtime import mocks

    from tts_bench.infra.stack_config import project_name, runtime_config, stack_values

    project = project_name(program_dir)
    config = runtime_config(stack_values(program_dir, stack))
    resources: list[RecordedResource] = []
    logs: list[LogRecord] = []
    echo = _echo_mocks(preview)
    pulumi.runtime.set_all_config(config)
    mocks.set_mocks(
        echo,
        project=project,
        stack=stack,
        preview=preview,
        logger=_collecting_logger(project, logs),
        monitor=_recording_monitor(echo, resources),
    )
    error = _run_program(program_dir)
    return Recording(
        project=project, stack=stack, preview=preview, resources=resources, logs=logs, error=error
    )


def _collecting_logger(project: str, logs: list[LogRecord]) -> logging.Logger:
    """The program's logger, its records kept in `logs` (and not printed)."""

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logs.append(LogRecord(level=record.levelname.lower(), message=record.getMessage()))

    logger = logging.getLogger(f"tts_bench.infra.preview.{project}")
    logger.propagate = False
    logger.setLevel(logging.INFO)  # the SDK's own debug chatter is not the program's
    logger.addHandler(Collect())
    return logger


def _recording_monitor(echo: Any, resources: list[RecordedResource]) -> Any:
    """A mock monitor that records every resource the program registers into `resources`."""
    from google.protobuf import json_format
    from pulumi.runtime import mocks

    class Monitor(mocks.MockMonitor):
        def RegisterResource(self, request: Any) -> Any:
            response = super().RegisterResource(request)
            if request.type != STACK_TYPE:
                resources.append(
                    RecordedResource(
                        urn=response.urn,
                        type=request.type,
                        name=request.name,
                        custom=request.custom,
                        parent=request.parent or None,
                        properties=json_format.MessageToDict(request.object),
                        dependencies=list(request.dependencies),
                        property_dependencies={
                            key: list(deps.urns)
                            for key, deps in request.propertyDependencies.items()
                        },
                        protect=request.protect,
                        retain_on_delete=request.retainOnDelete,
                    )
                )
            return response

    return Monitor(echo)


def _echo_mocks(preview: bool) -> Any:
    """Mocks whose outputs are the inputs; only a full run (not a preview) learns ids and ARNs."""
    from pulumi.runtime import mocks

    class Echo(mocks.Mocks):
        def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
            if preview:
                return None, dict(args.inputs)
            name = args.inputs.get("name", args.name)
            computed = {"arn": f"arn:aws:mock:::{args.typ}/{name}", "id": f"{name}-id"}
            return f"{name}-id", {**computed, **args.inputs}

        def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], None]:
            return {}, None

    return Echo()


def _run_program(program_dir: Path) -> str | None:
    """Run the program's `__main__.py` from its own folder; the error it ended with, if any."""
    import pulumi
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    main = program_dir / "__main__.py"
    sys.path.insert(0, str(program_dir))
    cwd = Path.cwd()
    os.chdir(program_dir)  # Pulumi runs a program from its own folder
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(str(main), run_name="__main__")))
    except pulumi.RunError as exc:
        return str(exc)
    except Exception:  # the program's own bug: keep its traceback for the user
        return traceback.format_exc()
    finally:
        os.chdir(cwd)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program", type=Path)
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--no-preview", action="store_true", help="a full run: outputs known")
    parser.add_argument("--out", type=Path, required=True, help="write the recording here (JSON)")
    args = parser.parse_args(argv)
    recording = record_program(args.program.resolve(), args.stack, preview=not args.no_preview)
    args.out.write_text(recording.model_dump_json(indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
