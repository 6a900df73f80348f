"""The error hierarchy. Messages name the fix; the CLI prints them as one line."""


class TtsBenchError(Exception):
    """A user-facing failure. ``exit_code`` is what the CLI exits with (2: refusal/usage)."""

    exit_code = 2


class ArtifactError(TtsBenchError):
    """An artifact file is missing, unreadable, malformed, or would clobber another one."""


class RefusalError(TtsBenchError):
    """The inputs are valid but must not be combined (another SLO, another fingerprint, …)."""
