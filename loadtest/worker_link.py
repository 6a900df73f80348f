"""How a distributed ladder's master and workers stay in touch when the load generator is busy.

Locust's master calls a worker missing after about four seconds without a heartbeat, and a test
whose last worker goes missing stops at once: the ladder then writes nothing, losing every rung
it held. A worker is silent that long without being dead when its host is saturated, which is
where a ladder runs often enough: beside the server on one machine, or a worker host near its
own limit. The CI failure this answers (stop 50): a master on a loaded 2-core machine stopped a
c=1 rung five seconds in, "The last worker went missing", with the worker still alive.

Two things stretch such a silence, and both are set here before any runner exists:
- how many heartbeats the master waits for, and
- how long a greenlet waiting on Locust's zmq socket sleeps when the socket's wake-up signal is
  lost. pyzmq's gevent socket keeps a fallback timeout for that case (libzmq's edge-triggered
  descriptor and the event loop do not always agree), 11.6 s by default: a message from the
  master (the rung now held) or from a worker (its heartbeat) could wait that long unread.
  A lost wake-up was not reproduced here (56 distributed runs beside CPU burners and the
  engine's tests); the shorter fallback bounds it if it happens, at the cost of a few idle
  wake-ups.
"""

from __future__ import annotations

import locust.runners
import zmq.green.core

# Heartbeats (one a second) the master misses before it calls a worker missing: 15 s of
# silence, beyond zmq.green's own fallback, and still soon enough to stop a test whose worker
# died (Locust's default is 3, about 4 s).
HEARTBEATS_MISSED_BEFORE_MISSING = 15
# The longest a greenlet waits on a zmq socket for a wake-up that may have been lost.
ZMQ_WAKE_UP_S = 0.5


def tolerate_busy_workers() -> None:
    """Widen Locust's heartbeat tolerance and shorten zmq.green's lost-wake-up fallback."""
    # Locust reads the module constant each time a heartbeat arrives or a worker registers;
    # its maintainers point to this assignment as the way to change it.
    locust.runners.HEARTBEAT_LIVENESS = HEARTBEATS_MISSED_BEFORE_MISSING
    green_socket = zmq.green.core._Socket
    if hasattr(green_socket, "_gevent_bug_timeout"):  # private: a test checks it is still taken
        green_socket._gevent_bug_timeout = ZMQ_WAKE_UP_S
