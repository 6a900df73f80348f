"""Custody, and the checks of the plan's models against runs, replays and rehearsals: the subcommand modules `verify`, `surge`, `simulate`, `rehearse`.

Each exposes ``register(subparsers)``; `tts_bench.cli` imports only the chosen one. May import:
every part of `tts_bench` and the option helpers at the top of `cli`; never another subcommand
module (what two share belongs in a helper or the library).
"""
