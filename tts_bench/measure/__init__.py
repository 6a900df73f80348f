"""Measure: taking the figures a plan is built from, and drawing them.

What it holds, by measurement:
- the ladder (Q_max): its schedule and statistics (`ladder`), raw samples (`samples`) and the
  rest of its raw record, CPU readings and CloudWatch reads (`raw_record`), the
  request corpus (`corpus`), the flags `tts-bench qmax` and the Locust file share
  (`ladder_flags`), the control the Locust file runs (`ladder_conductor` waits, `ladder_run`
  decides, `ladder_state` is what the shape reads, `ladder_store` merges samples,
  `ladder_board` is the web UI's tab), a window's stability and hold extensions (`stability`),
  the confidence interval on a rung's p95 (`quantile_interval`; an older ladder judged again
  with it, `interval_reanalysis`), refinement's bisection (`refine`), what a listener hears (`playback`), the Locust child
  process (`ladder_locust`), the live ladder on an endpoint (`live_ladder`, with
  `sagemaker_target`, `cloudwatch_join` and the `verification` rungs);
- the client side of every transport: the one reader of the server's stream events
  (`stream_events`), response-stream (`response_stream`) and bidi-stream (`bidi_stream`);
- T_total: one probe (`ttotal_probe`), one stage builder (`ttotal_stages`), the recovery rule
  (`ttotal_recovery`), the endpoint's AWS calls (`ttotal_aws`) and the instance quota
  (`quota`); locally beside a server (`ttotal_local`), on an endpoint forcing one more instance
  (`ttotal_sagemaker`) or letting its policy scale out on the probe's own load (`ttotal_organic`);
- the surge: open-loop runs (`surge_run`) and their figures beside the model (`surge_figures`);
- the plots (`plots`) and the GPU benchmark summary (`gpu_summary`).

May import: `artifacts`, `planning`, `aws` (a live ladder freezes scaling), `serving` (a local
server to measure) and the top-level leaves. Never `infra`, `local_cloud`, `simulate`, `jobs`
or `cli`.
"""
