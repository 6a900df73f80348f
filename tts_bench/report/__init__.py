"""The run's report: one self-contained HTML page over a run's artifacts (`tts-bench report
--html`, and the main job's last step).

- `page`: HTML primitives: escaping (every string taken from an artifact goes through `esc`),
  tables, figures embedded as data URIs, the page with its inline CSS and a content policy
  that lets it load nothing;
- `sections`: one section per kind of artifact (ladder, T_total, plan, surge, simulation,
  rehearsal) and the provenance of every file; `plan_tables` the plan part's tables of what
  `plan --traffic` and `--schedule` added (× oracle, the scheduled actions);
- `build`: reads the artifacts, draws the plots `measure.plots` draws, and writes the page.

May import: `artifacts`, `planning` (the plan as `tts-bench plan` prints it), `measure` (its
plots) and the leaves. Nothing here reads the network.
"""
