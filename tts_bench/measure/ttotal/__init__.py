"""T_total: seconds from asking for one more instance to that instance serving healthy traffic.

What it holds: one probe (`probe`), one stage builder (`stages`), the recovery rule
(`recovery`), the endpoint's AWS calls (`aws`) and the instance quota (`quota`); measured
locally beside a server (`local`), on an endpoint forcing one more instance (`sagemaker`) or
letting its policy scale out on the probe's own load (`organic`).

May import: the shared modules at the top of `measure` (the open-loop sender among them) and
`measure.transport`, and what `measure` may import; never `measure.ladder` or `measure.surge`.
"""
