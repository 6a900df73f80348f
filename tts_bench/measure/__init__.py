"""Measure: taking the figures a plan is built from, and drawing them.

Holds the ladder's schedule and statistics (`ladder`), raw samples (`samples`), the request
corpus (`corpus`), the Locust side of the ladder (`ladder_locust`), a local server process and
its `/ping` (`local_server`, `server_ping`), local T_total (`ttotal_local`), the plots
(`plots`) and the GPU benchmark summary (`gpu_summary`).

May import: `artifacts`, `planning`, `aws` (a live ladder freezes scaling) and the top-level
leaves. Never `infra`, `local_cloud`, `simulate`, `jobs` or `cli`.
"""
