"""Typed server settings, read once at start from the environment and the command line.

Flags win over the environment; the environment wins over the defaults. Every limit the
server enforces lives here so tests can make the 60 s ceiling or the 25 s drain small.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tts_bench.errors import TtsBenchError
from tts_bench.telemetry import (
    ENV_ENDPOINT_NAME,
    ENV_IMAGE_DIGEST,
    ENV_INSTANCE_TYPE,
    ENV_MAX_QUEUE_DEPTH,
    ENV_VARIANT_NAME,
)
from tts_server.engine.text import MAX_TRANSCRIPT_CHARS
from tts_server.flags import DEFAULT_HOST, DEFAULT_PORT

# Environment variable → settings field. ENGINE_BACKEND / ENGINE_MODE are the same names the
# engine reports in its performance env, so the deployed env and the fingerprint agree.
ENV_FIELDS: dict[str, str] = {
    "ENGINE_BACKEND": "backend",
    "ENGINE_MODE": "mode",
    "MODEL_DIR": "model_dir",
    "ENGINE_DEVICE": "device",
    ENV_MAX_QUEUE_DEPTH: "max_queue_depth",
    "REQUEST_CEILING_S": "request_ceiling_s",
    "DRAIN_DEADLINE_S": "drain_deadline_s",
    "EXIT_DEADLINE_S": "exit_deadline_s",
    "MAX_BODY_BYTES": "max_body_bytes",
    "MAX_TRANSCRIPT_CHARS": "max_transcript_chars",
    "BODY_READ_DEADLINE_S": "body_read_deadline_s",
    "HEADER_READ_DEADLINE_S": "header_read_deadline_s",
    ENV_ENDPOINT_NAME: "endpoint_name",
    ENV_VARIANT_NAME: "variant_name",
    ENV_INSTANCE_TYPE: "instance_type",
    ENV_IMAGE_DIGEST: "image_digest",
}


class SettingsError(TtsBenchError):
    """A server setting from the environment or the command line is invalid."""


class ServerSettings(BaseModel):
    """Everything the server needs to know before it starts; frozen once built."""

    # allow_inf_nan=False: REQUEST_CEILING_S=inf would pass gt=0 and never end a request.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, description="0 picks a free port")
    backend: Literal["onnx", "torch"] = "onnx"
    mode: Literal["concurrent", "serial"] = "concurrent"
    model_dir: Path | None = None
    device: str | None = None
    max_queue_depth: int | None = Field(
        default=None, ge=1, description="in-flight bound (queued + executing); None = unbounded"
    )
    request_ceiling_s: float = Field(
        default=58.0, gt=0, description="SageMaker's 60 s ceiling less a margin, from arrival"
    )
    drain_deadline_s: float = Field(
        default=25.0, ge=0, description="after SIGTERM, streams still running then get an error"
    )
    exit_deadline_s: float = Field(
        default=29.0, gt=0, description="after SIGTERM the process is gone by then (SIGKILL at 30)"
    )
    max_body_bytes: int = Field(default=64 * 1024, ge=256)
    max_transcript_chars: int = Field(
        default=4000,
        ge=1,
        le=MAX_TRANSCRIPT_CHARS,
        description="longer transcripts get 422; the engine's own text limit is the ceiling",
    )
    body_read_deadline_s: float = Field(
        default=10.0,
        gt=0,
        description="a request body must arrive within this; it is read before admission",
    )
    header_read_deadline_s: float = Field(
        default=10.0,
        gt=0,
        description="a connection that began a request must finish its headers within this",
    )
    endpoint_name: str = Field(default="local", min_length=1)
    variant_name: str = Field(default="AllTraffic", min_length=1)
    instance_type: str | None = None
    image_digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")

    @classmethod
    def build(
        cls, environ: Mapping[str, str], overrides: Mapping[str, object] | None = None
    ) -> ServerSettings:
        """Settings from `environ` (see ENV_FIELDS) with `overrides` (flags) on top."""
        values: dict[str, object] = {
            name: environ[var] for var, name in ENV_FIELDS.items() if environ.get(var, "") != ""
        }
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            by_field = {name: var for var, name in ENV_FIELDS.items()}
            problems = "; ".join(
                f"{by_field.get(str(err['loc'][0]), err['loc'][0])}: {err['msg']}"
                for err in exc.errors()
            )
            raise SettingsError(f"invalid server settings ({problems}); fix the value") from None


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerSettings:
    return ServerSettings.build(
        environ,
        {
            "backend": args.backend,
            "model_dir": args.model_dir,
            "host": args.host,
            "port": args.port,
            "mode": "serial" if args.serial else None,
        },
    )
