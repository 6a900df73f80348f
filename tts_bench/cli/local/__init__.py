"""The server, its weights and the main job, on this machine: the subcommand modules `serve`, `synth`, `weights`, `local_run`, `local_cloud`.

Each exposes ``register(subparsers)``; `tts_bench.cli` imports only the chosen one. May import:
every part of `tts_bench` and the option helpers at the top of `cli`; never another subcommand
module (what two share belongs in a helper or the library).
"""
