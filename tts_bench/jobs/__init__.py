"""Jobs: multi-step runs that string the chain together, such as the local main job.

Holds `local_run` (`tts-bench local-run`: serve, ladder, T_total, plan and plots on this
machine).

May import: every package of `tts_bench` except `cli`.
"""
