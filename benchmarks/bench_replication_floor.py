"""The latency floor of the replicated produce path on this machine, without LiteMQ (issue 19).

What is the lowest p99 that three single-threaded asyncio Python processes on loopback can
reach at a fixed rate when every acknowledged record must be durable on two of three replicas,
following the design's rules (../shared/DESIGN.md: fsync on a thread off the event loop, group
commit, acks=all answered once a majority has it durably)? This skeleton does only the
unavoidable work of LiteMQ's path and nothing else - no Kafka protocol, no Raft state, no
validation, no offsets:

- each of 3 node processes leads a third of the records: it receives a framed request from the
  client (4-byte length, 8-byte id, 100 B value), ``pwrite``\\ s it to its own file, sends it to the
  two other nodes, and queues an ``fdatasync`` on its fsync thread (one hand-off per event-loop
  turn for every dirty file: :class:`litemq.replica.sync_queue.SyncQueue`);
- a node that receives a replicated record ``pwrite``\\ s it to that leader's file on its disk,
  queues the fsync, and sends an 8-byte acknowledgement once the fsync is done;
- the leader answers the client once its own fsync and one follower's acknowledgement are in
  (2 of 3 durable copies, as acks=all with RF 3 and min.insync.replicas 2).

The client is one asyncio task in this process sending ``--rate`` requests/s round-robin over
the three nodes (one connection each, no limit on requests in flight) and timing each answer.
Per record that is the same 5 loopback messages and 3 fsync hand-offs as LiteMQ's RF 3 path with
``linger.ms=0``; a librdkafka client costs more CPU than this one. If this floor is above a
latency goal on this machine, no implementation under the same rules meets the goal here.

Run: ``python benchmarks/bench_replication_floor.py --rate 1000 --rate 2000`` (hold the test lock:
``flock /tmp/lmq/tests.lock ...``). Figures: docs/benchmarks-cluster.md ("Fifth round").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from litemq.replica.sync_queue import SyncQueue

import loop_counts as _loop_counts  # benchmarks/ is the script's directory, first on sys.path

_HDR = struct.Struct(">IQ")  # frame length (after these 4 bytes), record id
_VALUE = b"x" * 100
_TICKS = os.sysconf("SC_CLK_TCK")


class _Framed(asyncio.Protocol):
    """Length-prefixed frames in, ``on_frame(record_id, payload)`` out."""

    def __init__(self, on_frame) -> None:
        self.on_frame = on_frame
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = struct.unpack_from(">I", buf, pos)
            if len(buf) - pos - 4 < n:
                break
            (rid,) = struct.unpack_from(">Q", buf, pos + 4)
            self.on_frame(self, rid, bytes(buf[pos + 12:pos + 4 + n]))
            pos += 4 + n
        del buf[:pos]


class _File:
    """One append-only file with group-committed fsyncs: a job per loop turn at most."""

    def __init__(self, path: str, queue: SyncQueue) -> None:
        self.fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        self.end = 0
        self.queue = queue
        self.syncing = False
        self.waiting: list = []  # callbacks for records written, not yet in a sync job

    def append(self, data: bytes, on_durable) -> None:
        self.end += os.pwrite(self.fd, data, self.end)
        self.waiting.append(on_durable)
        if not self.syncing:
            self._sync()

    def _sync(self) -> None:
        self.syncing, batch, self.waiting = True, self.waiting, []
        self.queue.submit(lambda: os.fdatasync(self.fd), lambda _r, _e: self._done(batch))

    def _done(self, batch: list) -> None:
        self.syncing = False
        for cb in batch:
            cb()
        if self.waiting:
            self._sync()


async def _node(node_id: int, ports: list[int], data_dir: str) -> None:
    loop = asyncio.get_running_loop()
    queue = SyncQueue.of(loop)
    files = {i: _File(os.path.join(data_dir, f"n{node_id}-log{i}"), queue) for i in range(3)}
    peers: dict[int, asyncio.Transport] = {}
    pending: dict[int, list] = {}  # record id -> [client transport, copies durable]

    def durable(rid: int) -> None:
        p = pending.get(rid)
        if p is None:
            return
        p[1] += 1
        if p[1] == 2:  # leader + one follower, or two followers' acks before the leader's fsync
            del pending[rid]
            p[0].write(_HDR.pack(8, rid))

    def on_client(proto, rid, payload) -> None:
        pending[rid] = [proto.transport, 0]
        frame = _HDR.pack(10 + len(payload), rid) + b"\0" + bytes((node_id,)) + payload
        for t in peers.values():
            t.write(frame)
        files[node_id].append(payload, lambda: durable(rid))

    def on_peer(proto, rid, payload) -> None:
        if payload[:1] == b"\0":  # a replicated record: write, fsync, acknowledge
            files[payload[1]].append(payload[2:], lambda: proto.transport.write(_HDR.pack(9, rid) + b"\1"))
        else:
            durable(rid)

    await loop.create_server(lambda: _Framed(on_client), "127.0.0.1", ports[node_id])
    # peer links: node i listens on ports[3 + i] for the records of the others and answers
    # their acknowledgements on the same connection
    await loop.create_server(lambda: _Framed(on_peer), "127.0.0.1", ports[3 + node_id])
    await asyncio.sleep(0.5)
    for other in range(3):
        if other == node_id:
            continue
        _, proto = await loop.create_connection(lambda: _Framed(on_peer), "127.0.0.1", ports[3 + other])
        peers[other] = proto.transport
    await asyncio.Event().wait()


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


async def _client(ports: list[int], rate: int, seconds: float) -> list[float]:
    loop = asyncio.get_running_loop()
    sent: dict[int, float] = {}
    latencies: list[float] = []

    def on_answer(_proto, rid, _payload) -> None:
        latencies.append(time.perf_counter() - sent.pop(rid))

    conns = []
    for i in range(3):
        _, proto = await loop.create_connection(lambda: _Framed(on_answer), "127.0.0.1", ports[i])
        conns.append(proto.transport)
    rid = 0
    t0 = time.perf_counter()
    while (now := time.perf_counter()) - t0 < seconds:
        while rid < (now - t0) * rate:
            sent[rid] = time.perf_counter()
            conns[rid % 3].write(_HDR.pack(8 + len(_VALUE), rid) + _VALUE)
            rid += 1
        await asyncio.sleep(0.0005)
    deadline = time.perf_counter() + 10
    while sent and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    if sent:
        raise SystemExit(f"{len(sent)} requests unanswered")
    return latencies


def _cpu_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid``."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) / _TICKS, int(f[12]) / _TICKS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, action="append", help="records/s (repeatable; default 1000 and 2000)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--node", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ports", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--strace", metavar="PREFIX", help="count the nodes' system calls (strace -c) into PREFIX.<node>")
    ap.add_argument("--loop-counts", action="store_true",
                    help="also count the nodes' event-loop turns and callbacks per record (loop_counts.py)")
    args = ap.parse_args()
    counts_dir = _loop_counts.enable() if args.loop_counts and args.node is None else None
    if args.node is not None:
        asyncio.run(_node(args.node, [int(p) for p in args.ports.split(",")], args.dir))
        return
    for rate in args.rate or [1000, 2000]:
        ports = _free_ports(6)
        with tempfile.TemporaryDirectory(prefix="bench-floor-") as d:
            procs = [subprocess.Popen([sys.executable, __file__, "--node", str(i), "--ports",
                                       ",".join(map(str, ports)), "--dir", d]) for i in range(3)]
            try:
                time.sleep(1.5)
                asyncio.run(_client(ports, rate, 1.0))  # warm-up
                tracers = [subprocess.Popen(["strace", "-c", "-f", "-o", f"{args.strace}.{i}", "-p", str(p.pid)])
                           for i, p in enumerate(procs)] if args.strace else []
                time.sleep(0.5 if tracers else 0)
                cpu0 = [_cpu_s(p.pid) for p in procs]
                me0 = os.times()
                wall0 = time.time()
                lat = asyncio.run(_client(ports, rate, args.seconds))
                wall1 = time.time()
                cpu1 = [_cpu_s(p.pid) for p in procs]
                me1 = os.times()
                if counts_dir is not None:
                    _loop_counts.await_last_sample()  # before the nodes are killed
                for t in tracers:
                    t.send_signal(2)
                    t.wait()
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
        lat.sort()
        n = len(lat)
        per = 1e6 / n
        user = sum(a[0] - b[0] for a, b in zip(cpu1, cpu0))
        system = sum(a[1] - b[1] for a, b in zip(cpu1, cpu0))
        client = (me1.user - me0.user) + (me1.system - me0.system)
        loop = ""
        if counts_dir is not None:
            turns, callbacks = _loop_counts.per_record(counts_dir, [p.pid for p in procs], wall0, wall1, n)
            loop = f"; event-loop turns/record {turns:.1f}, callbacks/record {callbacks:.1f}"
        print(f"floor rate {rate}: {n} records, p50 {lat[n // 2] * 1000:.2f} ms p99 {lat[int(n * .99)] * 1000:.2f} ms "
              f"max {lat[-1] * 1000:.2f} ms; nodes {(user + system) * per:.0f} us/record (user {user * per:.0f}, "
              f"system {system * per:.0f}), client {client * per:.0f} us/record; "
              f"load {open('/proc/loadavg').read().split()[0]}{loop}", flush=True)


if __name__ == "__main__":
    main()
