"""One broker per data dir (issue 17): ``DATA_DIR/.lock`` is held with ``flock`` for the broker's
lifetime, as Kafka does; a second broker on the same directory - a ``litemq serve`` process, a
cluster-mode one, or an embedded ``litemq.Broker`` - is refused with one line naming the
directory and the holder's pid, and touches nothing there. A clean stop or a crash frees it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer

import litemq
from litemq.storage.dir_lock import DataDirInUseError
from litemq.testing.process import HOST, BrokerProcess, free_port


def _serve(data, *args: str) -> subprocess.CompletedProcess:
    """A second ``litemq serve`` on ``data``, expected to exit at once."""
    return subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(data),
                           "--listen", f"{HOST}:{free_port()}", "-o", "http.listen=off", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _assert_refused(r: subprocess.CompletedProcess, data, pid: int) -> None:
    assert r.returncode != 0, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines == [f"error: cannot start broker: data dir {data} is in use by another broker "
                     f"(pid {pid} holds {data}/.lock)"], r.stderr
    assert "ready" not in r.stdout


def _roundtrip(bootstrap: str, topic: str, value: bytes) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, value)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{value.decode()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        for _ in range(150):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
                if got[-1] == value:
                    break
    finally:
        c.close()
    return got


def test_second_serve_on_the_same_data_dir_is_refused(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, overrides={"auto.create.topics.enable": "true"}) as first:
        pid = first.proc.pid
        assert (data / ".lock").read_text() == f"{pid}\n"
        before = sorted(p.name for p in data.iterdir())
        _assert_refused(_serve(data), data, pid)
        assert sorted(p.name for p in data.iterdir()) == before  # nothing created or recovered
        assert first.alive()
        assert _roundtrip(first.bootstrap_servers, "locked", b"v1") == [b"v1"]  # the first one serves on
        assert first.stop() == 0
    # a clean stop frees the directory: the next broker starts on the same data (clean shutdown)
    with BrokerProcess(data, overrides={"auto.create.topics.enable": "true"}) as second:
        assert (data / ".lock").read_text() == f"{second.proc.pid}\n"
        second.kill()  # SIGKILL: the kernel drops the lock with the process
        third = BrokerProcess(data, overrides={"auto.create.topics.enable": "true"}).start()
        try:
            assert _roundtrip(third.bootstrap_servers, "locked", b"v2") == [b"v1", b"v2"]
        finally:
            third.stop()
    log = (tmp_path / f"broker-{first.port}.log").read_text()
    assert "Traceback" not in log


def test_cluster_mode_broker_refused_on_a_locked_data_dir(tmp_path):
    """A one-voter cluster broker (metadata Raft log in the data dir) and a second one on the
    same directory: refused before it opens any Raft log there."""
    data = tmp_path / "node-1"
    rpc = free_port()
    cluster_args = ["--node-id", "1", "--rpc-listen", f"{HOST}:{rpc}", "--peers", f"1@{HOST}:{rpc}"]
    with BrokerProcess(data, extra_args=cluster_args) as first:
        other_rpc = free_port()
        r = _serve(data, "--node-id", "1", "--rpc-listen", f"{HOST}:{other_rpc}", "--peers", f"1@{HOST}:{other_rpc}")
        _assert_refused(r, data, first.proc.pid)
        assert first.alive()


def test_embedded_broker_refused_on_a_locked_data_dir(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as proc:  # held by another process
        with pytest.raises(DataDirInUseError, match=rf"^data dir {data} is in use by another broker "
                                                    rf"\(pid {proc.proc.pid} holds "):
            litemq.Broker(data_dir=data)
    with litemq.Broker(data_dir=data) as broker:  # free again after the process stopped
        with pytest.raises(DataDirInUseError, match=rf"\(pid {os.getpid()} holds {data}/.lock\)"):
            litemq.Broker(data_dir=data)  # a second embedded broker of this process
        r = _serve(data)  # and a process while the embedded broker runs
        _assert_refused(r, data, os.getpid())
        assert broker.runtime.log_manager.dir_lock.held
    assert (data / ".lock").read_text() == ""  # released at close
    with litemq.Broker(data_dir=data):
        pass


def test_start_of_a_running_embedded_broker_changes_nothing(tmp_path):
    """``litemq.Broker()`` starts the broker; a ``start()`` after it (a notebook user's habit) is a
    no-op that returns the broker, where it used to try a second runtime on the same data dir and
    fail with "in use by another broker" naming its own pid. The broker keeps serving and closes
    once."""
    data = tmp_path / "data"
    broker = litemq.Broker(data_dir=data)
    try:
        runtime = broker.runtime
        assert broker.start() is broker and broker.runtime is runtime
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        p.produce("started-twice", b"v")
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["started-twice"])
        msg = None
        for _ in range(60):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        c.close()
        assert msg is not None and msg.value() == b"v"
    finally:
        broker.close()
    assert (data / ".lock").read_text() == ""
