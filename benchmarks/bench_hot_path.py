"""CPU and Python calls per operation on the per-record paths, in one process (issue 19).

The end-to-end rate benchmark (``bench_rate_cpu.py``) moves by 10-20 % from run to run on a
shared 2-vCPU VM, more than most single changes to the per-record code. This one runs each
path in a tight loop in this process, without sockets, other processes or the fsync thread, and
reports per operation:

- ``us``: CPU time of this thread (``time.thread_time``), the median of ``--repeat`` passes;
- ``calls``: Python and C function calls (``sys.setprofile`` ``call`` + ``c_call`` events, one
  more pass), exact and the same on every machine: the "Python steps" the cluster rounds of
  docs/benchmarks-cluster.md found the replicated path's cost to be.

Paths (every record 100 B of value, 1 record per batch, as with ``linger.ms=0``):

- ``produce acks=1``: a single broker's produce request path - ``Connection.data_received`` of
  one ProduceRequest v9 frame: header and body decode, checks, ``PartitionLog.append``
  (``pwrite`` included), response encode and write to a transport that discards it;
- ``follower append``: one Raft ``Append`` of one entry into a partition's ``RaftGroup`` as a
  follower: ``step``, the Ready cycle, ``PartitionLog.append_as_follower`` and the
  ``AppendResponse`` handed to the host (the log's ``flush.messages`` at Kafka's default, so
  no fsync job: its cost is measured end to end);
- ``log append (follower)``: ``PartitionLog.append_as_follower`` alone, the part of the above
  that is not Raft;
- ``leader append + commit``: a leader's ``RaftGroup.leader_append`` of one batch (the log
  append with its producer checks, the proposal), the Ready that sends the Append to both
  followers, one follower's ``AppendResponse`` and the Ready that moves the commit index (the
  partition's high-watermark listener is not attached);
- ``raft frame encode`` / ``decode``: one FRAME_RAFT with one ``Append`` of one entry, and one
  with one ``AppendResponse``.

These are hot-cache figures: in a cluster the same code runs between context switches of four
processes on two cores and costs 3.7-4.4 times as much per call (the log appends timed inside the
brokers at 2000 msg/s, docs/benchmarks-cluster.md, eleventh round).

Usage: ``python benchmarks/bench_hot_path.py [--ops 20000] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import litemq
from litemq.broker.server import Connection
from litemq.cluster.codec import FRAME_RAFT, decode_raft_batch, encode_frame, encode_raft_batch
from litemq.cluster.group import RaftGroup
from litemq.protocol.frames import encode_request
from litemq.protocol.records import build_batch
from litemq.raft.messages import Append, AppendResponse, VoteRequest, VoteResponse
from litemq.raft.types import Entry, EntryKind
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from litemq.testing.machine import describe_machine
from litemq.testing.wire import WireClient

VALUE = bytes(100)
NO_FSYNC = LogConfig(flush_messages=2**63 - 1)


def _count_calls(fn) -> int:
    """Function calls (Python and C) made while ``fn()`` runs."""
    n = 0

    def prof(_frame, event, _arg):
        nonlocal n
        if event == "call" or event == "c_call":
            n += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def _measure(make_pass, ops: int, repeat: int) -> tuple[float, float]:
    """(median us per op, calls per op): ``make_pass()`` returns a fresh callable running ``ops`` ops."""
    times = []
    for _ in range(repeat):
        run = make_pass()
        t0 = time.thread_time()
        run()
        times.append((time.thread_time() - t0) / ops * 1e6)
    calls = _count_calls(make_pass()) / ops
    return statistics.median(times), calls


class _DiscardTransport:
    """What a Connection needs of an asyncio transport; writes are counted and dropped."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, _data) -> None:
        self.writes += 1

    def writelines(self, _parts) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, key, default=None):
        return ("127.0.0.1", 1) if key == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def bench_produce(ops: int, repeat: int) -> tuple[float, float]:
    with litemq.Broker(num_partitions=1) as broker:
        with WireClient("127.0.0.1", broker.port) as c:  # auto-create the topic
            c.request(3, 9, {"topics": [{"name": "hot"}], "allow_auto_topic_creation": True})
        batch = build_batch([(b"k", VALUE)])
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                "topic_data": [{"name": "hot", "partition_data": [{"index": 0, "records": batch}]}]}
        frames = [encode_request(0, 9, i, "hot", body) for i in range(ops)]

        def make_pass():
            conn = Connection(broker.runtime)
            transport = _DiscardTransport()
            conn.connection_made(transport)

            def run():
                for f in frames:
                    conn.data_received(f)
                if transport.writes != ops:
                    raise RuntimeError(f"{transport.writes} responses for {ops} requests")
            return run

        return broker.call(_measure, make_pass, ops, repeat)


class _Host:
    """A broker as a RaftGroup sees it: node id, loop, send (kept), mark_dirty (at once)."""

    def __init__(self, loop, node_id: int = 2) -> None:
        self.node_id = node_id
        self.loop = loop
        self.metrics = None
        self.sent: list = []

    def send(self, _group_id, messages) -> None:
        self.sent += messages

    def mark_dirty(self, group) -> None:
        group.process()


async def _settle(group: RaftGroup) -> None:
    """Wait for the group's Ready in flight (its hard state made durable on the fsync thread)."""
    while group._persisting:
        await asyncio.sleep(0.005)


async def _measure_groups(new_group, run_pass, ops: int, repeat: int) -> tuple[float, float]:
    """:func:`_measure` with a fresh RaftGroup per pass: ``await new_group()`` makes each (one per
    timed pass and one for the counted pass), ``run_pass(group)`` returns the pass to run on it;
    every group and its log are closed afterwards."""
    groups = [await new_group() for _ in range(repeat + 1)]
    unused = list(groups)
    try:
        return _measure(lambda: run_pass(unused.pop()), ops, repeat)
    finally:
        for g in groups:
            g.close()
            g.plog.close()


def bench_follower(ops: int, repeat: int, tmp: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    batches = [build_batch([(b"k", VALUE)], base_offset=i, partition_leader_epoch=1, producer_id=7,
                           producer_epoch=0, base_sequence=i) for i in range(ops + 1)]
    appends = [Append(1, 2, 1, i - 1, 1 if i else 0, (Entry(i, 1, batches[i], 1, EntryKind.DATA),), i - 1, 0)
               for i in range(ops + 1)]
    passes = iter(range(10**6))

    async def follower() -> tuple[float, float]:
        host = _Host(asyncio.get_running_loop())

        async def new_group() -> RaftGroup:
            n = next(passes)
            g = RaftGroup(host, f"hot-{n}", PartitionLog.open(tmp / f"f{n}", NO_FSYNC), [1, 2, 3])
            g.node.step(appends[0])  # term 1: the vote state is made durable on the fsync thread
            g.process()
            await _settle(g)
            return g

        def run_pass(g: RaftGroup):
            def run():
                step, process = g.node.step, g.process
                for m in appends[1:]:
                    step(m)
                    process()
                if g.plog.log_end_offset != ops + 1:
                    raise RuntimeError(f"follower log ends at {g.plog.log_end_offset}")
            return run

        return await _measure_groups(new_group, run_pass, ops, repeat)

    follower_result = asyncio.run(follower())
    n = iter(range(10**6))

    def make_log_pass():
        plog = PartitionLog.open(tmp / f"log{next(n)}", NO_FSYNC)

        def run():
            for b in batches[:ops]:
                plog.append_as_follower(b)
            plog.close()
        return run

    return follower_result, _measure(make_log_pass, ops, repeat)


def bench_leader(ops: int, repeat: int, tmp: Path) -> tuple[float, float]:
    """The leader's Raft side of one record: ``leader_append`` (the log append and the proposal),
    the Ready that sends the Append to both followers, one follower's AppendResponse that
    commits it, and the Ready that publishes the commit index (no partition listener)."""
    batches = [build_batch([(b"k", VALUE)], producer_id=7, producer_epoch=0, base_sequence=i)
               for i in range(ops)]
    passes = iter(range(10**6))

    async def leader() -> tuple[float, float]:
        host = _Host(asyncio.get_running_loop(), node_id=1)

        async def new_leader() -> RaftGroup:
            n = next(passes)
            g = RaftGroup(host, f"lead-{n}", PartitionLog.open(tmp / f"l{n}", NO_FSYNC), [1, 2, 3])
            g.node.campaign()
            for _ in range(100):  # answer pre-votes and votes until it leads
                g.process()
                await _settle(g)
                msgs, host.sent = host.sent, []
                for m in msgs:
                    if isinstance(m, VoteRequest):
                        g.node.step(VoteResponse(m.dst, 1, m.term, True, m.pre_vote))
                if g.node.is_leader and not g.node.has_ready():
                    break
            if not g.node.is_leader:
                raise RuntimeError("the benchmark's group did not become leader")
            return g

        def run_pass(g: RaftGroup):
            host.sent = []

            def run():
                node, process, sent = g.node, g.process, host.sent
                term = node.term
                for b in batches:
                    info = g.leader_append(bytearray(b))
                    process()
                    node.step(AppendResponse(2, 1, term, True, info.last_offset))
                    process()
                    sent.clear()
                if node.commit_index != g.plog.log_end_offset - 1:
                    raise RuntimeError(f"commit index {node.commit_index}, log end {g.plog.log_end_offset}")
            return run

        return await _measure_groups(new_leader, run_pass, ops, repeat)

    return asyncio.run(leader())


def bench_codec(ops: int, repeat: int) -> dict[str, tuple[float, float]]:
    payload = build_batch([(b"k", VALUE)], base_offset=100, partition_leader_epoch=5)
    items = {"Append": [("hot-0", Append(1, 2, 5, 99, 5, (Entry(100, 5, payload, 1, EntryKind.DATA),), 98, 0))],
             "AppendResponse": [("hot-0", AppendResponse(2, 1, 5, True, 100, 0, 0, 0, False))]}
    out = {}
    for name, batch in items.items():
        body = memoryview(b"".join(encode_raft_batch(batch)))

        def make_encode(batch=batch):
            def run():
                for _ in range(ops):
                    encode_frame(FRAME_RAFT, encode_raft_batch(batch))
            return run

        def make_decode(body=body):
            def run():
                for _ in range(ops):
                    decode_raft_batch(body)
            return run

        out[f"raft frame encode ({name})"] = _measure(make_encode, ops, repeat)
        out[f"raft frame decode ({name})"] = _measure(make_decode, ops, repeat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=20000, help="operations per pass")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes (the median is reported)")
    args = ap.parse_args()
    rows: dict[str, tuple[float, float]] = {}
    rows["produce acks=1 (single broker, 1 record)"] = bench_produce(args.ops, args.repeat)
    with tempfile.TemporaryDirectory(prefix="litemq-hot-") as d:
        rows["follower append (Raft step + Ready + log)"], rows["log append (follower), alone"] = \
            bench_follower(args.ops, args.repeat, Path(d))
        rows["leader append + commit (Raft, log; no partition listener)"] = bench_leader(args.ops, args.repeat, Path(d))
    rows.update(bench_codec(args.ops, args.repeat))
    print(f"Machine: {describe_machine()}")
    print(f"{args.ops} operations per pass, median of {args.repeat} passes\n")
    print("| path | us per op | Python + C calls per op |")
    print("|---|---:|---:|")
    for name, (us, calls) in rows.items():
        print(f"| {name} | {us:.1f} | {calls:.0f} |")


if __name__ == "__main__":
    main()
