"""Pulumi ComponentResources of the speech endpoint stack, in dependency order."""

from components.autoscaling import EndpointAutoscaling, EndpointAutoscalingArgs
from components.foundation import Foundation, FoundationArgs, PackageRole
from components.model_cache import ModelCache, ModelCacheArgs
from components.observability import EndpointObservability, EndpointObservabilityArgs
from components.plan_gate import gate_scaling
from components.speech_endpoint import SpeechEndpoint, SpeechEndpointArgs

__all__ = [
    "EndpointAutoscaling",
    "EndpointAutoscalingArgs",
    "EndpointObservability",
    "EndpointObservabilityArgs",
    "Foundation",
    "FoundationArgs",
    "ModelCache",
    "ModelCacheArgs",
    "PackageRole",
    "SpeechEndpoint",
    "SpeechEndpointArgs",
    "gate_scaling",
]
