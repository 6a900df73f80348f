"""AWS: the one boto3 layer and the control-plane rules built on it.

Holds the session with retries and connection reuse (`session`), the snapshot of what is
deployed (`deployed`), freeze/restore/thaw of scaling (`freeze`), the `drift` and
`validate` rules that compare what is deployed with the stack config and the plan, the
`clock` AWS timestamps are read in (a compressed local cloud's virtual time), a variant's scaling
read back live against its plan (`live_scaling`) and what it did while load ran
(`scaling_record`: polled counts, datapoints, alarm history, scaling activities).

May import: `artifacts`, `planning` and the top-level leaves. Never `measure`, `infra`,
`local_cloud`, `simulate`, `jobs` or `cli`.
"""
