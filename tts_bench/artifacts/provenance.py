"""What every artifact carries: the schema version and its provenance (how it was made).

`Provenance` says whether a file was measured, is the published reference, was simulated or was
emulated through the local cloud, when and by which command; `kind_fits_fingerprint` is the
rule tying that kind to the fingerprint's transport and instance type.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
)

from tts_bench import __version__
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.strict import StrictModel as _Strict

SCHEMA_VERSION = 1


ProvenanceKind = Literal["measured", "reference", "simulated", "emulated"]


def _encodable(value: object) -> object:
    """A file name or command line as UTF-8 can hold it: an undecodable byte of a file name
    (a lone surrogate in Python) is kept as its escape, never a refusal of the whole artifact."""
    return (
        value.encode("utf-8", "backslashreplace").decode("utf-8")
        if isinstance(value, str)
        else value
    )


# Descriptive text that quotes paths and command lines.
Text = Annotated[str, BeforeValidator(_encodable)]


class Provenance(_Strict):
    """Where an artifact came from: measured live, rebuilt from a reference, simulated, or
    emulated (measured through the local cloud: real clients and containers, no real AWS)."""

    kind: ProvenanceKind
    created_at: datetime
    source: Text = Field(min_length=1, description="what was measured: endpoint, host or file")
    tool: Text = f"tts-bench {__version__}"
    command: Text | None = None
    notes: Text | None = None
    curve_modelled: bool = Field(
        default=False,
        description="measured on the local cloud's curve instances: service times from a "
        "ladder's curve, no synthesis (always with kind emulated)",
    )

    @classmethod
    def now(cls, kind: ProvenanceKind, source: str, **kw: Any):
        return cls(
            kind=kind, created_at=datetime.now(UTC).replace(microsecond=0), source=source, **kw
        )


def kind_fits_fingerprint(provenance: Provenance, fingerprint: Fingerprint | None) -> str | None:
    """Emulated is the local cloud, which speaks only SageMaker's transports, or a test's
    stand-in for another contract's container; a SageMaker transport on a `local-` instance
    type (this machine's hardware) is never measured or reference."""
    if fingerprint is None:
        return None
    sagemaker = not fingerprint.transport.is_local
    # A test's stand-in for another vendor's container (a contract other than Kokoro's) is
    # served on loopback: emulated over a local transport, and only then.
    stand_in = fingerprint.contract is not None
    if provenance.kind == "emulated" and not sagemaker and not stand_in:
        return (
            f"provenance.kind: emulated means measured through the local cloud, which serves "
            f"only SageMaker transports, not {fingerprint.transport.value}"
        )
    if (
        provenance.kind in ("measured", "reference")
        and sagemaker
        and fingerprint.instance_type.startswith("local-")
    ):
        return (
            f"provenance.kind: {provenance.kind}, but {fingerprint.transport.value} on "
            f"{fingerprint.instance_type} is the local cloud: emulated"
        )
    return None
