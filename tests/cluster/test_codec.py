"""litemq.cluster.codec: round trips, incremental framing, and strictness on bad input."""

from __future__ import annotations

import random
import socket
import struct
import threading

import pytest

from litemq import limits
from litemq.cluster import codec
from litemq.cluster.codec import (
    FRAME_HELLO,
    FRAME_RAFT,
    FRAME_RPC_REQUEST,
    FRAME_RPC_RESPONSE,
    CodecError,
    FrameDecoder,
)
from litemq.raft.messages import (
    Append,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from litemq.raft.types import Entry, EntryKind, Snapshot

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)
I32_MAX = 2**31 - 1

MESSAGES = [
    VoteRequest(1, 2, 3, last_offset=-1, last_term=0),
    VoteRequest(I32_MAX, -1, I64_MAX, last_offset=I64_MAX, last_term=I64_MIN, pre_vote=True, transfer=True),
    VoteResponse(2, 1, 3, granted=True),
    VoteResponse(2, 1, 0, granted=False, pre_vote=True),
    Append(1, 2, 5, prev_offset=-1, prev_term=0, entries=(), commit_index=-1),
    Append(
        1,
        2,
        7,
        prev_offset=9,
        prev_term=6,
        entries=(
            Entry(10, 7, b"", 1, EntryKind.CONTROL),
            Entry(11, 7, b"abc", 3),
            Entry(14, 7, bytearray(b"\x00\xff" * 100), 1),
            Entry(15, 7, memoryview(b"xyz-view"), 2, EntryKind.DATA),
            Entry(17, 7, b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02", 1, EntryKind.CONFIG),
        ),
        commit_index=12,
    ),
    AppendResponse(2, 1, 7, success=True, match_offset=17),
    AppendResponse(2, 1, 7, success=False, reject_offset=9, hint_offset=4, hint_term=3),
    AppendResponse(2, 1, 7, success=False, reject_offset=9, hint_offset=-1, hint_term=0, log_lost=True),
    AppendResponse(2, 1, 7, success=True, match_offset=17, log_start_offset=12),
    Heartbeat(1, 3, 8, commit_index=100),
    HeartbeatResponse(3, 1, 8),
    HeartbeatResponse(3, 1, 8, log_start_offset=I64_MAX),
    InstallSnapshot(1, 2, 9, Snapshot()),
    InstallSnapshot(1, 2, 9, Snapshot(offset=41, term=8, voters=None, data=None)),
    InstallSnapshot(1, 2, 9, Snapshot(offset=41, term=8, voters=frozenset({1, 2, 3}), data=b"image")),
    InstallSnapshot(1, 2, 9, Snapshot(offset=41, term=8, voters=frozenset(), data=b"")),
    InstallSnapshot(1, 2, 9, Snapshot(0, 1, frozenset(range(limits.RAFT_MAX_VOTERS)), memoryview(b"mv"))),
    InstallSnapshot(1, 2, 9, Snapshot(41, 8, frozenset({1, 2, 3}), b"", frozenset({4, 7}))),
    TimeoutNow(1, 2, 10),
]


def _normalised(m):
    """What the decoder gives back: payloads and snapshot data as bytes."""
    if isinstance(m, Append):
        entries = tuple(Entry(e.offset, e.term, bytes(e.payload), e.count, e.kind) for e in m.entries)
        return Append(m.src, m.dst, m.term, m.prev_offset, m.prev_term, entries, m.commit_index)
    if isinstance(m, InstallSnapshot) and m.snapshot.data is not None:
        s = m.snapshot
        return InstallSnapshot(m.src, m.dst, m.term, Snapshot(s.offset, s.term, s.voters, bytes(s.data), s.learners))
    return m


def _body(items) -> bytes:
    return b"".join(codec.encode_raft_batch(items))


def _frame(kind, parts) -> bytes:
    return b"".join(codec.encode_frame(kind, parts))


def _valid_batch():
    return [(f"group-{i}", m) for i, m in enumerate(MESSAGES)]


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg):
    [(group, got)] = codec.decode_raft_batch(_body([("__cluster_metadata", msg)]))
    assert group == "__cluster_metadata"
    assert got == _normalised(msg)
    assert type(got) is type(msg)
    for e in getattr(got, "entries", ()):
        assert type(e.payload) is bytes and type(e.kind) is EntryKind
    if isinstance(got, InstallSnapshot) and got.snapshot.data is not None:
        assert type(got.snapshot.data) is bytes


def test_batch_of_several_groups_keeps_order():
    items = _valid_batch() + [
        ("orders-3", Heartbeat(1, 2, 3, 4)),
        ("orders-3", TimeoutNow(1, 2, 3)),
        ("ünïcode-0", HeartbeatResponse(2, 1, 3)),
    ]
    got = codec.decode_raft_batch(_body(items))
    assert got == [(g, _normalised(m)) for g, m in items]
    assert codec.decode_raft_batch(_body([])) == []


def test_payloads_are_parts_of_their_own_not_copies():
    big = bytearray(b"p" * 1000)
    view = memoryview(b"q" * 500)
    snap = b"s" * 300
    parts = codec.encode_raft_batch(
        [
            ("g", Append(1, 2, 3, 0, 1, (Entry(1, 3, big), Entry(2, 3, view)), 1)),
            ("g", InstallSnapshot(1, 2, 3, Snapshot(5, 3, frozenset({1}), snap))),
        ]
    )
    assert any(p is big for p in parts)
    assert any(p is view for p in parts)
    assert any(p is snap for p in parts)
    frame = codec.encode_frame(FRAME_RAFT, parts)
    assert frame[1:] == parts
    assert struct.unpack(">IB", frame[0]) == (1 + sum(len(p) for p in parts), FRAME_RAFT)


def test_hello_round_trip():
    longest = "x" * limits.MAX_CLUSTER_ID_BYTES
    for node_id, cluster_id in [(-1, ""), (0, "abc"), (I32_MAX, longest), (7, "clüster")]:
        assert codec.decode_hello(codec.encode_hello(node_id, cluster_id)) == (node_id, cluster_id)
    with pytest.raises(CodecError):
        codec.decode_hello(codec.encode_hello(1, "c") + b"\x00")
    bad_version = bytes([codec.WIRE_VERSION + 1]) + codec.encode_hello(1, "c")[1:]
    with pytest.raises(CodecError, match="version"):
        codec.decode_hello(bad_version)
    with pytest.raises(CodecError):
        codec.encode_hello(1, "x" * (limits.MAX_CLUSTER_ID_BYTES + 1))


def test_rpc_round_trip():
    body = {"op": "describe", "n": [1, 2.5, None, True], "nested": {"ü": "ß"}}
    for corr in (0, 1, -1, I32_MAX, -(2**31)):
        assert codec.decode_rpc(codec.encode_rpc(corr, body)) == (corr, body)
    assert codec.decode_rpc(codec.encode_rpc(3, {})) == (3, {})
    corr = b"\x00\x00\x00\x01"
    for bad in (corr + b"[1,2]", corr + b"{", corr + b"\xff", b"\x00\x00", corr + b"[" * 100_000):
        with pytest.raises(CodecError):
            codec.decode_rpc(bad)
    with pytest.raises(CodecError):
        codec.encode_rpc(1, {"x": object()})
    with pytest.raises(CodecError):
        codec.encode_rpc(2**31, {})


# ------------------------------------------------------------------ framing
def _stream():
    frames = [
        (FRAME_HELLO, [codec.encode_hello(3, "cluster-a")]),
        (FRAME_RAFT, codec.encode_raft_batch(_valid_batch())),
        (FRAME_RPC_REQUEST, [codec.encode_rpc(1, {"a": 1})]),
        (FRAME_RAFT, codec.encode_raft_batch([])),
        (FRAME_RPC_RESPONSE, [codec.encode_rpc(1, {"b": "x" * 5000})]),
        (200, []),  # unknown kinds are passed through for the caller to judge
    ]
    data = b"".join(_frame(k, p) for k, p in frames)
    return data, [(k, b"".join(p)) for k, p in frames]


def _feed_all(decoder, chunks):
    out = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return [(k, bytes(b)) for k, b in out]


def test_frame_decoder_whole_stream_at_once():
    data, expected = _stream()
    assert _feed_all(FrameDecoder(), [data]) == expected


def test_frame_decoder_byte_by_byte():
    data, expected = _stream()
    d = FrameDecoder()
    assert _feed_all(d, [data[i : i + 1] for i in range(len(data))]) == expected
    assert d.buffered == 0


def test_frame_decoder_random_chunks():
    data, expected = _stream()
    rng = random.Random(1234)
    for _ in range(50):
        chunks, pos = [], 0
        while pos < len(data):
            n = rng.randint(1, 3000)
            chunk = data[pos : pos + n]
            chunks.append(rng.choice([bytes, bytearray, memoryview])(chunk))
            pos += n
        d = FrameDecoder()
        got = []
        for chunk in chunks:
            frames = d.feed(chunk)
            got.extend(frames)
        # bodies handed out earlier stay valid after later feeds, and nobody can write to them
        assert [(k, bytes(b)) for k, b in got] == expected
        assert all(b.readonly for _, b in got)
        assert d.buffered == 0


def test_frame_decoder_rejects_bad_lengths():
    d = FrameDecoder()
    with pytest.raises(CodecError):
        d.feed(struct.pack(">I", limits.MAX_RPC_FRAME_BYTES + 1))  # refused before the body arrives
    with pytest.raises(CodecError):
        d.feed(b"more")  # stays broken
    with pytest.raises(CodecError):
        FrameDecoder().feed(struct.pack(">IB", 0, 1))
    d = FrameDecoder()
    d.feed(_frame(FRAME_HELLO, [codec.encode_hello(1, "c")]) + b"\xff\xff")
    with pytest.raises(CodecError):
        d.feed(b"\xff\xff")
    assert FrameDecoder().feed(struct.pack(">IB", limits.MAX_RPC_FRAME_BYTES, 2)) == []


def test_encode_frame_refuses_oversize():
    class Huge:  # stands for a part of MAX_RPC_FRAME_BYTES without allocating it
        def __len__(self):
            return limits.MAX_RPC_FRAME_BYTES

    with pytest.raises(CodecError):
        codec.encode_frame(FRAME_RAFT, [Huge()])
    with pytest.raises(CodecError):
        codec.encode_frame(256, [])


# ------------------------------------------------------------------ bad input
def test_truncation_at_every_position_is_a_codec_error():
    body = _body(_valid_batch())
    for n in range(len(body)):
        with pytest.raises(CodecError):
            codec.decode_raft_batch(body[:n])
    with pytest.raises(CodecError, match="trailing"):
        codec.decode_raft_batch(body + b"\x00")
    hello = codec.encode_hello(5, "cluster")
    for n in range(len(hello)):
        with pytest.raises(CodecError):
            codec.decode_hello(hello[:n])


def _one(msg_bytes: bytes, group=b"g") -> bytes:
    return struct.pack(">IH", 1, len(group)) + group + msg_bytes


HEADER = struct.Struct(">Biiq")
SNAPSHOT = HEADER.pack(7, 1, 2, 3)


def _one_entry(count: int, kind: int, size: int) -> bytes:
    """An Append with one entry header (offset 1, term 1) and a commit index, no payload."""
    append = HEADER.pack(3, 1, 2, 3) + struct.pack(">qqI", 0, 0, 1)
    return _one(append + struct.pack(">qqiBI", 1, 1, count, kind, size) + bytes(8))


@pytest.mark.parametrize(
    "body, what",
    [
        (_one(HEADER.pack(99, 1, 2, 3)), "unknown message type"),
        (_one(HEADER.pack(0, 1, 2, 3)), "unknown message type"),
        (_one_entry(count=1, kind=3, size=0), "unknown kind"),
        (_one_entry(count=0, kind=0, size=0), "count 0 < 1"),
        (_one_entry(count=1, kind=0, size=2**32 - 1), "bytes"),
        (_one(HEADER.pack(3, 1, 2, 3) + struct.pack(">qqI", 0, 0, 2**32 - 1) + b"\x00" * 8), "cannot fit"),
        (_one(SNAPSHOT + struct.pack(">qqi", 0, 0, 65) + bytes(4 * 65) + b"\xff" * 4), "voter count"),
        (_one(SNAPSHOT + struct.pack(">qqi", 0, 0, -2) + b"\xff" * 4), "voter count"),
        (_one(SNAPSHOT + struct.pack(">qqiii", 0, 0, 2, 1, 1) + b"\xff" * 4), "twice"),
        (_one(SNAPSHOT + struct.pack(">qqiii", 0, 0, -1, 0, -5)), "data length"),
        (_one(SNAPSHOT + struct.pack(">qqiii", 0, 0, -1, 0, 2**31 - 1)), "bytes"),
        (_one(SNAPSHOT + struct.pack(">qqiii", 0, 0, -1, 1, 4) + b"\xff" * 4), "learner count"),
        (_one(SNAPSHOT + struct.pack(">qqi", 0, 0, 1) + struct.pack(">iii", 1, 1, 1) + b"\xff" * 4), "learner"),
        (_one(SNAPSHOT + struct.pack(">qqi", 0, 0, 1) + struct.pack(">ii", 1, 65) + b"\xff" * 4), "learner count"),
        (_one(HEADER.pack(2, 1, 2, 3) + b"\x02\x00"), "bool"),
        (_one(HEADER.pack(6, 1, 2, 3), group=b"\xff\xfe"), "UTF-8"),
        (_one(HEADER.pack(6, 1, 2, 3), group=b""), "group id length"),
        (_one(HEADER.pack(6, 1, 2, 3), group=b"x" * (limits.MAX_GROUP_ID_BYTES + 1)), "group id length"),
        (struct.pack(">I", limits.MAX_RAFT_MESSAGES_PER_FRAME + 1), "MAX_RAFT_MESSAGES_PER_FRAME"),
        (struct.pack(">I", 1000) + b"\x00" * 100, "cannot fit"),
        (_one(HEADER.pack(6, 1, 2, 3) + bytes(8)) + b"\x00", "trailing"),
        (_one(HEADER.pack(6, 1, 2, 3) + bytes(7)), "heartbeat response"),
    ],
)
def test_malformed_batches_are_refused(body, what):
    assert limits.RAFT_MAX_VOTERS < 65  # the voter-count case above
    with pytest.raises(CodecError, match=what):
        codec.decode_raft_batch(body)


def test_encoder_refuses_what_the_decoder_would_refuse():
    bad = [
        ("", Heartbeat(1, 2, 3, 4)),
        ("x" * (limits.MAX_GROUP_ID_BYTES + 1), Heartbeat(1, 2, 3, 4)),
        ("g", Append(1, 2, 3, 0, 0, (Entry(1, 1, b"", 0),), 0)),
        ("g", Append(1, 2, 3, 0, 0, (Entry(1, 1, b"", 1, 7),), 0)),
        ("g", Append(1, 2, 3, 0, 0, (Entry(1, 1, "text"),), 0)),
        ("g", InstallSnapshot(1, 2, 3, Snapshot(0, 0, frozenset(range(limits.RAFT_MAX_VOTERS + 1))))),
        ("g", InstallSnapshot(1, 2, 3, Snapshot(0, 0, None, {"image": 1}))),
        ("g", Heartbeat(2**31, 2, 3, 4)),
        ("g", object()),
    ]
    for item in bad:
        with pytest.raises(CodecError):
            codec.encode_raft_batch([item])


def test_fuzz_only_codec_error():
    rng = random.Random(20240611)
    valid = _body(_valid_batch())
    hello = codec.encode_hello(4, "cluster")
    rpc = codec.encode_rpc(9, {"k": [1, 2, 3]})
    for i in range(2000):
        mode = i % 4
        if mode == 0:
            data = rng.randbytes(rng.randint(0, 200))
        elif mode == 1:  # valid batch with a few bytes flipped: exercises deep paths
            buf = bytearray(valid)
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            data = bytes(buf)
        elif mode == 2:  # a plausible count then noise
            data = struct.pack(">I", rng.randint(0, 5)) + rng.randbytes(rng.randint(0, 120))
        else:
            data = bytes(valid[: rng.randrange(len(valid))]) + rng.randbytes(rng.randint(0, 40))
        for decode in (codec.decode_raft_batch, codec.decode_hello, codec.decode_rpc):
            try:
                decode(data)
            except CodecError:
                pass
        if mode == 0:
            for base in (hello, rpc):
                buf = bytearray(base)
                buf[rng.randrange(len(buf))] = rng.randrange(256)
                try:
                    codec.decode_hello(bytes(buf)) if base is hello else codec.decode_rpc(bytes(buf))
                except CodecError:
                    pass
        d = FrameDecoder()
        try:
            for pos in range(0, len(data), 7):
                for kind, body in d.feed(data[pos : pos + 7]):
                    assert len(body) == len(bytes(body))
        except CodecError:
            pass


# ------------------------------------------------------------------ rpc_call
def _serve_one(server: socket.socket, seen: list) -> None:
    conn, _ = server.accept()
    with conn:
        d = FrameDecoder()
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for kind, body in d.feed(data):
                seen.append((kind, bytes(body)))
                if kind == FRAME_RPC_REQUEST:
                    corr, req = codec.decode_rpc(body)
                    out = codec.encode_frame(FRAME_HELLO, [codec.encode_hello(0, "cid")])
                    stale = codec.encode_rpc(corr + 100, {"stale": True})
                    out += codec.encode_frame(FRAME_RPC_RESPONSE, [stale])
                    answer = codec.encode_rpc(corr, {"echo": req, "ok": True})
                    out += codec.encode_frame(FRAME_RPC_RESPONSE, [answer])
                    conn.sendall(b"".join(out))
                    return


def test_rpc_call_against_a_socket_server():
    with socket.create_server(("127.0.0.1", 0)) as server:
        seen: list = []
        t = threading.Thread(target=_serve_one, args=(server, seen), daemon=True)
        t.start()
        port = server.getsockname()[1]
        got = codec.rpc_call("127.0.0.1", port, {"op": "ping"}, timeout_s=2.0)
        assert got == {"echo": {"op": "ping"}, "ok": True}
        t.join(2.0)
    assert seen[0] == (FRAME_HELLO, codec.encode_hello(-1, ""))
    assert codec.decode_rpc(seen[1][1]) == (1, {"op": "ping"})


def test_rpc_call_peer_closes_or_stays_silent():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def close_at_once():
            conn, _ = server.accept()
            conn.close()

        t = threading.Thread(target=close_at_once, daemon=True)
        t.start()
        with pytest.raises(OSError):
            codec.rpc_call("127.0.0.1", port, {"op": "ping"}, timeout_s=2.0)
        t.join(2.0)
        # nobody accepts: the backlog takes the connection, no answer ever comes
        with pytest.raises(TimeoutError):
            codec.rpc_call("127.0.0.1", port, {"op": "ping"}, timeout_s=0.2)
