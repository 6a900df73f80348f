"""Custody: every artifact checked against what it was made from, with the code that made it.

Holds `differences` (the one field-by-field comparison, its exemptions and tolerances),
`outcome` (what a check says), `folder` (artifacts found by sha256 in a measurements folder,
each checked once), `plans` (a plan re-derived from the qmax and ttotal it names and compared:
what the gate, the policy pack and `tts-bench verify` share), `ladders` (a qmax recomputed from
its raw samples, CPU readings and CloudWatch reads), `scale_outs` (a ttotal's stages from its
recorded events), `others` (surge runs from their samples, a simulation's input hashes, the GPU
summary from its two ladders), `references` (reference artifacts: the pinned files, an edited
one rebuilt from the published run to name the field), `pins` (legacy ladders accepted by
sha256), `gate` (the plan gate with custody: what the Pulumi program and the pack call) and
`stale` (artifacts made from a file a later run replaced).

May import: `artifacts`, `planning`, `measure` (the ladder's own statistics, not a copy) and
the top-level leaves. Never `aws`, `infra`, `local_cloud`, `simulate`, `jobs` or `cli`.
"""
