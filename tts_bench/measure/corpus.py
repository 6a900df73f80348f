"""The ladder's request corpus: short utterances, each with its language and voice.

A corpus file is UTF-8 text, one utterance per line. Blank lines and `#` comments are
skipped, except the directives `# language: <code>` and `# voice: <id>`, which apply to the
lines after them. The language must be set before the first utterance; the voice defaults to
`jf_alpha` (the offline weights ship only Japanese voices, and they speak English too).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tts_bench.errors import TtsBenchError

DEFAULT_VOICE = "jf_alpha"
# The shipped English corpus, what every command reads when no --corpus is given.
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "loadtest" / "corpus" / "en.txt"
_DIRECTIVE = re.compile(r"^#\s*(language|voice)\s*:\s*(\S+)\s*$")


class CorpusError(TtsBenchError):
    """A corpus file that cannot be read or has no usable utterance."""


@dataclass(frozen=True, slots=True)
class Utterance:
    transcript: str
    language: str
    voice: str = DEFAULT_VOICE

    def request(self, context_id: str) -> dict[str, object]:
        """The `/invocations` request body (contracts.md) for this utterance."""
        return {
            "context_id": context_id,
            "transcript": self.transcript,
            "language": self.language,
            "voice": {"mode": "id", "id": self.voice},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        }


def parse_corpus(text: str, source: str = "<corpus>") -> tuple[Utterance, ...]:
    language: str | None = None
    voice = DEFAULT_VOICE
    out: list[Utterance] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            match = _DIRECTIVE.match(line)
            if match and match.group(1) == "language":
                language = match.group(2)
            elif match:
                voice = match.group(2)
            continue
        if language is None:
            raise CorpusError(
                f"{source}:{number}: utterance before any '# language: <code>' line; "
                "add one at the top"
            )
        out.append(Utterance(line, language, voice))
    if not out:
        raise CorpusError(f"{source}: no utterances (one per line, after '# language: <code>')")
    return tuple(out)


def load_corpus(path: str | os.PathLike[str]) -> tuple[Utterance, ...]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"--corpus {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"--corpus {path}: cannot read: {exc}") from None
    return parse_corpus(text, str(path))


def corpus_path(given: str | os.PathLike[str] | None) -> Path:
    """The corpus a `--corpus` flag names, or the shipped one when it names none."""
    return DEFAULT_CORPUS if given is None else Path(given)
