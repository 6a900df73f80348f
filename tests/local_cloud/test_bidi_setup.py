"""What the bidi-stream transport stands on: the local CA, the TLS/ALPN listener, the 3.12 env.

No synthesis here: the bridge is started with an `open_session` that is never reached, and
bootstrap runs in a copy of the scripts whose main venv is already installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509

from tts_bench.errors import RefusalError
from tts_bench.local_cloud.data_plane.bidi_bridge import BidiBridge
from tts_bench.local_cloud.data_plane.tls import LocalTls, make_local_tls
from tts_bench.measure.transport.bidi_stream import http2_python

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def never_opened(endpoint: str) -> Iterator[str]:
    raise AssertionError(f"no session should open here ({endpoint})")
    yield ""  # pragma: no cover (a generator, for contextmanager)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalTls:
    return make_local_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def bridge(tls: LocalTls) -> Iterator[BidiBridge]:
    with BidiBridge(tls, never_opened) as started:
        yield started


def handshake(bridge: BidiBridge, context: ssl.SSLContext, server_name: str) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", bridge.port), timeout=10)
    return context.wrap_socket(raw, server_hostname=server_name)


def test_the_bundle_is_the_system_cas_plus_ours(tls: LocalTls) -> None:
    bundle = tls.bundle_path.read_text()
    ours = tls.ca_path.read_text()
    assert bundle.endswith(ours)
    assert bundle.count("BEGIN CERTIFICATE") > 1  # the system's CAs are still there
    ca = x509.load_pem_x509_certificate(tls.ca_path.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


@pytest.mark.parametrize("server_name", ["127.0.0.1", "localhost"])
def test_a_client_trusting_the_bundle_verifies_the_listener_and_gets_h2(
    bridge: BidiBridge, tls: LocalTls, server_name: str
) -> None:
    context = ssl.create_default_context(cafile=str(tls.bundle_path))
    context.set_alpn_protocols(["h2", "http/1.1"])
    with handshake(bridge, context, server_name) as conn:
        assert conn.selected_alpn_protocol() == "h2"


def test_a_client_without_our_ca_refuses_the_listener(bridge: BidiBridge) -> None:
    context = ssl.create_default_context()  # the system's CAs only
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(bridge, context, "127.0.0.1")


def test_http_1_1_is_told_this_listener_speaks_http_2_only(
    bridge: BidiBridge, tls: LocalTls
) -> None:
    context = ssl.create_default_context(cafile=str(tls.bundle_path))
    context.set_alpn_protocols(["http/1.1"])
    with handshake(bridge, context, "127.0.0.1") as conn:
        conn.sendall(b"POST /endpoints/x/invocations-bidirectional-stream HTTP/1.1\r\n\r\n")
        reply = conn.recv(4096)
    assert reply.startswith(b"HTTP/1.1 505 ")
    assert b"HTTP/2 only" in reply


def copy_of_the_scripts(tmp_path: Path) -> Path:
    """bootstrap, pyproject and the HTTP/2 requirements, with the main venv already installed."""
    (tmp_path / "scripts").mkdir()
    for name in ("scripts/bootstrap", "scripts/requirements-http2.txt", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    time.sleep(0.01)
    (tmp_path / ".venv" / ".tts-bench-installed").touch()
    return tmp_path


def test_without_python_3_12_bootstrap_succeeds_and_the_transport_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    root = copy_of_the_scripts(tmp_path)
    only_311 = tmp_path / "bin"
    only_311.mkdir()
    for tool in ("bash", "dirname", "touch", "env"):
        (only_311 / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    (only_311 / "python3").symlink_to(sys.executable)
    env = {"PATH": str(only_311), "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "none")}
    run = subprocess.run(
        ["bash", str(root / "scripts" / "bootstrap")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "no Python >= 3.12 found" in run.stderr
    assert not (root / ".venv-http2").exists()
    with pytest.raises(RefusalError) as refused:
        http2_python(root / ".venv-http2")
    message = str(refused.value)
    assert "\n" not in message
    assert "Python >= 3.12" in message and "scripts/bootstrap" in message


def test_bootstrap_made_the_http2_env_the_tests_use() -> None:
    python = http2_python()
    run = subprocess.run(
        [str(python), "-c", "import sys, aws_sdk_sagemaker_runtime_http2, awscrt; "
         "print(sys.version_info >= (3, 12))"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    assert run.stdout.strip() == "True", run.stderr
