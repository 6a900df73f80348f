"""`tts-bench synth` and `tts-bench weights`, invoked as a user would."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest

from tts_bench import cli


@pytest.fixture
def tts_bench(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    # Only the chosen subcommand's module is imported: the others' never reach this test.
    def invoke(args: list[str]) -> tuple[int, str, str]:
        code = cli.main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


@pytest.mark.slow
def test_synth_writes_a_24khz_16bit_mono_wav(tts_bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "hello.wav"
    code, stdout, _ = tts_bench(
        ["synth", "Hello there. Goodbye.", "--voice", "jf_alpha", "--out", str(out)]
    )
    assert code == 0
    assert "first segment" in stdout and "real-time factor" in stdout
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24_000, 1, 2)
        assert wav.getnframes() > 24_000


@pytest.mark.parametrize(
    ("args", "expected", "expected_error"),
    [
        (["synth", "Hi.", "--voice", "af_heart", "--out", "{tmp}/x.wav"], 2, "unknown voice"),
        (["synth", "Hi.", "--language", "xx", "--out", "{tmp}/x.wav"], 2, "unsupported language"),
        (["synth", "<speed ratio=fast/>Hi", "--out", "{tmp}/x.wav"], 2, "must be a number"),
        (["synth", "Hi.", "--out", "{tmp}/missing/x.wav"], 2, "does not exist"),
        (["synth", "Hi.", "--model-dir", "{tmp}", "--out", "{tmp}/x.wav"], 2, "--backend torch"),
        (
            ["synth", "Hi.", "--backend", "torch", "--model-dir", "{tmp}", "--out", "{tmp}/x.wav"],
            2,
            "config.json",
        ),
        (["weights", "import-onnx", "--out", "{tmp}/file.txt"], 2, "is a file"),
        (["weights", "import-onnx", "--out", "{tmp}/done"], 2, "--force"),
    ],
)
def test_mistakes_get_one_line_that_names_the_fix(
    tts_bench,
    tmp_path: Path,
    args: list[str],
    expected: int,
    expected_error: str,  # type: ignore[no-untyped-def]
) -> None:
    (tmp_path / "file.txt").write_text("not a directory")
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "kokoro-v1_0.pth").write_bytes(b"")
    code, _, stderr = tts_bench([a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == expected
    assert expected_error in stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
