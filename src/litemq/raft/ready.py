"""What the core hands the caller: :class:`Ready` (etcd ``Ready``).

The order in which the caller handles one is in :mod:`litemq.raft.node`; the node builds it
(``RaftNode.ready``) and forgets what it contained once acknowledged (``RaftNode.advance``).
"""

from __future__ import annotations

from dataclasses import dataclass

from litemq.raft.messages import Message
from litemq.raft.types import Entry, HardState, Snapshot, SoftState

__all__ = ["Ready"]


@dataclass(slots=True, eq=False)
class Ready:
    """Work for the caller; see :mod:`litemq.raft.node` for the order of handling."""

    hard_state: HardState | None
    """Persist before sending ``messages`` (``None``: unchanged since the last Ready)."""
    soft_state: SoftState | None
    """Role / leader / voters, when changed since the last Ready (publish, never persist)."""
    snapshot: Snapshot | None
    """Install first: discard the whole log; the log restarts at ``snapshot.offset + 1``."""
    truncate_to: int | None
    """Truncate the log to this log end offset (a conflicting suffix, paper §5.3) before
    appending ``entries``."""
    entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]
    """Apply in order, after persisting."""
    commit_index: int
    """Commit index after this Ready is handled (``high_watermark - 1``)."""
    must_sync: bool
    """True when something must be durable (fsynced) before ``messages`` are sent: log changes,
    or a new term or vote. A hard state that differs only in its commit index may be written
    lazily (like Kafka's high-watermark checkpoint): the commit index then restarts from the
    last durable value, which is safe."""

    @property
    def high_watermark(self) -> int:
        """Kafka high watermark (exclusive): first offset not known to be committed."""
        return self.commit_index + 1
