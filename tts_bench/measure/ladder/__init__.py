"""The ladder (Q_max): a closed loop of N users per rung, each rung judged against the SLO.

What it holds: the schedule (`schedule`) and each rung's statistics and the artifact
(`statistics`), a window's stability and hold extensions (`stability`), the confidence interval
on a rung's p95 (`quantile_interval`; an older ladder judged again with it,
`interval_reanalysis`), refinement's bisection (`refine`), the flags `tts-bench qmax` and the
Locust file share (`flags`), the control the Locust file runs (`conductor` waits, `run`
decides, `state` is what the shape reads, `store` merges samples, `board` is the web UI's tab),
CPU readings and CloudWatch reads of the raw record (`raw_record`) and the Locust child process
(`locust_child`). `live` runs the ladder on a SageMaker endpoint.

May import: the shared modules at the top of `measure` and `measure.transport`, and what
`measure` may import; never `measure.ttotal` or `measure.surge`.
"""
