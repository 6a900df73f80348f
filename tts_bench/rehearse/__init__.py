"""Rehearsal: a plan's deployed policy scaling open-loop traffic sent with the real AWS clients,
replayed beside it in the simulator (SPEC §13, `tts-bench rehearse`).

Holds `arrivals` (the traffic as the rehearsal sends it: a synthetic spec or a trace, thinned by
what one request stands for on a slowed, compressed local cloud), `endpoint` (the endpoint's
deployed scaling read back and the refusals before anything is sent), `recorder` (the endpoint
polled while the traffic runs, then CloudWatch's datapoints, the alarm history and the scaling
activities read back), `replay` (the same arrivals through the simulator's own fleet, controller
and AWS rules), `agreement` (desired counts per minute, shed shares and detection lags of both
runs), `plot`, and `run` (the command's one path: load, refuse, send, record, replay, write).

May import: `artifacts`, `planning`, `aws`, `measure`, `simulate` and the top-level leaves.
"""
