"""One strict JSON parser and one strict model base, for the artifacts and the container alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from tts_server.protocol import decode_json

from tts_bench.artifacts.files import parse_artifact_json
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.surge import SurgePrediction
from tts_bench.errors import ArtifactError
from tts_bench.strict import MAX_INTEGER_DIGITS, StrictModel, UnrepresentableNumber, strict_loads

REFUSED = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * (MAX_INTEGER_DIGITS + 1)]


@pytest.mark.parametrize("number", REFUSED)
def test_a_number_no_measurement_holds_is_refused_by_artifacts_and_requests_alike(number):
    text = f'{{"x": {number}}}'
    with pytest.raises(UnrepresentableNumber):
        strict_loads(text)
    with pytest.raises(ArtifactError, match=r"artifact\.json: "):
        parse_artifact_json(text, Path("artifact.json"))
    data, problems = decode_json(text.encode())
    assert data is None and [p.field for p in problems] == ["body"]


@given(st.integers(min_value=-(10**MAX_INTEGER_DIGITS) + 1, max_value=10**MAX_INTEGER_DIGITS - 1))
def test_every_integer_up_to_the_limit_reads_back(value):
    assert strict_loads(f"[{value}]") == [value]


def test_every_strict_model_refuses_unknown_fields_and_non_finite_floats():
    for model in (Provenance, SurgePrediction):
        assert issubclass(model, StrictModel)
    with pytest.raises(ValidationError, match="finite"):
        SurgePrediction(
            shed_share=0.1, reach_probability=0.1, mean_occupancy=float("inf"), trials=1, seed=1
        )
    with pytest.raises(ValidationError, match="Extra inputs"):
        SurgePrediction(
            shed_share=0.1, reach_probability=0.1, mean_occupancy=1.0, trials=1, seed=1, x=1
        )
