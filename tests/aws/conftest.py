"""moto's AWS emulator in server mode on loopback: started once, reset before every test.

Every test gets AWS settings that point boto3 at the emulator (AWS_ENDPOINT_URL), dummy
credentials, a region, and its own tts-bench state directory (freeze records).
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.aws.emulated import REGION, EmulatedAws


def _accept_any_instance_type(self: object, instance_type: str) -> None:
    """moto rejects ml.g5.*; the server runs in this process, so patching its model is enough."""


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    from moto.sagemaker.models import FakeEndpointConfig
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FakeEndpointConfig, "validate_instance_type", _accept_any_instance_type)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


def aws_environment(monkeypatch: pytest.MonkeyPatch, endpoint_url: str, state: Path) -> None:
    """AWS settings of a machine with nothing configured but what the test gives it."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(state / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(state / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # a refused call fails fast
    monkeypatch.setenv("TTS_BENCH_STATE_DIR", str(state / "tts-bench"))


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> EmulatedAws:
    """A fresh emulator (reset via moto's API) and the environment pointing at it."""
    reset = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(reset, timeout=10) as answer:
        answer.read()
    aws_environment(monkeypatch, moto_url, tmp_path)
    return EmulatedAws(moto_url, state_dir=tmp_path / "tts-bench")
