"""One sample of a soaked process: its RSS, open file descriptors, threads, child processes
(the whole tree below it) and the entries under its TMPDIR (recursively), read with psutil.

A connection the soak's own clients keep open (boto3's and http.client's keep-alive pools, an
idle WebSocket) holds a descriptor in the soaked process that is the client's to close, not a
leak: `client_fds` counts those, so the bound can be judged on the rest (`own_fds`). A
connection the client has closed and the server has not is no longer the client's, and counts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import psutil

MIB = 1024 * 1024
LOOPBACK = ("127.0.0.1", "::1")


def tmp_entries(folder: Path) -> int:
    """Files and folders under `folder`, at any depth (0 when it is gone)."""
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(folder))


def client_ports(pids: Iterable[int]) -> set[int]:
    """The local ports of the loopback TCP connections that the soak's client processes hold."""
    ports = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        ports |= {c.laddr.port for c in connections if c.raddr and c.laddr.ip in LOOPBACK}
    return ports


def process_figures(pid: int, tmpdir: Path, clients: set[int]) -> dict[str, float]:
    process = psutil.Process(pid)
    with process.oneshot():
        figures: dict[str, float] = {
            "rss_mib": process.memory_info().rss / MIB,
            "fds": process.num_fds(),
            "threads": process.num_threads(),
        }
    held = sum(
        1
        for c in process.net_connections(kind="tcp")
        if c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port in clients
    )
    figures["client_fds"] = held
    figures["own_fds"] = figures["fds"] - held
    children = process.children(recursive=True)
    figures["children"] = len(children)
    rss = 0
    for child in children:
        try:
            rss += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    figures["children_rss_mib"] = rss / MIB
    figures["tmp_entries"] = tmp_entries(tmpdir)
    return figures
