"""Planning: the pure arithmetic from measured artifacts to an autoscaling plan (SPEC §6).

Holds `plan` (`derive_plan` in named steps), `findings` (one builder per finding;
`qmax_confidence` the one over Q_max's interval), `curve` (measured curves between rungs),
`birth_death` (the surge simulation), `rounding`, `report` (the printed plan), `gate` (the plan
gate's selection; `custody.gate` adds the re-derivation the Pulumi program and the policy pack
apply) and `from_files` (load two artifacts, derive, write). `aws/` states AWS's scaling
engine (`aws.scaling`) and the readings of what AWS leaves open (`aws.semantics`); it imports
only `rounding` of the modules here. `schedule/` derives `plan --schedule`'s MinCapacity steps
from a day's per-minute rates (and the `ramp_rate` finding); it imports the modules here, they
never import it.

May import: `artifacts` and the top-level leaves. Never `aws`, `measure`, `infra`,
`local_cloud`, `simulate`, `jobs` or `cli`: a plan is arithmetic, testable without a cloud.
"""
