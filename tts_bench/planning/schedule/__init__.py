"""The schedule from the day (`plan --schedule`, issue 37): MinCapacity steps that hold capacity a
planned T_total ahead of the ramps the reactive rule cannot follow.

Holds `day` (the day's per-minute needs at λ_out, which minutes the reactive rule cannot follow,
and their hash), `steps` (the needs merged into few scheduled actions), `ramp` (the `ramp_rate`
finding) and `attach` (the schedule recorded in a plan, its finding and its id). Pure arithmetic
over a per-minute rate list, so `verify` and the gate re-derive a schedule from the rates the plan
records, without the simulator.

May import: `artifacts`, the top-level leaves, and of `planning` its top-level modules
(`findings`, `traffic_check`, `rounding`) and `aws` (which periods a cron can repeat); nothing
of `planning` imports this but through `custody`, `simulate` and `cli`.
"""
