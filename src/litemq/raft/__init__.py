"""Pure Raft core (no asyncio, sockets, clocks, files or threads), in the style of etcd's raft.

See :mod:`litemq.raft.node` for the Ready contract and ``docs/raft.md`` for the design and
the modules (state in ``core``, the roles' step functions in ``step``, ``election``,
``follower``, ``candidate`` and ``leader``, progress in ``tracker``, the log in ``raft_log``
and ``unstable``).
"""

from litemq.raft.config import RaftConfig
from litemq.raft.errors import ConfigChangeInProgress, NotLeader, ProposalDropped, RaftError
from litemq.raft.log import EntrySeq, LogView, MemoryLog
from litemq.raft.messages import (
    Append,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    MessageType,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from litemq.raft.node import RaftNode
from litemq.raft.ready import Ready
from litemq.raft.types import (
    ConfState,
    Entry,
    EntryKind,
    HardState,
    Role,
    Snapshot,
    SoftState,
    decode_config,
    decode_voters,
    encode_config,
    encode_voters,
)

__all__ = [
    "Append",
    "AppendResponse",
    "ConfState",
    "ConfigChangeInProgress",
    "Entry",
    "EntryKind",
    "EntrySeq",
    "HardState",
    "Heartbeat",
    "HeartbeatResponse",
    "InstallSnapshot",
    "LogView",
    "MemoryLog",
    "Message",
    "MessageType",
    "NotLeader",
    "ProposalDropped",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "Ready",
    "Role",
    "Snapshot",
    "SoftState",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
    "decode_config",
    "decode_voters",
    "encode_config",
    "encode_voters",
]
