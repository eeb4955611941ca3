"""A consume-transform-produce worker (KIP-98/KIP-447 pattern), run as a child process so tests
can SIGKILL it: reads ``input``, writes ``value + b"|out"`` with the same key to ``output`` and
commits its input offsets with ``send_offsets_to_transaction``, one transaction per poll batch.

    python -m tests.txn.ctp_worker LIB BOOTSTRAP INPUT OUTPUT GROUP TXN_ID EXPECTED [abort_every]

LIB is ``ck`` (confluent-kafka), ``kp`` (kafka-python) or ``aio`` (aiokafka). The worker exits 0
once the group's committed offsets cover ``EXPECTED`` input records, and 4 if ``MAX_RUN_S`` passes
first. With ``abort_every`` N, every Nth transaction writes its records and then aborts (those
records must never be read by a read_committed consumer; the input is processed again). Every line
it prints is a progress note for the test log.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

MAX_RUN_S = 240
SESSION_TIMEOUT_MS = 3000
"""The tests' brokers run with ``group.min.session.timeout.ms`` = this (Kafka's default is 6000),
so a SIGKILLed worker leaves the group 3 s after its last heartbeat and the next run is assigned
its partitions then."""
HEARTBEAT_INTERVAL_MS = 500
TXN_CALL_TIMEOUT_S = 6
"""Timeout of each blocking transactional call (seconds); a broker restarted under load answers
its clients again within about a second."""
TXN_WATCHDOG_MARGIN_S = 3
"""A blocking transactional call still running ``TXN_CALL_TIMEOUT_S`` + this many seconds after
it started ends the process (exit 3) so the supervising test starts a fresh one, as an
application's supervisor would: with librdkafka 2.16, ``send_offsets_to_transaction`` never
returns once the broker was SIGKILLed and restarted in the middle of the call (librdkafka
issues #5511 and #5456: the cached group coordinator is decommissioned and the coordinator
request's timeout is never checked)."""


def _guarded(what: str, call, *args):
    """``call(*args)`` under a watchdog: the process exits 3 when it has not returned after
    ``TXN_CALL_TIMEOUT_S`` + ``TXN_WATCHDOG_MARGIN_S`` seconds."""
    dog = threading.Timer(TXN_CALL_TIMEOUT_S + TXN_WATCHDOG_MARGIN_S,
                          lambda: (print(f"watchdog: {what} stuck, exiting", flush=True), os._exit(3)))
    dog.daemon = True
    dog.start()
    try:
        return call(*args)
    finally:
        dog.cancel()


def _say(*a) -> None:
    print(*a, flush=True)


def run_ck(bootstrap, inp, out, group, txn_id, expected, abort_every) -> bool:
    from confluent_kafka import Consumer, KafkaException, Producer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 3,
                  "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 10000,
                  "log_level": 7 if os.environ.get("CTP_DEBUG") else 3, "linger.ms": 5,
                  **({"debug": os.environ["CTP_DEBUG"]} if os.environ.get("CTP_DEBUG") else {})})
    p.init_transactions(60)
    c.subscribe([inp])
    done = 0
    n_txn = 0
    finished = False
    deadline = time.monotonic() + MAX_RUN_S
    while time.monotonic() < deadline:
        msgs = [m for m in c.consume(200, 1.0) if m.error() is None]
        if not msgs:
            committed = c.committed(c.assignment(), 10) if c.assignment() else []
            total = sum(max(tp.offset, 0) for tp in committed)
            if total >= expected:
                _say("done", total)
                finished = True
                break
            continue
        n_txn += 1
        try:
            p.begin_transaction()
            _guarded("produce", _produce_all, p, out, msgs)
            _guarded("send_offsets_to_transaction", p.send_offsets_to_transaction, c.position(c.assignment()),
                     c.consumer_group_metadata(), TXN_CALL_TIMEOUT_S)
            if abort_every and n_txn % abort_every == 0:
                _guarded("abort_transaction", p.abort_transaction, TXN_CALL_TIMEOUT_S)
                _rewind(c)
                _say("aborted", len(msgs))
                continue
            _guarded("commit_transaction", p.commit_transaction, TXN_CALL_TIMEOUT_S)
            done += len(msgs)
            _say("committed", len(msgs), done)
        except KafkaException as exc:
            err = exc.args[0]
            _say("txn error", err)
            if err.fatal():
                raise
            # Abortable or retriable (e.g. send_offsets_to_transaction timing out while a broker
            # restarts): the transaction is still open, so it is aborted and the input processed
            # again. Rewinding alone left the producer InTransaction, every later
            # begin_transaction failing, until the coordinator timed the transaction out and
            # fenced the producer. An abort that fails ends the process (the exception, or the
            # watchdog) and the supervising test starts a fresh worker.
            _guarded("abort_transaction", p.abort_transaction, TXN_CALL_TIMEOUT_S)
            _rewind(c)
    c.close()
    return finished


def _produce_all(p, out, msgs) -> None:
    """Queue ``value + b"|out"`` under the same key to ``out`` for every message (waiting for
    queue space when librdkafka's buffer is full)."""
    for m in msgs:
        while True:
            try:
                p.produce(out, key=m.key(), value=m.value() + b"|out")
                break
            except BufferError:
                p.poll(0.05)


def _rewind(c) -> None:
    """Back to the committed offsets (the aborted transaction's input is processed again)."""
    from confluent_kafka import OFFSET_BEGINNING

    for tp in c.committed(c.assignment(), 10):
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
        c.seek(tp)


def run_kp(bootstrap, inp, out, group, txn_id, expected, abort_every) -> bool:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(inp, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level="read_committed",
                      session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=10000)
    p.init_transactions()
    n_txn = 0
    finished = False
    deadline = time.monotonic() + MAX_RUN_S
    while time.monotonic() < deadline:
        batch = c.poll(1000, max_records=500)
        msgs = [m for ms in batch.values() for m in ms]
        if not msgs:
            parts = c.assignment()
            total = sum(max(c.committed(tp) or 0, 0) for tp in parts)
            if total >= expected:
                _say("done", total)
                finished = True
                break
            continue
        n_txn += 1
        p.begin_transaction()
        for m in msgs:
            p.send(out, key=m.key, value=m.value + b"|out")
        offsets = {tp: OffsetAndMetadata(c.position(tp), "", -1) for tp in c.assignment()}
        p.send_offsets_to_transaction(offsets, c.group_metadata() if hasattr(c, "group_metadata") else group)
        if abort_every and n_txn % abort_every == 0:
            p.abort_transaction()
            for tp in c.assignment():
                committed = c.committed(tp)
                c.seek(tp, committed if committed is not None else 0)
            _say("aborted", len(msgs))
            continue
        p.commit_transaction()
        _say("committed", len(msgs))
    c.close()
    return finished


async def _run_aio(bootstrap, inp, out, group, txn_id, expected, abort_every) -> bool:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    c = AIOKafkaConsumer(inp, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", isolation_level="read_committed",
                         session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=10000)
    await c.start()
    await p.start()
    n_txn = 0
    finished = False
    try:
        deadline = time.monotonic() + MAX_RUN_S
        while time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=1000, max_records=500)
            msgs = [m for ms in batch.values() for m in ms]
            if not msgs:
                total = 0
                for tp in c.assignment():
                    total += max(await c.committed(tp) or 0, 0)
                if total >= expected:
                    _say("done", total)
                    finished = True
                    break
                continue
            n_txn += 1
            await p.begin_transaction()
            for m in msgs:
                await p.send(out, key=m.key, value=m.value + b"|out")
            positions = {tp: await c.position(tp) for tp in c.assignment()}
            await p.send_offsets_to_transaction(positions, group)
            if abort_every and n_txn % abort_every == 0:
                await p.abort_transaction()
                for tp in c.assignment():
                    committed = await c.committed(tp)
                    c.seek(tp, committed if committed is not None else 0)
                _say("aborted", len(msgs))
                continue
            await p.commit_transaction()
            _say("committed", len(msgs))
    finally:
        await p.stop()
        await c.stop()
    return finished


def main(argv: list[str]) -> int:
    lib, bootstrap, inp, out, group, txn_id, expected = argv[:7]
    abort_every = int(argv[7]) if len(argv) > 7 else 0
    args = (bootstrap, inp, out, group, txn_id, int(expected), abort_every)
    if lib == "ck":
        finished = run_ck(*args)
    elif lib == "kp":
        finished = run_kp(*args)
    elif lib == "aio":
        finished = asyncio.run(_run_aio(*args))
    else:
        raise SystemExit(f"unknown client library {lib!r}")
    if not finished:  # MAX_RUN_S passed first: not a success (the supervisor starts a new run)
        _say(f"not done after {MAX_RUN_S} s")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
