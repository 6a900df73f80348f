"""Fingerprints: slugs and file names that keep configurations apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tts_bench.artifacts.fingerprint import (
    Fingerprint,
    Transport,
    condense_instance_type,
    plan_filename,
    qmax_filename,
    ttotal_filename,
)

REFERENCE = Fingerprint(
    model="kokoro-82m",
    instance_type="ml.g5.xlarge",
    image_digest="sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced",
    transport=Transport.RESPONSE_STREAM,
)


def test_reference_file_names() -> None:
    assert REFERENCE.slug == "g5xlarge-8b1b96bc"
    assert qmax_filename(REFERENCE) == "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
    assert (
        ttotal_filename(REFERENCE, "force-desired")
        == "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
    )
    assert plan_filename(REFERENCE) == "plan-kokoro-82m-g5xlarge-8b1b96bc.json"


def test_transport_names_are_the_spec_list() -> None:
    assert [t.value for t in Transport] == [
        "local-http",
        "local-ws",
        "response-stream",
        "bidi-stream",
    ]


def test_performance_env_adds_a_hash_so_configurations_do_not_collide() -> None:
    batched = REFERENCE.model_copy(update={"performance_env": {"ENGINE_MODE": "batched"}})
    serial = REFERENCE.model_copy(update={"performance_env": {"ENGINE_MODE": "serial"}})
    assert batched.slug.startswith("g5xlarge-8b1b96bc-")
    assert len({REFERENCE.slug, batched.slug, serial.slug}) == 3


@pytest.mark.parametrize("key", ["MAX_QUEUE_DEPTH", "ENDPOINT_NAME", "IMAGE_DIGEST"])
def test_deployment_config_is_not_part_of_identity(key: str) -> None:
    with pytest.raises(ValidationError, match=f"{key} is deployment config"):
        Fingerprint(**{**REFERENCE.model_dump(), "performance_env": {key: "50"}})


@pytest.mark.parametrize(
    ("instance_type", "condensed"),
    [
        ("ml.g5.xlarge", "g5xlarge"),
        ("ml.g6e.12xlarge", "g6e12xlarge"),
        ("local-AMD EPYC 7B13", "localamdepyc7b13"),
    ],
)
def test_condensed_instance_types(instance_type: str, condensed: str) -> None:
    assert condense_instance_type(instance_type) == condensed


@given(
    st.dictionaries(
        st.sampled_from(["ENGINE_MODE", "BATCH", "DTYPE"]), st.text(max_size=5), max_size=3
    )
)
def test_env_hash_ignores_key_order(env: dict[str, str]) -> None:
    a = REFERENCE.model_copy(update={"performance_env": env})
    b = Fingerprint(
        **{**REFERENCE.model_dump(), "performance_env": dict(reversed(list(env.items())))}
    )
    assert a.slug == b.slug
    assert (a.env_hash is None) == (not env)


# --------------------------------------------------------------------------- contracts (issue 39)


def test_kokoros_contract_leaves_the_fingerprint_as_it_was() -> None:
    from tts_bench.measure.transport.contract import KOKORO

    under_kokoro = REFERENCE.model_copy(update={"contract": KOKORO.ref})
    assert under_kokoro.model_dump_json() == REFERENCE.model_dump_json()
    assert "contract" not in REFERENCE.model_dump_json()
    assert under_kokoro == REFERENCE and under_kokoro.slug == REFERENCE.slug


def test_a_sonic3_fingerprint_never_matches_a_kokoro_one() -> None:
    from tts_bench.measure.transport.contract import SONIC3

    sonic3 = REFERENCE.model_copy(update={"contract": SONIC3.ref})
    assert sonic3 != REFERENCE and not sonic3.same_build(REFERENCE)
    assert not REFERENCE.same_build(sonic3)
    (difference,) = sonic3.differences(REFERENCE)
    assert difference == f"contract: sonic3@{SONIC3.sha256[:12]} != kokoro"
    assert sonic3.slug == f"g5xlarge-8b1b96bc-sonic3{SONIC3.sha256[:6]}"
    assert qmax_filename(sonic3) != qmax_filename(REFERENCE)
    # Written and read back, the contract is kept (and validated).
    again = Fingerprint.model_validate_json(sonic3.model_dump_json())
    assert again == sonic3 and again.contract is not None and again.contract.name == "sonic3"
    with pytest.raises(ValidationError):
        Fingerprint.model_validate(
            {**sonic3.model_dump(), "contract": {"name": "x", "sha256": "0"}}
        )


def test_emulated_on_a_local_transport_only_for_a_stand_in_of_another_contract() -> None:
    from tts_bench.artifacts.provenance import Provenance, kind_fits_fingerprint
    from tts_bench.measure.transport.contract import SONIC3

    local = REFERENCE.model_copy(update={"transport": Transport.LOCAL_HTTP})
    emulated = Provenance.now("emulated", "http://127.0.0.1:1")
    assert "emulated means measured through the local cloud" in kind_fits_fingerprint(
        emulated, local
    )
    stand_in = local.model_copy(update={"contract": SONIC3.ref})
    assert kind_fits_fingerprint(emulated, stand_in) is None
