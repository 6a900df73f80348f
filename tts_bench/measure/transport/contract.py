"""Endpoint contracts: what a TTS container on SageMaker expects and answers (issue 39).

The method (a closed-loop ladder, a plan by arithmetic, a gate) is not about Kokoro; only the
wire is. An `EndpointContract` says, declaratively:
- how a corpus line becomes a request body (`request`, a JSON template whose string values
  `${transcript}`, `${language}`, `${voice}`, `${context_id}`, `${encoding}` and
  `${sample_rate}` are replaced by the value itself, of its own type);
- which events carry audio, where their bytes and rate are, what ends a stream and which
  statuses mean "refused: at capacity" (`events`, read by `stream_events`);
- the concurrency a container admits, where its vendor publishes one (`admits`).

Two are built in: `kokoro` (this project's container, the default, exactly what every reader
did before contracts) and `sonic3` (Cartesia Sonic-3's published SageMaker contract, the second
seed). Any other is a JSON or YAML file: `--contract kokoro|sonic3|FILE`. A contract other than
`kokoro` is named in the fingerprint with its hash (`ref`), so a plan measured under one never
gates another.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from pydantic import ConfigDict, Field, JsonValue, PositiveInt, ValidationError, field_validator

from tts_bench.artifacts.files import describe_validation_error
from tts_bench.artifacts.fingerprint import ContractRef
from tts_bench.deployment import CONTRACT_ROUTING
from tts_bench.errors import TtsBenchError, printable
from tts_bench.measure.transport.stream_events import KOKORO_EVENTS, SONIC3_EVENTS, EventRules
from tts_bench.strict import StrictModel, UnrepresentableNumber, strict_loads

DEFAULT_CONTRACT: Final = "kokoro"
PLACEHOLDERS: Final = frozenset(
    {"transcript", "language", "voice", "context_id", "encoding", "sample_rate"}
)
REQUIRED_PLACEHOLDERS: Final = frozenset({"transcript", "context_id"})
_PLACEHOLDER = re.compile(r"^\$\{([a-z_]+)\}$")
MAX_CONTRACT_BYTES: Final = 64 * 1024
CONTRACT_METAVAR: Final = "kokoro|sonic3|FILE"
CONTRACT_HELP: Final = (
    "the endpoint contract the ladder was measured under: how requests are built and events "
    "and refusals read (default: kokoro, this project's container; sonic3; or a contract file)"
)


class Utterance(Protocol):
    """A corpus line as a contract reads it (`measure.corpus.Utterance`)."""

    @property
    def transcript(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def voice(self) -> str: ...


class ContractError(TtsBenchError):
    """A `--contract` that names no built-in and no readable, valid contract file."""


class OutputFormat(StrictModel):
    """The raw PCM a request asks for: its encoding's name on the wire, rate and sample width."""

    encoding: str = Field(min_length=1, description="e.g. pcm_s16le (Kokoro), pcm (Sonic-3)")
    sample_rate: PositiveInt = Field(le=384_000)
    bytes_per_sample: PositiveInt = Field(le=8, description="2 for 16-bit PCM, 4 for float32")


class EndpointContract(StrictModel):
    """One container's wire contract: the request template, its events, its refusals. Frozen:
    it is an identity (its hash goes into the fingerprint)."""

    model_config = ConfigDict(**StrictModel.model_config, frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,31}$", description="kokoro, sonic3, ...")
    source: str = Field(default="", description="where the contract is published")
    request: dict[str, JsonValue] = Field(description="the body template; see the module doc")
    output: OutputFormat
    voice: str | None = Field(
        default=None,
        min_length=1,
        description="every request speaks this voice; null: the corpus's",
    )
    events: EventRules = Field(default_factory=EventRules)
    admits: PositiveInt | None = Field(
        default=None, description="generations a container admits at once, where published"
    )
    # How the vendor asks SageMaker to spread requests over a variant's instances, where it says
    # (the stack's RoutingConfig). Not in the hash: it shapes the fleet, not what one container
    # was measured doing, so adding it never orphaned a measurement.
    routing: Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM"] | None = Field(
        default=None, description="the RoutingConfig strategy the vendor recommends"
    )

    @field_validator("request")
    @classmethod
    def _known_placeholders(cls, template: dict[str, JsonValue]) -> dict[str, JsonValue]:
        found = set(_placeholders(template, "request"))
        if missing := sorted(REQUIRED_PLACEHOLDERS - found):
            raise ValueError("the template never uses " + ", ".join(f"${{{m}}}" for m in missing))
        return template

    @field_validator("events")
    @classmethod
    def _readable_events(cls, events: EventRules) -> EventRules:
        if not events.audio_events or not events.ok_events:
            raise ValueError("audio_events and ok_events each need at least one event type")
        if not 1 <= events.bytes_per_sample <= 8:
            raise ValueError("bytes_per_sample: give 1 to 8")
        return events

    def body(self, utterance: Utterance, context_id: str) -> dict[str, Any]:
        """The request body for one corpus line."""
        values = {
            "transcript": utterance.transcript,
            "language": utterance.language,
            "voice": self.voice or utterance.voice,
            "context_id": context_id,
            "encoding": self.output.encoding,
            "sample_rate": self.output.sample_rate,
        }
        return _fill(self.request, values)  # type: ignore[return-value]

    @property
    def sha256(self) -> str:
        """Hex digest of the contract's canonical JSON (sorted keys, no spaces)."""
        canonical = json.dumps(
            self.model_dump(mode="json", exclude={"routing"}),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def ref(self) -> ContractRef | None:
        """The fingerprint's `contract`: None for the built-in Kokoro contract, so every
        artifact measured before contracts keeps its bytes and still pairs."""
        if self == BUILT_IN[DEFAULT_CONTRACT]:
            return None
        return ContractRef(name=self.name, sha256=self.sha256)


def _placeholders(value: JsonValue, where: str) -> list[str]:
    """Every placeholder in a template; an unknown one is a `ValueError` naming its place."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _placeholders(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _placeholders(v, f"{where}.{i}")]
    if isinstance(value, str) and (match := _PLACEHOLDER.match(value)):
        if (name := match.group(1)) not in PLACEHOLDERS:
            known = ", ".join(f"${{{p}}}" for p in sorted(PLACEHOLDERS))
            raise ValueError(f"{where}: unknown placeholder {value}; known: {known}")
        return [name]
    return []


def _fill(value: JsonValue, values: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, str) and (match := _PLACEHOLDER.match(value)):
        return values[match.group(1)]
    return value


# This project's container (SPEC §3): key for key the body every client sent before contracts.
KOKORO = EndpointContract(
    name="kokoro",
    source="SPEC §3 (this project's container)",
    request={
        "context_id": "${context_id}",
        "transcript": "${transcript}",
        "language": "${language}",
        "voice": {"mode": "id", "id": "${voice}"},
        "output_format": {
            "container": "raw",
            "encoding": "${encoding}",
            "sample_rate": "${sample_rate}",
        },
    },
    output=OutputFormat(encoding="pcm_s16le", sample_rate=24000, bytes_per_sample=2),
    events=KOKORO_EVENTS,
)

# Cartesia Sonic-3 on SageMaker, as its page publishes it (the second seed): the sample body's
# `voice_id`, raw `pcm` at 44.1 kHz (16-bit assumed: the page names no width), a `done` event
# ends the stream, 429 once a container holds 4 generations, least-outstanding-requests routing
# recommended. The voice is the page's sample id.
SONIC3 = EndpointContract(
    name="sonic3",
    source="Cartesia Sonic-3 on Amazon SageMaker JumpStart (docs.cartesia.ai)",
    request={
        "context_id": "${context_id}",
        "transcript": "${transcript}",
        "language": "${language}",
        "output_format": {
            "container": "raw",
            "sample_rate": "${sample_rate}",
            "encoding": "${encoding}",
        },
        "voice_id": {"mode": "id", "id": "${voice}"},
    },
    output=OutputFormat(encoding="pcm", sample_rate=44100, bytes_per_sample=2),
    voice="bf0a246a-8642-498a-9950-80c35e9276b5",
    events=SONIC3_EVENTS,
    admits=4,
    routing=CONTRACT_ROUTING["sonic3"],  # "load-aware routing" beside the 429s
)

BUILT_IN: Final[dict[str, EndpointContract]] = {"kokoro": KOKORO, "sonic3": SONIC3}


def parse_contract(text: str, source: str) -> EndpointContract:
    """A contract file's text (JSON, or YAML when `source` ends .yaml/.yml), validated; every
    problem is one `ContractError` line naming `source` and the field."""
    try:
        if source.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = strict_loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(
            f"--contract {source}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (UnrepresentableNumber, RecursionError, ValueError) as exc:
        raise ContractError(f"--contract {source}: {printable(str(exc))[:200]}") from None
    except Exception as exc:  # yaml's errors: one class per problem, none useful to name here
        first = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise ContractError(f"--contract {source}: not YAML ({first})") from None
    if not isinstance(data, dict):
        raise ContractError(
            f"--contract {source}: a contract is an object with name, request, output and events"
        )
    try:
        return EndpointContract.model_validate(data)
    except ValidationError as exc:
        raise ContractError(
            f"--contract {source}: {printable(describe_validation_error(exc))}"
        ) from None


def load_contract(spec: str | None) -> EndpointContract:
    """`--contract`: a built-in's name, or a contract file; absent or blank is `kokoro`."""
    name = (spec or "").strip() or DEFAULT_CONTRACT
    if name in BUILT_IN:
        return BUILT_IN[name]
    path = Path(name)
    try:
        raw = path.read_bytes()[: MAX_CONTRACT_BYTES + 1]
    except FileNotFoundError:
        known = ", ".join(BUILT_IN)
        raise ContractError(f"--contract {name}: neither a built-in ({known}) nor a file") from None
    except OSError as exc:
        raise ContractError(f"--contract {name}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONTRACT_BYTES:
        raise ContractError(f"--contract {name}: over {MAX_CONTRACT_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ContractError(f"--contract {name}: not UTF-8 text") from None
    return parse_contract(text, name)


def contract_of_ladder(
    spec: str | None, measured: ContractRef | None, ladder: str
) -> EndpointContract:
    """`--contract` for a command that works from a ladder (ttotal, surge, rehearse): loaded,
    and refused in one line unless it is the contract the ladder was measured under, so a
    probe never speaks another wire than the one its ladder's figures came from."""
    contract = load_contract(spec)
    if contract.ref == measured:
        return contract
    if measured is None:
        raise ContractError(
            f"--contract {contract.name}: {ladder} was measured under kokoro's contract; "
            "leave --contract out (or pass --contract kokoro)"
        )
    if contract.name == measured.name:
        raise ContractError(
            f"--contract {spec}: {ladder} was measured under another contract named "
            f"{measured.name} (sha256 {measured.sha256[:12]}, this one {contract.sha256[:12]}); "
            "pass the file it was measured with"
        )
    raise ContractError(
        f"--contract {contract.name}: {ladder} was measured under contract {measured.name}; "
        f"pass --contract {measured.name} (or its file)"
    )
