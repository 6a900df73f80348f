"""Endpoint contracts (issue 39): the built-ins, contract files and their one-line refusals."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.cli import main
from tts_bench.deployment import recommended_routing
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.transport.contract import (
    BUILT_IN,
    KOKORO,
    SONIC3,
    ContractError,
    contract_of_ladder,
    load_contract,
    parse_contract,
)

texts = st.text(min_size=1, max_size=40)


@settings(max_examples=50, deadline=None)
@given(transcript=texts, language=st.sampled_from(["en", "ja"]), voice=texts, context=texts)
def test_kokoro_builds_exactly_the_body_every_client_sent_before(
    transcript: str, language: str, voice: str, context: str
) -> None:
    utterance = Utterance(transcript, language, voice)
    body = KOKORO.body(utterance, context)
    assert body == utterance.request(context)
    assert json.dumps(body) == json.dumps(utterance.request(context))  # key order too


def test_sonic3_builds_the_seed_sample_shape() -> None:
    body = SONIC3.body(Utterance("Hello there.", "en"), "c-1")
    assert body == {
        "context_id": "c-1",
        "transcript": "Hello there.",
        "language": "en",
        "output_format": {"container": "raw", "sample_rate": 44100, "encoding": "pcm"},
        "voice_id": {"mode": "id", "id": "bf0a246a-8642-498a-9950-80c35e9276b5"},
    }
    assert SONIC3.admits == 4 and KOKORO.admits is None
    assert SONIC3.events.refused_statuses == (429,) and KOKORO.events.refused_statuses == (503,)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_built_in_written_to_a_file_loads_back_equal(tmp_path, name: str, suffix: str) -> None:
    data = BUILT_IN[name].model_dump(mode="json")
    path = tmp_path / f"c{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    loaded = load_contract(str(path))
    assert loaded == BUILT_IN[name] and loaded.sha256 == BUILT_IN[name].sha256
    # Only Kokoro's own contract stays out of the fingerprint, from a file as built in.
    assert (loaded.ref is None) == (name == "kokoro")


def test_default_and_blank_are_kokoro() -> None:
    assert load_contract(None) is KOKORO and load_contract("  ") is KOKORO
    assert load_contract("sonic3") is SONIC3


def _sonic3_with(**changes: object) -> dict:
    data = SONIC3.model_dump(mode="json")
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = data
        for key in parents:
            target = target[key]
        if value is _DROP:
            del target[leaf]
        else:
            target[leaf] = value
    return data


_DROP = object()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_sonic3_with(name=_DROP), "name: Field required"),
        (_sonic3_with(colour="red"), "colour: Extra inputs are not permitted"),
        (_sonic3_with(events__refused_statuss=[429]), "events.refused_statuss"),
        (_sonic3_with(request__language="${lang}"), "unknown placeholder ${lang}"),
        (_sonic3_with(request__transcript="fixed"), "never uses ${transcript}"),
        (_sonic3_with(output__sample_rate=0), "output.sample_rate"),
        (_sonic3_with(events__audio_events=[]), "audio_events and ok_events"),
        (_sonic3_with(admits=0), "admits"),
        (_sonic3_with(name="Sonic 3"), "name: String should match pattern"),
        ([1, 2], "a contract is an object"),
    ],
)
def test_a_bad_contract_file_is_one_line_naming_the_field(tmp_path, data, expected) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ContractError) as info:
        load_contract(str(path))
    message = str(info.value)
    assert message.startswith(f"--contract {path}: ") and expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("c.json", "{not json", "not JSON (line 1"),
        ("c.json", '{"admits": NaN}', "NaN"),
        ("c.yaml", "a: [1, 2", "not YAML"),
        ("c.json", "", "not JSON"),
    ],
)
def test_unreadable_contract_text_is_one_line(tmp_path, name, text, expected) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ContractError) as info:
        load_contract(str(path))
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_missing_file_names_the_built_ins(tmp_path) -> None:
    with pytest.raises(ContractError, match=r"neither a built-in \(kokoro, sonic3\) nor a file"):
        load_contract(str(tmp_path / "nope.json"))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["c.json", "c.yaml"]))
def test_any_text_is_a_contract_or_one_contract_error(text: str, source: str) -> None:
    try:
        parse_contract(text, source)
    except ContractError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--contract", "nope.json"], "--contract nope.json: neither a built-in"),
        (
            ["--contract", "sonic3", "--transport", "local-ws"],
            "--contract sonic3 --transport local-ws",
        ),
        (
            ["--contract", "sonic3", "--transport", "bidi-stream"],
            "over local-http or response-stream",
        ),
    ],
)
def test_qmax_refuses_a_bad_contract_in_one_line(capsys, args, expected_error) -> None:
    assert main(["qmax", "--dry-run", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected_error in err and len(err.splitlines()) == 1


def test_qmax_dry_run_takes_a_contract(capsys) -> None:
    assert main(["qmax", "--dry-run", "--contract", "sonic3", "--rungs", "1,4,5"]) == 0


def test_a_command_from_a_ladder_takes_only_the_ladders_contract(tmp_path) -> None:
    """ttotal, surge and rehearse speak the wire their ladder's figures came from."""
    assert contract_of_ladder(None, None, "q.json") is KOKORO
    assert contract_of_ladder("sonic3", SONIC3.ref, "q.json") is SONIC3
    with pytest.raises(ContractError, match=r"under contract sonic3; pass --contract sonic3"):
        contract_of_ladder(None, SONIC3.ref, "q.json")
    with pytest.raises(ContractError, match=r"under kokoro's contract; leave --contract out"):
        contract_of_ladder("sonic3", None, "q.json")
    edited = tmp_path / "sonic3.json"
    edited.write_text(SONIC3.model_copy(update={"admits": 8}).model_dump_json())
    with pytest.raises(ContractError, match=r"another contract named sonic3 \(sha256 "):
        contract_of_ladder(str(edited), SONIC3.ref, "q.json")


def test_a_routing_recommendation_reaches_the_stack_but_not_the_hash() -> None:
    """Sonic-3's page recommends least-outstanding-requests routing: the program reads it, and
    it shapes the fleet, not what one container was measured doing, so it leaves the hash."""
    sonic3 = BUILT_IN["sonic3"]
    assert recommended_routing("sonic3") == "LEAST_OUTSTANDING_REQUESTS"
    assert recommended_routing("kokoro") is None and recommended_routing("third") is None
    assert sonic3.model_copy(update={"routing": None}).sha256 == sonic3.sha256
    assert sonic3.model_copy(update={"admits": 5}).sha256 != sonic3.sha256
