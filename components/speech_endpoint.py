"""SpeechEndpoint: the SageMaker Model (image by digest, or a vendor's model package), its
endpoint configuration and the endpoint itself."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

ROUTING_STRATEGY = "LEAST_OUTSTANDING_REQUESTS"
# The container passes health within 4 min (SPEC §3); SageMaker's own ceilings sit above that.
STARTUP_HEALTH_TIMEOUT_S = 600
MODEL_DOWNLOAD_TIMEOUT_S = 600


@dataclass(frozen=True)
class SpeechEndpointArgs:
    endpoint_name: str  # literal: the scaling resource id and the alarms are spelled from it
    variant_name: str
    image: str | None  # digest-pinned, checked by the caller; None for a model package
    model_data_uri: pulumi.Input[str] | None  # the weights; None for a model package
    execution_role_arn: pulumi.Input[str]
    instance_type: str
    initial_instance_count: int
    environment: dict[str, str]
    model_tags: dict[str, str]  # plan id, image digest and model id, readable at preview
    tags: dict[str, str]
    # A vendor's versioned model package instead of an image (issue 39): deployed by
    # ModelPackageName, network-isolated as Marketplace requires.
    model_package: str | None = None
    # The variant's RoutingConfig strategy; None sends none (SageMaker's default, random).
    routing: str | None = ROUTING_STRATEGY


class SpeechEndpoint(pulumi.ComponentResource):
    """One real-time endpoint with one variant routed to the least busy instance."""

    def __init__(
        self, name: str, args: SpeechEndpointArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("speech:aws:SpeechEndpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.model_package is not None:
            self.model = aws.sagemaker.Model(
                f"{name}-model",
                execution_role_arn=args.execution_role_arn,
                primary_container=aws.sagemaker.ModelPrimaryContainerArgs(
                    model_package_name=args.model_package, environment=args.environment
                ),
                enable_network_isolation=True,
                tags={**args.tags, **args.model_tags},
                opts=child,
            )
        else:
            self.model = aws.sagemaker.Model(
                f"{name}-model",
                execution_role_arn=args.execution_role_arn,
                primary_container=aws.sagemaker.ModelPrimaryContainerArgs(
                    image=args.image,
                    environment=args.environment,
                    model_data_source=aws.sagemaker.ModelPrimaryContainerModelDataSourceArgs(
                        s3_data_sources=[
                            aws.sagemaker.ModelPrimaryContainerModelDataSourceS3DataSourceArgs(
                                s3_uri=args.model_data_uri,
                                s3_data_type="S3Prefix",
                                compression_type="None",
                            )
                        ]
                    ),
                ),
                tags={**args.tags, **args.model_tags},
                opts=child,
            )
        routing = (
            None
            if args.routing is None
            else [
                aws.sagemaker.EndpointConfigurationProductionVariantRoutingConfigArgs(
                    routing_strategy=args.routing
                )
            ]
        )
        self.config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[
                aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                    variant_name=args.variant_name,
                    model_name=self.model.name,
                    instance_type=args.instance_type,
                    initial_instance_count=args.initial_instance_count,
                    container_startup_health_check_timeout_in_seconds=STARTUP_HEALTH_TIMEOUT_S,
                    model_data_download_timeout_in_seconds=MODEL_DOWNLOAD_TIMEOUT_S,
                    routing_configs=routing,
                )
            ],
            tags=args.tags,
            opts=child,
        )
        self.endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint",
            name=args.endpoint_name,
            endpoint_config_name=self.config.name,
            tags=args.tags,
            opts=child,
        )
        self.endpoint_name: pulumi.Output[str] = self.endpoint.name
        self.model_name: pulumi.Output[str] = self.model.name
        self.register_outputs({"endpoint_name": self.endpoint_name, "model_name": self.model_name})
