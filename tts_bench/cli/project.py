"""Which project a command acts on: the one in the current folder, else this checkout's."""

from __future__ import annotations

from pathlib import Path

from tts_bench.errors import TtsBenchError

PROJECT_FILE = "Pulumi.yaml"


def project_root() -> Path:
    """The current folder when it holds a Pulumi project (a second clone previews itself), else
    the checkout the package was installed from."""
    here = Path.cwd()
    if (here / PROJECT_FILE).is_file():
        return here
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / PROJECT_FILE).is_file():
        return checkout
    raise TtsBenchError(
        f"no {PROJECT_FILE} in {here}: run this in a tts-bench project, or name the files"
    )
