"""Jobs: multi-step runs that string the chain together.

Holds the main job (`main_job`: `tts-bench local-run`, the whole chain on this machine), its
two targets: the local cloud (`local_cloud_run`, the default) and a local server process
(`local_run`, `--in-process`), and its last step on the local cloud, a short rehearsal of the
plan it made on curve instances (`short_rehearsal`); both drive a local cloud through this
process's environment (`aws_environment`).

May import: every package of `tts_bench` except `cli`.
"""
