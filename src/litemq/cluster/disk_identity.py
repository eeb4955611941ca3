"""Is this broker's data dir a replaced disk? (issue 20, "Storage identity"; KIP-853 names a
voter by node id *and* directory id, so a new directory is a new voter.)

A broker whose ``meta.properties`` was written at this start (an empty data dir: a new
``directory.id``) asks the other metadata voters for their status. If one of them has this
node id registered with another directory id, the disk was replaced: every Raft group on it
(the metadata group and every partition) starts *recovering*
(:class:`~litemq.raft.node.RaftNode` ``recovering=True``: no vote, no campaign until caught up).
A first start of a new cluster finds no such registration and starts as usual.

The answer is kept in ``DATA_DIR/replaced-disk`` until the metadata group has caught up and
applied what it held then (every partition the old disk had is open by then, each with its
own ``recovering`` in its Raft state file), so a restart in between stays recovering.
Limits: peers unreachable at the start (all of them down) are taken as "no registration".
Blocking I/O: call from an executor thread.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from litemq.cluster.codec import rpc_call

log = logging.getLogger(__name__)

__all__ = ["REPLACED_DISK_FILE", "clear_replaced_disk", "detect_replaced_disk"]

REPLACED_DISK_FILE = "replaced-disk"
PEER_STATUS_TIMEOUT_S = 2.0
"""Bound on each peer's status answer at start (peers are asked in parallel)."""


def _registered_directory(peer: tuple[str, int], node_id: int, ssl_context) -> str | None:
    try:
        status = rpc_call(peer[0], peer[1], {"op": "status"}, timeout_s=PEER_STATUS_TIMEOUT_S,
                          ssl_context=ssl_context)
    except Exception as exc:  # a peer down or refusing: it knows nothing we can use
        log.debug("status of %s:%d at start: %s", peer[0], peer[1], exc)
        return None
    for b in status.get("brokers") or ():
        if isinstance(b, dict) and b.get("node_id") == node_id and b.get("directory_id"):
            return str(b["directory_id"])
    return None


def detect_replaced_disk(data_dir: Path, node_id: int, directory_id: str, created: bool,
                         peers: dict[int, tuple[str, int]], ssl_context=None) -> bool:
    """True when the data dir is a replaced disk (see the module docstring): the marker file
    is there, or ``created`` and a peer has ``node_id`` registered with another directory id
    (the marker is then written, fsynced). ``peers``: node id -> (host, RPC port)."""
    marker = Path(data_dir) / REPLACED_DISK_FILE
    if marker.exists():
        return True
    others = [addr for n, addr in sorted(peers.items()) if n != node_id]
    if not created or not others:
        return False
    with ThreadPoolExecutor(max_workers=len(others)) as pool:
        registered = list(pool.map(lambda p: _registered_directory(p, node_id, ssl_context), others))
    old = next((d for d in registered if d and d != directory_id), None)
    if old is None:
        return False
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"old.directory.id={old}\nnew.directory.id={directory_id}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning("data dir %s is new (directory.id %s) but the cluster has broker %d with directory.id %s: a "
                "replaced disk; its Raft groups recover (no vote until caught up)", data_dir, directory_id,
                node_id, old)
    return True


def clear_replaced_disk(data_dir: Path) -> None:
    """Remove the marker (the metadata group caught up; partition groups keep their own state)."""
    try:
        os.unlink(Path(data_dir) / REPLACED_DISK_FILE)
    except FileNotFoundError:
        pass
