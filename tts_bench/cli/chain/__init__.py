"""The measurement chain against an endpoint, in the order it runs: the subcommand modules `drift`, `thaw`, `qmax`, `ttotal`, `plan`, `validate`, `report`, `interval`, `import_reference`.

Each exposes ``register(subparsers)``; `tts_bench.cli` imports only the chosen one. May import:
every part of `tts_bench` and the option helpers at the top of `cli`; never another subcommand
module (what two share belongs in a helper or the library).
"""
