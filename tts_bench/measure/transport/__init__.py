"""The client side of each transport, and the one reader of the server's stream events.

What it holds: the reader of the newline-terminated JSON events every client parses
(`stream_events`), the endpoint contracts that name those events, build the requests and say
which answers are refusals (`contract`: kokoro, sonic3 or a file), how long a user refused
that way waits before its next request (`backoff`), SageMaker's
InvokeEndpointWithResponseStream (`response_stream`) and its bidirectional stream
(`bidi_stream`).

May import: what `measure` may import; nothing else of `measure` (everything measuring builds
on it).
"""
