"""Serving: a local `python -m tts_server` process and its `/ping`, for whoever needs one.

Holds the launcher (`local_server`: start, read the JSON log, wait for ready, stop) and the
`/ping` reader (`server_ping`: readiness, admission bound, fingerprint). The measuring code
starts servers to measure them; the local cloud starts them as its instances; neither owns
the launcher, so it sits below both.

May import: `artifacts` and the top-level leaves. Never `measure`, `local_cloud` or anything
above them.
"""
