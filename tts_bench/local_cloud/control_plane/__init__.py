"""The control plane: moto, and what it leaves to the local cloud.

What it holds: moto in this process (`moto_host`), behind `moto_guard`, which refuses malformed
calls as AWS would; the endpoint's state where moto stands still (`endpoint`: creating,
updating, the desired count and the fleet that follows it); `deploy`, which creates what the
Pulumi program records for a stack; and the Service Quotas answer (`quotas`).

May import: the shared modules at the top of `local_cloud` (never `cloud`), `cloudwatch`,
`instances`, and what `local_cloud` may import; never `data_plane`.
"""
