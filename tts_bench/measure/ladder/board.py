"""The ladder in Locust's web UI: the "Ladder" tab, and the start form's check.

The tab shows one row per rung or probe, live while held, final once judged. Rows are plain
dicts of formatted strings, keyed by the users held (`board_row`); the tab rides on Locust's
extended tables, whose rows come with each `/stats/requests` answer (`add_ladder_tab`). The
start form's values are checked before Locust starts anything (`check_start`): a refusal comes
back as the form's error, in the same one line a headless run exits with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

BOARD_TAB = "ladder"
BOARD_COLUMNS = (
    ("rung", "Rung"), ("users", "Users"), ("status", "Window / verdict"),
    ("ttfab_p95_ms", "p95 TTFAB (ms)"), ("rps", "Achieved rps"), ("in_flight", "In flight"),
    ("rtf_p50", "RTF p50"), ("rtf_p95", "RTF p95"), ("underrun_share", "Underrun %"),
    ("stall_ms_p95", "Stall p95 (ms)"), ("stable", "Stable"), ("hold_s", "Hold (s)"),
)  # fmt: skip


class Heard(Protocol):
    """Playback figures: a `Rung`'s or a live `PlaybackFigures`."""

    rtf_p50: float | None
    rtf_p95: float | None
    underrun_share: float | None
    stall_ms_p95: float | None


def board_row(
    label: str,
    users: int,
    status: str,
    ttfab_p95_ms: float | None,
    rps: float | None,
    in_flight: float,
    heard: Heard,
    stable: bool | None,
    hold: str = "-",
) -> dict[str, Any]:
    """One row of the tab (`hold`: the seconds the rung is held so far, extensions included)."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    return {
        "rung": label,
        "users": users,
        "status": status,
        "ttfab_p95_ms": fmt(ttfab_p95_ms, ".0f"),
        "rps": fmt(rps, ".2f"),
        "in_flight": fmt(in_flight, ".2f"),
        "rtf_p50": fmt(heard.rtf_p50, ".2f"),
        "rtf_p95": fmt(heard.rtf_p95, ".2f"),
        "underrun_share": fmt(
            None if heard.underrun_share is None else 100 * heard.underrun_share, ".0f"
        ),
        "stall_ms_p95": fmt(heard.stall_ms_p95, ".0f"),
        "stable": "-" if stable is None else ("yes" if stable else "no"),
        "hold_s": hold,
    }


def add_ladder_tab(web_ui: Any, rows: Callable[[], Mapping[int, dict[str, Any]]]) -> None:
    """A "Ladder" tab in Locust's web UI (`web_ui`: the environment's, None when headless)
    showing the rows of the ladder now running (`rows`: read at each refresh)."""
    if web_ui is None:
        return
    web_ui.template_args["extended_tabs"] = [{"title": "Ladder", "key": BOARD_TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": BOARD_TAB, "structure": [{"key": k, "title": t} for k, t in BOARD_COLUMNS]}
    ]

    @web_ui.app.after_request
    def add_board(response: Any) -> Any:
        from flask import request

        if request.path != "/stats/requests" or not response.is_json:
            return response
        extended = [{"key": BOARD_TAB, "data": list(rows().values())}]
        response.set_data(json.dumps({**response.get_json(), "extended_stats": extended}))
        return response


def check_start(web_ui: Any, refusal: Callable[[Mapping[str, str]], str | None]) -> None:
    """Before Locust's `/swarm` starts a test, `refusal(the form's values)`: a one-line reason
    not to start (shown as the start form's error, nothing started), or None."""
    if web_ui is None:
        return

    @web_ui.app.before_request
    def refuse(*_args: Any) -> Any:
        from flask import jsonify, request

        if not request.path.endswith("/swarm") or request.method != "POST":
            return None
        reason = refusal(request.form)
        if reason is None:
            return None
        return jsonify({"success": False, "message": reason, "host": request.form.get("host")})
