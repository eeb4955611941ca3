"""Binary wire codec of broker-to-broker traffic: frames, hello, batched Raft messages, JSON RPC.

One TCP connection per broker pair carries the :mod:`litemq.raft` messages of every Raft group
the two brokers share (the RPCs of Ongaro & Ousterhout 2014, Figure 2, with the additions of
Ongaro's thesis: pre-vote §9.6, leadership transfer §3.10, InstallSnapshot §5.3; see
:mod:`litemq.raft.messages`), plus small JSON requests between brokers and from tools. The
messages are self-contained, so the sender may batch messages of many groups into one frame.

Everything is big-endian and fixed-width (``struct``). Sans-I/O, except :func:`rpc_call`.

Frame (every frame on the connection)::

    ======== ========== ====================================================================
    bytes    type       field
    ======== ========== ====================================================================
    4        u32        length of what follows (kind + body), 1 .. limits.MAX_RPC_FRAME_BYTES
    1        u8         kind: FRAME_HELLO 1, FRAME_RAFT 2, FRAME_RPC_REQUEST 3,
                        FRAME_RPC_RESPONSE 4
    length-1 bytes      body, by kind (below)
    ======== ========== ====================================================================

Bodies::

    ==================== ===================================================================
    FRAME_HELLO          u8 wire version (4), i32 node id (-1: a tool such as the CLI),
                         u16 length + UTF-8 cluster id ("" from a tool)
    FRAME_RAFT           u32 message count, then per message: u16 length + UTF-8 group id,
                         then the message (below)
    FRAME_RPC_REQUEST    i32 correlation id, then a UTF-8 JSON object
    FRAME_RPC_RESPONSE   i32 correlation id, then a UTF-8 JSON object
    ==================== ===================================================================

Raft message: u8 ``MessageType``, i32 src, i32 dst, i64 term, then the fields of its dataclass
in declaration order::

    ==================== ===================================================================
    VoteRequest          i64 last_offset, i64 last_term, u8 pre_vote, u8 transfer
    VoteResponse         u8 granted, u8 pre_vote
    Append               i64 prev_offset, i64 prev_term, entries, i64 commit_index,
                         i64 log_start_offset
    AppendResponse       u8 success, i64 match_offset, i64 reject_offset, i64 hint_offset,
                         i64 hint_term, u8 log_lost, i64 log_start_offset
    Heartbeat            i64 commit_index, i64 log_start_offset
    HeartbeatResponse    i64 log_start_offset
    InstallSnapshot      snapshot
    TimeoutNow           (nothing)
    ==================== ===================================================================

    entries   u32 count, then per entry: i64 offset, i64 term, i32 count (>= 1),
              u8 EntryKind, u32 payload length + payload
    snapshot  i64 offset, i64 term, i32 voter count (-1: None) + i32 voter ids (sorted),
              i32 learner count + i32 learner ids (sorted; 0 when voters are None),
              i32 data length (-1: None) + data

Bools are u8 0 or 1. Entry payloads and snapshot data are emitted as parts of their own (never
copied into a bigger buffer; the caller hands the list to ``transport.writelines``) and are
decoded as ``bytes``.

Decoding is strict, since the input comes from the network: every count and length is checked
against the bytes left and against :mod:`litemq.limits` before anything is allocated, and any
malformed input (truncation, trailing bytes, unknown message type or entry kind, bad bool,
invalid UTF-8, too many voters, ...) raises :class:`CodecError`, never ``struct.error`` or
``IndexError``. The encoders check the same limits, so a frame that the peer would refuse is
refused at the sender.
"""

from __future__ import annotations

import json
import socket
import struct
import time

from litemq import limits
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
from litemq.raft.types import Entry, EntryKind, Snapshot

__all__ = [
    "FRAME_HELLO",
    "FRAME_RAFT",
    "FRAME_RPC_REQUEST",
    "FRAME_RPC_RESPONSE",
    "WIRE_VERSION",
    "CodecError",
    "FrameDecoder",
    "decode_hello",
    "decode_raft_batch",
    "decode_rpc",
    "encode_frame",
    "encode_hello",
    "encode_raft_batch",
    "encode_rpc",
    "rpc_call",
]

FRAME_HELLO, FRAME_RAFT, FRAME_RPC_REQUEST, FRAME_RPC_RESPONSE = 1, 2, 3, 4

WIRE_VERSION = 4
"""Version byte of FRAME_HELLO; a peer speaking another version is refused (3: snapshots carry
the learners of the configuration; 4: AppendResponse and HeartbeatResponse carry the follower's
log start offset)."""


class CodecError(ValueError):
    """Malformed input (or a value this codec cannot represent); the message says what."""


_FRAME_HEADER = struct.Struct(">IB")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64x2 = struct.Struct(">qq")
_HELLO = struct.Struct(">Bi")
_MSG_HEADER = struct.Struct(">Biiq")  # type, src, dst, term
_VOTE = struct.Struct(">qqBB")
_VOTE_RESPONSE = struct.Struct(">BB")
_APPEND_HEAD = struct.Struct(">qqI")  # prev_offset, prev_term, entry count
_ENTRY = struct.Struct(">qqiBI")  # offset, term, count, kind, payload length
_APPEND_RESPONSE = struct.Struct(">BqqqqBq")
_SNAPSHOT_HEAD = struct.Struct(">qqi")  # offset, term, voter count

_ENTRY_KINDS = {k.value: k for k in EntryKind}

_MIN_MESSAGE_BYTES = _U16.size + _MSG_HEADER.size
"""Smallest encoded (group id, message) pair: empty group id, message without fields."""


def _nbytes(buf) -> int:
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)


def _byte_view(body) -> memoryview:
    """``body`` as a flat unsigned-byte memoryview (CodecError if it is not bytes-like)."""
    try:
        view = body if isinstance(body, memoryview) else memoryview(body)
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")
    except TypeError:
        raise CodecError(f"not a contiguous bytes-like object: {type(body).__name__}") from None


# ------------------------------------------------------------------ frames
def encode_frame(kind: int, parts: list) -> list:
    """-> ``[header, *parts]``: header is the u32 length of kind + body, then the u8 kind.

    The parts (bytes, bytearray or memoryview) are not copied: hand the list to
    ``transport.writelines`` (or ``b"".join`` it). Raises CodecError if the frame would exceed
    ``limits.MAX_RPC_FRAME_BYTES`` or ``kind`` is not a byte.
    """
    length = 1 + sum(_nbytes(p) for p in parts)
    if length > limits.MAX_RPC_FRAME_BYTES:
        raise CodecError(f"frame of {length} bytes exceeds limits.MAX_RPC_FRAME_BYTES")
    if not 0 <= kind <= 255:
        raise CodecError(f"frame kind {kind} is not a byte")
    return [_FRAME_HEADER.pack(length, kind), *parts]


class FrameDecoder:
    """Incremental frame splitter: ``feed(data) -> [(kind, body), ...]`` of the frames completed.

    Bodies are read-only memoryviews that stay valid after later feeds. Frames of any kind are
    returned (the caller decides what an unknown kind means). Raises CodecError if a frame
    length is 0 or exceeds ``limits.MAX_RPC_FRAME_BYTES`` (checked as soon as the 4 length
    bytes arrive); the decoder is then broken and every later feed raises again.
    """

    __slots__ = ("_buf", "_need", "_error")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need = _U32.size  # bytes _buf must hold before it is worth parsing
        self._error: CodecError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buf)

    def feed(self, data) -> list[tuple[int, memoryview]]:
        if self._error is not None:
            raise self._error
        if not data:
            return []
        if self._buf:
            self._buf += data
            if len(self._buf) < self._need:
                return []
            # the filled buffer becomes the frames' storage (read-only views below) and a new
            # one takes its place: no copy of the completed frame(s)
            src, self._buf = self._buf, bytearray()
        else:
            src = data if isinstance(data, bytes) else bytes(data)
        view = memoryview(src).toreadonly()
        end = len(src)
        pos = 0
        frames: list[tuple[int, memoryview]] = []
        need = _U32.size
        while end - pos >= _U32.size:
            (length,) = _U32.unpack_from(src, pos)
            if length == 0 or length > limits.MAX_RPC_FRAME_BYTES:
                self._buf.clear()
                self._error = CodecError(f"frame length {length} is not in 1 .. limits.MAX_RPC_FRAME_BYTES")
                raise self._error
            if end - pos - _U32.size < length:
                need = _U32.size + length
                break
            frames.append((src[pos + 4], view[pos + 5 : pos + 4 + length]))
            pos += 4 + length
        if pos < end:
            self._buf += view[pos:]
        self._need = need
        return frames


# ------------------------------------------------------------------ reading helper
class _Reader:
    """Bounds-checked cursor over a body; every failure is a CodecError."""

    __slots__ = ("view", "pos", "end", "what")

    def __init__(self, body, what: str) -> None:
        self.view = _byte_view(body)
        self.pos = 0
        self.end = len(self.view)
        self.what = what

    def left(self) -> int:
        return self.end - self.pos

    def unpack(self, st: struct.Struct, field: str) -> tuple:
        if self.end - self.pos < st.size:
            left = self.end - self.pos
            raise CodecError(f"{self.what}: truncated: {field} needs {st.size} bytes, {left} left")
        values = st.unpack_from(self.view, self.pos)
        self.pos += st.size
        return values

    def take(self, n: int, field: str) -> memoryview:
        if n > self.end - self.pos:
            left = self.end - self.pos
            raise CodecError(f"{self.what}: {field} of {n} bytes at {self.pos}, only {left} bytes left")
        out = self.view[self.pos : self.pos + n]
        self.pos += n
        return out

    def text(self, n: int, field: str) -> str:
        raw = self.take(n, field)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise CodecError(f"{self.what}: {field} is not valid UTF-8") from None

    def done(self) -> None:
        if self.pos != self.end:
            raise CodecError(f"{self.what}: {self.end - self.pos} trailing bytes after offset {self.pos}")


def _bool(value: int, field: str) -> bool:
    if value > 1:
        raise CodecError(f"{field}: bool byte {value} is neither 0 nor 1")
    return value == 1


# ------------------------------------------------------------------ hello
def encode_hello(node_id: int, cluster_id: str) -> bytes:
    """Body of a FRAME_HELLO: who is calling (``node_id`` -1 for a tool) and for which cluster."""
    if node_id < -1:
        raise CodecError(f"hello: node id {node_id} < -1")
    cid = _encode_text(cluster_id, limits.MAX_CLUSTER_ID_BYTES, "cluster id")
    try:
        return _HELLO.pack(WIRE_VERSION, node_id) + _U16.pack(len(cid)) + cid
    except struct.error as exc:
        raise CodecError(f"hello: {exc}") from None


def decode_hello(body) -> tuple[int, str]:
    """FRAME_HELLO body -> ``(node_id, cluster_id)``."""
    r = _Reader(body, "hello")
    version, node_id = r.unpack(_HELLO, "version and node id")
    if version != WIRE_VERSION:
        raise CodecError(f"hello: unsupported wire version {version} (this broker speaks {WIRE_VERSION})")
    if node_id < -1:
        raise CodecError(f"hello: node id {node_id} < -1")
    (n,) = r.unpack(_U16, "cluster id length")
    if n > limits.MAX_CLUSTER_ID_BYTES:
        raise CodecError(f"hello: cluster id of {n} bytes exceeds limits.MAX_CLUSTER_ID_BYTES")
    cluster_id = r.text(n, "cluster id")
    r.done()
    return node_id, cluster_id


def _encode_text(text: str, max_bytes: int, field: str) -> bytes:
    try:
        raw = text.encode("utf-8")
    except (UnicodeEncodeError, AttributeError) as exc:
        raise CodecError(f"{field} {text!r} cannot be encoded as UTF-8: {exc}") from None
    if len(raw) > max_bytes:
        raise CodecError(f"{field} of {len(raw)} bytes exceeds the limit of {max_bytes}")
    return raw


# ------------------------------------------------------------------ raft batch
class _Parts:
    """Small fields accumulate in ``buf``; payloads become parts of their own."""

    __slots__ = ("parts", "buf")

    def __init__(self) -> None:
        self.parts: list = []
        self.buf = bytearray()

    def blob(self, data) -> None:
        if self.buf:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        self.parts.append(data)

    def finish(self) -> list:
        if self.buf:
            self.parts.append(bytes(self.buf))
        return self.parts


def _payload(data, field: str):
    """-> ``(bytes-like part, length)`` for a payload or snapshot data (no copy)."""
    if isinstance(data, (bytes, bytearray)):
        return data, len(data)
    if isinstance(data, memoryview):
        view = _byte_view(data)
        return view, len(view)
    raise CodecError(f"{field} must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _encode_entries(out: _Parts, entries) -> None:
    for e in entries:
        if e.count < 1:
            raise CodecError(f"entry at offset {e.offset}: count {e.count} < 1")
        try:
            kind = EntryKind(e.kind)
        except ValueError:
            raise CodecError(f"entry at offset {e.offset}: unknown kind {e.kind!r}") from None
        data, n = _payload(e.payload, "entry payload")
        out.buf += _ENTRY.pack(e.offset, e.term, e.count, kind, n)
        if n:
            out.blob(data)


def _encode_snapshot(out: _Parts, s: Snapshot) -> None:
    if s.voters is None:
        out.buf += _SNAPSHOT_HEAD.pack(s.offset, s.term, -1)
        out.buf += _I32.pack(0)
    else:
        ids = sorted(s.voters)
        learners = sorted(s.learners)
        if len(ids) > limits.RAFT_MAX_VOTERS or len(learners) > limits.RAFT_MAX_VOTERS:
            raise CodecError(f"snapshot: {len(ids)} voters or {len(learners)} learners exceed limits.RAFT_MAX_VOTERS")
        out.buf += _SNAPSHOT_HEAD.pack(s.offset, s.term, len(ids))
        out.buf += struct.pack(f">{len(ids)}i", *ids)
        out.buf += _I32.pack(len(learners))
        out.buf += struct.pack(f">{len(learners)}i", *learners)
    if s.data is None:
        out.buf += _I32.pack(-1)
    else:
        data, n = _payload(s.data, "snapshot data")
        out.buf += _I32.pack(n)
        if n:
            out.blob(data)


def _encode_message(out: _Parts, m) -> None:
    t = type(m)
    out.buf += _MSG_HEADER.pack(t.type, m.src, m.dst, m.term)
    if t is Heartbeat:
        out.buf += _I64x2.pack(m.commit_index, m.log_start_offset)
    elif t is AppendResponse:
        out.buf += _APPEND_RESPONSE.pack(
            bool(m.success), m.match_offset, m.reject_offset, m.hint_offset, m.hint_term, bool(m.log_lost),
            m.log_start_offset,
        )
    elif t is HeartbeatResponse:
        out.buf += _I64.pack(m.log_start_offset)
    elif t is Append:
        out.buf += _APPEND_HEAD.pack(m.prev_offset, m.prev_term, len(m.entries))
        _encode_entries(out, m.entries)
        out.buf += _I64x2.pack(m.commit_index, m.log_start_offset)
    elif t is VoteRequest:
        out.buf += _VOTE.pack(m.last_offset, m.last_term, bool(m.pre_vote), bool(m.transfer))
    elif t is VoteResponse:
        out.buf += _VOTE_RESPONSE.pack(bool(m.granted), bool(m.pre_vote))
    elif t is InstallSnapshot:
        _encode_snapshot(out, m.snapshot)
    # TimeoutNow has no fields of its own


_ENCODABLE = frozenset(
    {
        Append,
        AppendResponse,
        Heartbeat,
        HeartbeatResponse,
        InstallSnapshot,
        TimeoutNow,
        VoteRequest,
        VoteResponse,
    }
)


def encode_raft_batch(items: list[tuple[str, Message]]) -> list:
    """Body parts of a FRAME_RAFT carrying ``(group_id, message)`` pairs, in order.

    Entry payloads and snapshot data are parts of their own (not copied). Raises CodecError
    for anything the peer would refuse: more than ``limits.MAX_RAFT_MESSAGES_PER_FRAME``
    messages or ``limits.MAX_RAFT_ENTRIES_PER_FRAME`` entries, a group id that is empty or
    longer than ``limits.MAX_GROUP_ID_BYTES``, a value out of range of its field, an entry
    count < 1, an unknown entry kind, a payload that is not bytes-like, too many voters.
    """
    if len(items) > limits.MAX_RAFT_MESSAGES_PER_FRAME:
        raise CodecError(f"{len(items)} messages exceed limits.MAX_RAFT_MESSAGES_PER_FRAME")
    out = _Parts()
    out.buf += _U32.pack(len(items))
    entries = 0
    names: dict[str, bytes] = {}
    for group_id, m in items:
        gid = names.get(group_id)
        if gid is None:
            gid = names[group_id] = _group_id_bytes(group_id)
        if type(m) not in _ENCODABLE:
            raise CodecError(f"not a Raft message: {type(m).__name__}")
        if type(m) is Append:
            entries += len(m.entries)
            if entries > limits.MAX_RAFT_ENTRIES_PER_FRAME:
                raise CodecError("more than limits.MAX_RAFT_ENTRIES_PER_FRAME entries")
        out.buf += _U16.pack(len(gid))
        out.buf += gid
        try:
            _encode_message(out, m)
        except struct.error as exc:
            raise CodecError(f"group {group_id!r}: {type(m).__name__}: {exc}") from None
    return out.finish()


def _group_id_bytes(group_id: str) -> bytes:
    gid = _encode_text(group_id, limits.MAX_GROUP_ID_BYTES, "group id")
    if not gid:
        raise CodecError("empty group id")
    return gid


def _decode_entries(r: _Reader, n: int, budget: list[int]) -> tuple[Entry, ...]:
    if n > r.left() // _ENTRY.size:
        raise CodecError(f"raft batch: {n} entries cannot fit in the {r.left()} bytes left")
    budget[0] -= n
    if budget[0] < 0:
        raise CodecError("raft batch: more than limits.MAX_RAFT_ENTRIES_PER_FRAME entries")
    out = []
    for _ in range(n):
        offset, term, count, kind, size = r.unpack(_ENTRY, "entry")
        if count < 1:
            raise CodecError(f"raft batch: entry at offset {offset} has count {count} < 1")
        entry_kind = _ENTRY_KINDS.get(kind)
        if entry_kind is None:
            raise CodecError(f"raft batch: entry at offset {offset} has unknown kind {kind}")
        payload = bytes(r.take(size, "entry payload")) if size else b""
        out.append(Entry(offset, term, payload, count, entry_kind))
    return tuple(out)


def _decode_snapshot(r: _Reader) -> Snapshot:
    offset, term, nvoters = r.unpack(_SNAPSHOT_HEAD, "snapshot")
    if nvoters == -1:
        voters = None
    elif 0 <= nvoters <= limits.RAFT_MAX_VOTERS:
        ids = struct.unpack(f">{nvoters}i", r.take(4 * nvoters, "snapshot voters"))
        voters = frozenset(ids)
        if len(voters) != nvoters:
            raise CodecError("raft batch: snapshot lists a voter twice")
    else:
        raise CodecError(f"raft batch: snapshot voter count {nvoters} not in -1 .. limits.RAFT_MAX_VOTERS")
    (nlearners,) = r.unpack(_I32, "snapshot learner count")
    if not 0 <= nlearners <= (limits.RAFT_MAX_VOTERS if voters is not None else 0):
        raise CodecError(f"raft batch: snapshot learner count {nlearners} not in 0 .. limits.RAFT_MAX_VOTERS")
    learners = frozenset(struct.unpack(f">{nlearners}i", r.take(4 * nlearners, "snapshot learners")))
    if len(learners) != nlearners or (voters and learners & voters):
        raise CodecError("raft batch: snapshot lists a learner twice or as a voter too")
    (size,) = r.unpack(_I32, "snapshot data length")
    if size == -1:
        data = None
    elif size < -1:
        raise CodecError(f"raft batch: snapshot data length {size}")
    else:
        data = bytes(r.take(size, "snapshot data"))
    return Snapshot(offset, term, voters, data, learners)


def _decode_message(r: _Reader, budget: list[int]):
    mtype, src, dst, term = r.unpack(_MSG_HEADER, "message header")
    if mtype == MessageType.HEARTBEAT:
        commit, log_start = r.unpack(_I64x2, "heartbeat")
        return Heartbeat(src, dst, term, commit, log_start)
    if mtype == MessageType.HEARTBEAT_RESPONSE:
        (log_start,) = r.unpack(_I64, "heartbeat response")
        return HeartbeatResponse(src, dst, term, log_start)
    if mtype == MessageType.APPEND:
        prev_offset, prev_term, n = r.unpack(_APPEND_HEAD, "append")
        entries = _decode_entries(r, n, budget)
        commit, log_start = r.unpack(_I64x2, "commit index and log start offset")
        return Append(src, dst, term, prev_offset, prev_term, entries, commit, log_start)
    if mtype == MessageType.APPEND_RESPONSE:
        success, match, reject, hint_offset, hint_term, lost, log_start = r.unpack(_APPEND_RESPONSE, "append response")
        success = _bool(success, "success")
        return AppendResponse(src, dst, term, success, match, reject, hint_offset, hint_term, _bool(lost, "log_lost"),
                              log_start)
    if mtype == MessageType.VOTE:
        last_offset, last_term, pre_vote, transfer = r.unpack(_VOTE, "vote request")
        pre_vote, transfer = _bool(pre_vote, "pre_vote"), _bool(transfer, "transfer")
        return VoteRequest(src, dst, term, last_offset, last_term, pre_vote, transfer)
    if mtype == MessageType.VOTE_RESPONSE:
        granted, pre_vote = r.unpack(_VOTE_RESPONSE, "vote response")
        return VoteResponse(src, dst, term, _bool(granted, "granted"), _bool(pre_vote, "pre_vote"))
    if mtype == MessageType.INSTALL_SNAPSHOT:
        return InstallSnapshot(src, dst, term, _decode_snapshot(r))
    if mtype == MessageType.TIMEOUT_NOW:
        return TimeoutNow(src, dst, term)
    raise CodecError(f"raft batch: unknown message type {mtype}")


def decode_raft_batch(body) -> list[tuple[str, Message]]:
    """FRAME_RAFT body -> ``[(group_id, message), ...]`` in the order they were encoded."""
    r = _Reader(body, "raft batch")
    (n,) = r.unpack(_U32, "message count")
    if n > limits.MAX_RAFT_MESSAGES_PER_FRAME:
        raise CodecError(f"raft batch: {n} messages exceed limits.MAX_RAFT_MESSAGES_PER_FRAME")
    if n > r.left() // _MIN_MESSAGE_BYTES:
        raise CodecError(f"raft batch: {n} messages cannot fit in the {r.left()} bytes left")
    budget = [limits.MAX_RAFT_ENTRIES_PER_FRAME]
    names: dict[bytes, str] = {}
    out: list[tuple[str, Message]] = []
    for _ in range(n):
        (glen,) = r.unpack(_U16, "group id length")
        if glen == 0 or glen > limits.MAX_GROUP_ID_BYTES:
            raise CodecError(f"raft batch: group id length {glen} not in 1 .. limits.MAX_GROUP_ID_BYTES")
        raw = bytes(r.take(glen, "group id"))
        group_id = names.get(raw)
        if group_id is None:
            try:
                group_id = names[raw] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CodecError("raft batch: group id is not valid UTF-8") from None
        out.append((group_id, _decode_message(r, budget)))
    r.done()
    return out


# ------------------------------------------------------------------ rpc
def encode_rpc(correlation_id: int, body: dict) -> bytes:
    """Body of a FRAME_RPC_REQUEST/RESPONSE: i32 ``correlation_id`` then ``body`` as UTF-8 JSON.

    Raises CodecError if ``body`` is not a JSON-serialisable dict, is larger than
    ``limits.MAX_RPC_JSON_BYTES``, or the correlation id is not an i32.
    """
    if not isinstance(body, dict):
        raise CodecError(f"rpc body must be a dict, not {type(body).__name__}")
    try:
        doc = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        head = _I32.pack(correlation_id)
    except (TypeError, ValueError, RecursionError, struct.error) as exc:
        raise CodecError(f"rpc: cannot encode: {exc}") from None
    if len(doc) > limits.MAX_RPC_JSON_BYTES:
        raise CodecError(f"rpc: JSON of {len(doc)} bytes exceeds limits.MAX_RPC_JSON_BYTES")
    return head + doc


def decode_rpc(body) -> tuple[int, dict]:
    """FRAME_RPC_REQUEST/RESPONSE body -> ``(correlation_id, dict)``."""
    r = _Reader(body, "rpc")
    (corr,) = r.unpack(_I32, "correlation id")
    if r.left() > limits.MAX_RPC_JSON_BYTES:
        raise CodecError(f"rpc: JSON of {r.left()} bytes exceeds limits.MAX_RPC_JSON_BYTES")
    text = r.text(r.left(), "JSON")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"rpc: bad JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CodecError(f"rpc: JSON is a {type(doc).__name__}, not an object")
    return corr, doc


def rpc_call(host: str, port: int, body: dict, timeout_s: float = 5.0, ssl_context=None) -> dict:
    """Blocking one-shot RPC for tools (CLI, tests).

    Connects (over TLS with ``ssl_context``, an ``ssl.SSLContext``, when the RPC port runs
    inter-broker TLS: :func:`litemq.security.tls.rpc_client_context`), sends
    FRAME_HELLO(node_id=-1, cluster_id="") and one FRAME_RPC_REQUEST (correlation id 1,
    ``body``), then reads frames (ignoring any others) until the FRAME_RPC_RESPONSE with
    correlation id 1 and returns its dict. ``timeout_s`` bounds the
    whole call. Raises OSError (ConnectionError if the peer closes first) or TimeoutError on
    network trouble, CodecError on garbage.
    """
    deadline = time.monotonic() + timeout_s
    request = encode_frame(FRAME_HELLO, [encode_hello(-1, "")])
    request += encode_frame(FRAME_RPC_REQUEST, [encode_rpc(1, body)])
    decoder = FrameDecoder()
    with socket.create_connection((host, port), timeout=timeout_s) as raw, \
            (raw if ssl_context is None else ssl_context.wrap_socket(raw, server_hostname=host)) as sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(b"".join(request))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no rpc response from {host}:{port} within {timeout_s} s")
            sock.settimeout(remaining)
            data = sock.recv(256 * 1024)
            if not data:
                raise ConnectionError(f"{host}:{port} closed the connection before answering")
            for kind, frame in decoder.feed(data):
                if kind == FRAME_RPC_RESPONSE:
                    corr, doc = decode_rpc(frame)
                    if corr == 1:
                        return doc
