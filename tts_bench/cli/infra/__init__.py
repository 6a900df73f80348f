"""The infrastructure: the Pulumi program previewed under its policy pack, and the image: the subcommand modules `preview`, `image`.

Each exposes ``register(subparsers)``; `tts_bench.cli` imports only the chosen one. May import:
every part of `tts_bench` and the option helpers at the top of `cli`; never another subcommand
module (what two share belongs in a helper or the library).
"""
