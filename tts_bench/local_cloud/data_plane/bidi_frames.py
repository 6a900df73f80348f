"""The AWS SDK's signed envelopes on the bidirectional stream's request side.

The SDK's HTTP/2 client sends each request event wrapped in a signed envelope (headers `:date`
and `:chunk-signature`, the encoded event as payload) and ends its input with an envelope whose
payload is empty. The frames themselves are `event_stream`'s. Pure: no I/O.
"""

from __future__ import annotations

from tts_bench.local_cloud.data_plane.event_stream import FrameError, Message, MessageDecoder

SIGNATURE_HEADER = ":chunk-signature"
DATE_HEADER = ":date"


def unwrap_signed(envelope: Message) -> Message | None:
    """The event inside a signed envelope; None for the empty envelope that ends the input."""
    missing = [h for h in (SIGNATURE_HEADER, DATE_HEADER) if h not in envelope.headers]
    if missing:
        raise FrameError(f"an unsigned event (no {', '.join(missing)} header)")
    if not envelope.payload:
        return None
    inner = list(MessageDecoder().feed(envelope.payload))
    if len(inner) != 1:
        raise FrameError(f"a signed envelope holds {len(inner)} events, not one")
    return inner[0]
