"""`tts-bench` imports only the chosen subcommand's module: `--help` stays fast and light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tts_bench import cli

HEAVY = ("torch", "spacy", "aiohttp", "locust", "moto")


def imported_by(*argv: str) -> tuple[set[str], str]:
    """The modules a fresh `python -m tts_bench ARGV` imports, and its stdout."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tts_bench", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return names, out.stdout


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"]], ids=" ".join)
def test_help_imports_none_of_the_heavy_libraries(argv: list[str]) -> None:
    modules, stdout = imported_by(*argv)
    assert "tts_bench.cli" in modules and stdout.startswith("usage: tts-bench")
    assert sorted({m.partition(".")[0] for m in modules} & set(HEAVY)) == []


def test_help_lists_every_command_with_its_summary_and_imports_no_command_module() -> None:
    modules, stdout = imported_by("--help")
    listed = " ".join(stdout.split())  # argparse wraps the summaries
    for name, summary in cli.COMMANDS:
        assert f"{name} {summary}" in listed
    assert sorted(m for m in modules if m.startswith("tts_bench.cli.")) == []


@pytest.mark.parametrize("name", [name for name, _ in cli.COMMANDS])
def test_every_command_registers_its_own_parser(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([name, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: tts-bench {name} ")


def test_a_module_that_gives_its_own_summary_is_refused() -> None:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, cli._Subcommands))
    with pytest.raises(TypeError, match=r"tts_bench\.cli\.chain\.plan: its summary belongs in"):
        subparsers.add_parser("plan", help="a second summary")
