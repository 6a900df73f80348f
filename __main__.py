"""The Pulumi program: read the stack config into one typed object, gate on the measured plan,
compose the components. Nothing else happens here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from components import (
    EndpointAutoscaling,
    EndpointAutoscalingArgs,
    EndpointObservability,
    EndpointObservabilityArgs,
    Foundation,
    FoundationArgs,
    ModelCache,
    ModelCacheArgs,
    PackageRole,
    SpeechEndpoint,
    SpeechEndpointArgs,
    gate_scaling,
)
from tts_bench.artifacts.fingerprint import OWN_CONTRACT
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import (
    TAG_CONTRACT,
    TAG_IMAGE_DIGEST,
    TAG_MODEL,
    TAG_MODEL_PACKAGE,
    TAG_PLAN_ID,
    is_local_package,
    recommended_routing,
)
from tts_bench.errors import TtsBenchError
from tts_bench.infra.iam_documents import AccountScope
from tts_bench.infra.stack_config import StackConfig
from tts_bench.planning.gate import GateQuery, GateResult
from tts_bench.telemetry import (
    ENV_ENDPOINT_NAME,
    ENV_IMAGE_DIGEST,
    ENV_INSTANCE_TYPE,
    ENV_MAX_QUEUE_DEPTH,
    ENV_VARIANT_NAME,
)

MODELS_PREFIX = "models/"


def read_config() -> StackConfig:
    config = pulumi.Config()
    raw: dict[str, object] = {}
    for key in StackConfig.config_keys():
        value = config.get_object(key) if key == "performanceEnv" else config.get(key)
        if value is not None:
            raw[key] = value
    region = pulumi.Config("aws").get("region")
    if region is not None:
        raw["region"] = region
    try:
        return StackConfig.parse(raw)
    except TtsBenchError as exc:
        raise pulumi.RunError(f"{exc} (set it with `pulumi config set <key> <value>`)") from None


def main() -> None:
    cfg = read_config()
    if cfg.model_package_arn is not None:
        package_main(cfg)
        return
    repository = cfg.repository
    assert cfg.model_revision is not None  # StackConfig refuses an image stack without one
    endpoint = cfg.endpoint_name
    tags = {"tts-bench:endpoint": endpoint}
    bucket = f"{endpoint}-weights-{repository.account}-{cfg.region}"
    build_project = f"{endpoint}-model-cache"

    foundation = Foundation(
        endpoint,
        FoundationArgs(
            scope=AccountScope(account=repository.account, region=cfg.region),
            endpoint_name=endpoint,
            bucket_name=bucket,
            models_prefix=MODELS_PREFIX,
            repository_name=repository.repository,
            repository_arn=repository.repository_arn,
            build_project_name=build_project,
            tags=tags,
        ),
    )
    cache = ModelCache(
        endpoint,
        ModelCacheArgs(
            project_name=build_project,
            bucket_name=bucket,
            models_prefix=MODELS_PREFIX,
            model=cfg.model,
            hf_repo=cfg.model_repo,
            revision=cfg.model_revision,
            build_role_arn=foundation.build_role_arn,
            tags=tags,
        ),
        opts=pulumi.ResourceOptions(depends_on=[foundation]),
    )
    pulumi.export("repository_url", foundation.repository_url)
    pulumi.export("model_cache_project", cache.project_name)
    if not cfg.deploy_endpoint:
        pulumi.log.warn(
            "deployEndpoint is false: only the foundation and the model cache are deployed; push "
            "the image, run the model cache build, then set deployEndpoint to true"
        )
        return
    image = cfg.pinned_image
    gate = gate_for(cfg, image_digest=image.digest, image_is_local=cfg.local_cloud)
    plan = gate.plan if gate.enabled else None
    environment = {
        **cfg.performance_env,
        ENV_ENDPOINT_NAME: endpoint,
        ENV_VARIANT_NAME: cfg.variant_name,
        ENV_INSTANCE_TYPE: cfg.instance_type,
        ENV_IMAGE_DIGEST: image.digest,
    }
    model_tags = {TAG_MODEL: cfg.model, TAG_IMAGE_DIGEST: image.digest}
    if cfg.contract != OWN_CONTRACT:
        model_tags[TAG_CONTRACT] = cfg.contract
    if plan is not None:
        environment[ENV_MAX_QUEUE_DEPTH] = str(plan.queue_max_depth)
        model_tags[TAG_PLAN_ID] = plan.plan_id
    speech = SpeechEndpoint(
        endpoint,
        SpeechEndpointArgs(
            endpoint_name=endpoint,
            variant_name=cfg.variant_name,
            image=image.reference,
            model_data_uri=cache.model_data_uri,
            execution_role_arn=foundation.execution_role_arn,
            instance_type=cfg.instance_type,
            initial_instance_count=gate.deployed_min if gate.deployed_min else cfg.min_instances,
            environment=environment,
            model_tags=model_tags,
            tags=tags,
        ),
        opts=pulumi.ResourceOptions(depends_on=[cache]),
    )
    pulumi.export("endpoint_name", speech.endpoint_name)
    pulumi.export("plan_gate", {"condition": gate.condition.value, "reason": gate.reason})
    if plan is not None:
        deploy_scaling(cfg, plan, tags, speech, image_digest=image.digest)


def gate_for(cfg: StackConfig, **deployed: Any) -> GateResult:
    """The plan gate over the stack's measurements for what it deploys: an image digest (and
    whether it is a local build) or a model package."""
    query = GateQuery(
        model=cfg.model, instance_type=cfg.instance_type, performance_env=cfg.performance_env,
        bounds=cfg.bounds, slo_ms=cfg.slo_ms, surge_ratio=cfg.surge_ratio, rule=cfg.plan_rule,
        contract=cfg.contract, **deployed,
    )  # fmt: skip
    return gate_scaling(Path(__file__).resolve().parent / cfg.measurements_dir, query)


def package_main(cfg: StackConfig) -> None:
    """A vendor's model package (issue 39): no repository, weights bucket or model cache; the
    Model names the package and runs network-isolated, as Marketplace requires."""
    package = cfg.model_package_arn
    assert package is not None and cfg.account is not None  # StackConfig refuses otherwise
    endpoint = cfg.endpoint_name
    tags = {"tts-bench:endpoint": endpoint}
    role = PackageRole(
        endpoint, AccountScope(account=cfg.account, region=cfg.region), endpoint, tags
    )
    if not cfg.deploy_endpoint:
        pulumi.log.warn("deployEndpoint is false: only the execution role is deployed")
        return
    # The local cloud's own package (never a seller's) is the package path's local digest.
    gate = gate_for(cfg, model_package=package, image_is_local=is_local_package(package))
    plan = gate.plan if gate.enabled else None
    # The vendor's container reads none of this project's env (its bound included): only the
    # operator's performance settings reach it.
    model_tags = {TAG_MODEL: cfg.model, TAG_MODEL_PACKAGE: package, TAG_CONTRACT: cfg.contract}
    if plan is not None:
        model_tags[TAG_PLAN_ID] = plan.plan_id
    speech = SpeechEndpoint(
        endpoint,
        SpeechEndpointArgs(
            endpoint_name=endpoint,
            variant_name=cfg.variant_name,
            image=None,
            model_data_uri=None,
            execution_role_arn=role.execution_role_arn,
            instance_type=cfg.instance_type,
            initial_instance_count=gate.deployed_min if gate.deployed_min else cfg.min_instances,
            environment=dict(cfg.performance_env),
            model_tags=model_tags,
            tags=tags,
            model_package=package,
            routing=recommended_routing(cfg.contract),
        ),
    )
    pulumi.export("endpoint_name", speech.endpoint_name)
    pulumi.export("plan_gate", {"condition": gate.condition.value, "reason": gate.reason})
    if plan is not None:
        deploy_scaling(cfg, plan, tags, speech, image_digest=None, model_package=package)


def deploy_scaling(
    cfg: StackConfig,
    plan: PlanArtifact,
    tags: dict[str, str],
    speech: SpeechEndpoint,
    *,
    image_digest: str | None,
    model_package: str | None = None,
) -> None:
    """The plan's autoscaling and observability, after the endpoint: the same for either."""
    endpoint = cfg.endpoint_name
    scaling = EndpointAutoscaling(
        endpoint,
        EndpointAutoscalingArgs(
            endpoint_name=endpoint,
            variant_name=cfg.variant_name,
            plan=plan,
            bounds=cfg.bounds,
            image_digest=image_digest,
            tags=tags,
            model_package=model_package,
        ),
        opts=pulumi.ResourceOptions(depends_on=[speech]),
    )
    EndpointObservability(
        endpoint,
        EndpointObservabilityArgs(
            endpoint_name=endpoint,
            variant_name=cfg.variant_name,
            region=cfg.region,
            plan=plan,
            tags=tags,
        ),
        opts=pulumi.ResourceOptions(depends_on=[speech]),
    )
    pulumi.export("plan_id", plan.plan_id)
    pulumi.export("scaling", {"min": scaling.min_capacity, "max": scaling.max_capacity})


main()
