"""Rehearsal: a plan's deployed policy scaling open-loop traffic sent with the real AWS clients,
replayed beside it in the simulator (SPEC §13, `tts-bench rehearse`).

Holds `arrivals` (the traffic as the rehearsal sends it: a synthetic spec or a trace, thinned by
what one request stands for on a slowed, compressed local cloud), `endpoint` (the endpoint's
build, deployed scaling and clock, read and checked before anything is sent; the scaling's own
reading and its record while traffic runs are `aws.live_scaling` and `aws.scaling_record`),
`replay` (the same arrivals through the simulator's own fleet, controller and AWS rules),
`runs` (both runs as the artifact records them), `agreement` (desired counts per minute, shed
shares and detection lags of both runs), `plot`, and `run` (the command's one path: load,
refuse, send, record, replay, write).

May import: `artifacts`, `planning`, `aws`, `measure`, `simulate` and the top-level leaves.
"""
