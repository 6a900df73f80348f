"""T_total's AWS edge: the capacity call, the endpoint's state and the new instance's logs.

Each call reads or changes one thing and returns plain values; the measurement
(`sagemaker`) decides what they mean.
"""

from __future__ import annotations

import json
import time

from tts_bench.aws.session import AwsSession
from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE
from tts_bench.errors import TtsBenchError


def log_group(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def instance_streams(session: AwsSession, endpoint: str, variant: str) -> dict[str, float]:
    """The variant's instance log streams: name → creationTime (unix seconds)."""
    group = log_group(endpoint)
    try:
        streams = session.paginate(
            "logs",
            "describe_log_streams",
            "logStreams",
            resource=f"log group {group}",
            logGroupName=group,
            logStreamNamePrefix=f"{variant}/",
        )
    except TtsBenchError as exc:
        if "ResourceNotFoundException" in str(exc):
            return {}
        raise
    return {s["logStreamName"]: s["creationTime"] / 1000.0 for s in streams}


def stream_markers(session: AwsSession, endpoint: str, stream: str) -> dict[str, float]:
    """Start-up markers in an instance's log stream: name → the container's own timestamp."""
    events = session.call(
        "logs",
        "get_log_events",
        resource=f"log stream {stream}",
        logGroupName=log_group(endpoint),
        logStreamName=stream,
        startFromHead=True,
    ).get("events", [])
    markers: dict[str, float] = {}
    for event in events:
        try:
            line = json.loads(event.get("message", ""))
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("msg") == "startup_marker" and "marker" in line:
            stamp = line.get("ts", event.get("timestamp", 0) / 1000.0)
            markers.setdefault(str(line["marker"]), float(stamp))
    return markers


def variant_state(session: AwsSession, endpoint: str, variant: str) -> tuple[str, int | None]:
    described = session.call(
        "sagemaker", "describe_endpoint", resource=f"endpoint {endpoint}", EndpointName=endpoint
    )
    for entry in described.get("ProductionVariants", []):
        if entry["VariantName"] == variant:
            return str(described.get("EndpointStatus")), entry.get("CurrentInstanceCount")
    return str(described.get("EndpointStatus")), None


def allow_forced_count(session: AwsSession, endpoint: str, variant: str, count: int) -> None:
    """Raise the (suspended) scalable target's max to `count`, so the forced count stands."""
    from tts_bench.aws.deployed import SuspendedState
    from tts_bench.deployment import resource_id

    rid = resource_id(endpoint, variant)
    targets = session.call(
        "application-autoscaling",
        "describe_scalable_targets",
        resource=f"scalable target {rid}",
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceIds=[rid],
        ScalableDimension=SCALABLE_DIMENSION,
    ).get("ScalableTargets", [])
    if targets:
        session.call(
            "application-autoscaling",
            "register_scalable_target",
            resource=f"scalable target {rid}",
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=rid,
            ScalableDimension=SCALABLE_DIMENSION,
            MinCapacity=targets[0]["MinCapacity"],
            MaxCapacity=max(count, targets[0]["MaxCapacity"]),
            SuspendedState=SuspendedState.all(True).to_api(),
        )


def force_desired(session: AwsSession, endpoint: str, variant: str, count: int) -> float:
    """UpdateEndpointWeightsAndCapacities to `count`; returns when the call was accepted."""
    session.call(
        "sagemaker",
        "update_endpoint_weights_and_capacities",
        resource=f"variant {variant} of endpoint {endpoint}",
        EndpointName=endpoint,
        DesiredWeightsAndCapacities=[{"VariantName": variant, "DesiredInstanceCount": count}],
    )
    return time.time()
