"""The container's HTTP contract as a client sees it through the local cloud (SPEC §3, §11).

The same client code runs against real instances (`test_data_plane`) and curve instances
(`test_curve_contract`): a streamed request ends in `done` after at least one chunk, a whole
body likewise, a malformed body is a ModelError carrying the container's 422, a full admission
bound gives the container's 503 `queue_saturated` with a retry hint, and `/ping` reports the
bound and the fingerprint. `hold` is a request body that keeps its slot for seconds.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.local_cloud.conftest import runtime_client
from tests.local_cloud.streams import events, rejoin, speech_request, stream
from tts_bench.telemetry import QUEUE_SATURATED_ERROR


def ping(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/ping", timeout=10) as answer:
        return dict(json.loads(answer.read()))


def streams_chunks_then_done(endpoint: str, body: dict[str, Any]) -> tuple[bytes, list[bytes]]:
    """The request streamed: chunks with audio, then done, every event naming the request;
    returns the rejoined bytes and the PayloadParts as they came."""
    data, parts = rejoin(stream(runtime_client(), endpoint, body))
    items = events(data)
    chunks = [e for e in items if e["type"] == "chunk"]
    assert chunks and all(c["data"] and c["status_code"] == 206 for c in chunks)
    assert {e["context_id"] for e in items} == {body["context_id"]}
    assert items[-1]["type"] == "done" and items[-1]["status_code"] == 200
    return data, parts


def invoke_endpoint_returns_the_whole_body(endpoint: str, variant: str) -> None:
    answer = runtime_client().invoke_endpoint(
        EndpointName=endpoint,
        Body=json.dumps(speech_request("whole")),
        ContentType="application/json",
    )
    assert answer["InvokedProductionVariant"] == variant
    assert events(answer["Body"].read())[-1]["type"] == "done"


def malformed_request_is_a_model_error_with_the_original_422(
    endpoint: str, call: str, log_stream: str
) -> None:
    with pytest.raises(ClientError) as caught:
        getattr(runtime_client(), call)(
            EndpointName=endpoint,
            Body=json.dumps({"context_id": "bad", "transcript": ""}),
            ContentType="application/json",
        )
    response = caught.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["OriginalStatusCode"] == 422
    assert "transcript" in response["OriginalMessage"]
    assert response["LogStreamArn"].endswith(
        f":log-group:/aws/sagemaker/Endpoints/{endpoint}:log-stream:{log_stream}"
    )


def saturated_instance_gives_its_503_with_retry_after(
    endpoint: str, url: str, hold: dict[str, Any]
) -> None:
    """Two held requests fill a bound of 2 (admitted on arrival); the third is refused."""
    client = runtime_client()
    held: list[Any] = []
    threads = [
        threading.Thread(
            target=lambda i=i: held.append(
                stream(client, endpoint, {**hold, "context_id": f"h{i}"})
            )
        )
        for i in range(2)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.time() + 30
        while ping(url)["in_flight"] < 2:
            assert time.time() < deadline, "the two requests were not admitted"
            time.sleep(0.05)
        with pytest.raises(ClientError) as caught:
            stream(client, endpoint, speech_request("third"))
        response = caught.value.response
        assert response["Error"]["Code"] == "ModelError"
        assert response["OriginalStatusCode"] == 503
        original = json.loads(response["OriginalMessage"])
        assert original["error"] == QUEUE_SATURATED_ERROR
        assert original["retry_after_ms"] > 0
        assert (original["queue_max_depth"], original["in_flight"]) == (2, 2)
    finally:
        for thread in threads:
            thread.join(timeout=120)
        for answer in held:
            answer["Body"].close()


def ping_reports_the_bound_and_the_fingerprint(url: str, bound: int) -> dict[str, Any]:
    body = ping(url)
    assert (body["ready"], body["status"], body["queue_max_depth"]) == (True, "ready", bound)
    assert set(body["fingerprint"]) >= {"model", "instance_type", "image_digest"}
    return body
