"""The data plane: the SageMaker runtime's wire, as boto3 and the AWS SDKs reach it.

What it holds: InvokeEndpoint and the response stream (`runtime`), with its event-stream frames
(`event_stream`) and error shapes (`wire_errors`); the bidirectional stream's HTTP/2 bridge
(`bidi_bridge`), the signed envelopes of its request side (`bidi_frames`), what a session holds
on its instance (`bidi_session`); and the loopback TLS it is served over (`tls`). It only
translates: the state lives in the backends of the other planes.

May import: the shared modules at the top of `local_cloud` (never `cloud`), `cloudwatch`,
`instances`, `control_plane`, and what `local_cloud` may import.
"""
