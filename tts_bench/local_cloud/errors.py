"""The local cloud's errors: each message names what to do."""

from __future__ import annotations

from tts_bench.errors import TtsBenchError


class LocalCloudError(TtsBenchError):
    """The local cloud could not start, deploy or keep its endpoint running."""


class DeployError(LocalCloudError):
    """The recorded preview cannot be deployed (no endpoint in it, a reference not resolvable)."""


class NoInstanceError(LocalCloudError):
    """No instance of the endpoint is InService, so there is nowhere to send a request."""
