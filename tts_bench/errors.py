"""The error hierarchy. Messages name the fix; the CLI prints them as one line."""


class TtsBenchError(Exception):
    """A user-facing failure. ``exit_code`` is what the CLI exits with (2: refusal/usage)."""

    exit_code = 2


class ArtifactError(TtsBenchError):
    """An artifact file is missing, unreadable, malformed, or would clobber another one."""


class RefusalError(TtsBenchError):
    """The inputs are valid but must not be combined (another SLO, another fingerprint, …)."""


def printable(text: str) -> str:
    """`text` as one line any terminal can print: a lone surrogate or another character UTF-8
    cannot encode becomes its escape (`\\udc80`), and so does a line break or control character,
    so a refusal that quotes hostile input never fails to print, nor spills onto a second line."""
    encodable = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in encodable
    )
