"""The live ladder on a SageMaker endpoint: preflight, freeze, Locust, the CloudWatch join.

What it holds: the run itself (`live_ladder`), the join of CloudWatch's per-instance metrics to
the client's windows (`cloudwatch_join`) and the verification rungs held once Q_max is known
(`verification`).

May import: the rest of `measure.ladder`, the shared modules at the top of `measure`,
`measure.transport`, and what `measure` may import.
"""
