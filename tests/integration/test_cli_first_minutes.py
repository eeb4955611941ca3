"""The first ten minutes with the ``litemq`` command (issue 17), with real processes: a group
consumer stopped by SIGTERM leaves its group at once, a stopped local cluster says how to start
it again, a malformed address names its option and the form it takes, leaving ``with
litemq.Broker()`` leaves no task pending, piped tables are never cut; and (issue 18) the CLI
modules import each other in one direction only."""

from __future__ import annotations

import ast
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import free_base_port, wait_for

TIMEOUT_S = 30


def litemq(*args: str, env: dict | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _create_topic(bootstrap: str, name: str, partitions: int = 1) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=TIMEOUT_S)
    return admin


def _members(admin: AdminClient, group: str) -> list:
    return admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT_S).members


# ------------------------------------------------------------------ consume -g and SIGTERM
def test_consume_group_sigterm_closes_and_leaves_the_group_at_once(shared_broker):
    """SIGTERM, like Ctrl-C, closes the consumer (LeaveGroup) and exits 0: the group has no
    member a few seconds later, not after the 45 s session timeout."""
    bootstrap = shared_broker.bootstrap_servers
    admin = _create_topic(bootstrap, "fm-sigterm")
    proc = subprocess.Popen([sys.executable, "-m", "litemq.cli", "consume", "fm-sigterm", "-g", "fm-g", "-b",
                             bootstrap], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(_members(admin, "fm-g")) == 1, TIMEOUT_S, "the CLI consumer joined fm-g",
                 interval_s=0.2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, (proc.returncode, err)
        assert b"Traceback" not in err
        wait_for(lambda: not _members(admin, "fm-g"), 5, "fm-g without members after SIGTERM", interval_s=0.1)
        assert time.monotonic() - t0 < 10  # far below the 45 s session timeout
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------ cluster stop / status
def _start_command(text: str) -> list[str]:
    """The ``litemq cluster start ...`` command a message ends with, as argv."""
    assert "litemq cluster start" in text, text
    return shlex.split(text[text.index("litemq cluster start"):].strip())


def test_stopped_cluster_says_how_to_start_it_again(tmp_path):
    base = free_base_port(1)
    data = tmp_path / "c"
    r = litemq("cluster", "start", "-n", "1", "--base-port", str(base), "--data-dir", str(data),
               "--http-base-port", "0", "-o", "log.retention.ms=3600000", "--timeout", "30")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        expected = ["litemq", "cluster", "start", "-n", "1", "--base-port", str(base), "--data-dir", str(data),
                    "--http-base-port", "0", "-o", "log.retention.ms=3600000"]
        r = litemq("cluster", "stop", "--data-dir", str(data))
        assert r.returncode == 0, r.stderr
        assert "stopped 1 broker" in r.stdout and _start_command(r.stdout) == expected, r.stdout

        r = litemq("cluster", "status", "--data-dir", str(data))
        assert r.returncode == 1 and "no cluster" not in r.stderr and "Traceback" not in r.stderr
        assert f"the cluster in {data} is stopped" in r.stderr and _start_command(r.stderr) == expected, r.stderr

        r = litemq("cluster", "stop", "--data-dir", str(data))  # stopping a stopped cluster is no error
        assert r.returncode == 0, r.stderr
        assert "already stopped" in r.stdout and _start_command(r.stdout) == expected, r.stdout

        r = litemq(*expected[1:])  # the command as printed runs it again on the kept data
        assert r.returncode == 0 and "cluster ready" in r.stdout, r.stdout + r.stderr
        r = litemq("cluster", "status", "--data-dir", str(data))
        assert r.returncode == 0 and "metadata: leader" in r.stdout, r.stdout + r.stderr

        # --data-dir alone starts it again as recorded: its port, HTTP port and overrides
        r = litemq("cluster", "stop", "--data-dir", str(data))
        assert r.returncode == 0, r.stderr
        r = litemq("cluster", "start", "--data-dir", str(data), "--timeout", "30")
        assert r.returncode == 0 and "cluster ready" in r.stdout, r.stdout + r.stderr
        assert f"127.0.0.1:{base}" in r.stdout, r.stdout
        r = litemq("cluster", "stop", "--data-dir", str(data))
        assert r.returncode == 0 and _start_command(r.stdout) == expected, r.stdout
    finally:
        litemq("cluster", "stop", "--data-dir", str(data))

    (data / "cluster.json").unlink()  # only the brokers' data left: still not "no cluster"
    r = litemq("cluster", "status", "--data-dir", str(data))
    assert r.returncode == 1 and "is not running" in r.stderr, r.stderr
    assert f"litemq cluster start -n 1 --data-dir {data}" in r.stderr

    for args in (["status"], ["stop"]):  # a directory that never held a cluster
        r = litemq("cluster", *args, "--data-dir", str(tmp_path / "nothing"))
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert r.stderr.startswith(f"error: no cluster in {tmp_path / 'nothing'}"), r.stderr
    assert not (tmp_path / "nothing").exists()


def test_killed_broker_starts_again_with_the_data_dir_alone(tmp_path):
    """A broker of a running ``cluster start`` cluster exited: ``cluster status`` lists the
    partition whose only replica it held without a leader; ``cluster start --data-dir DIR``
    alone starts it again with its recorded port; explicit other settings are refused."""
    base = free_base_port(3)
    data = tmp_path / "c"
    r = litemq("cluster", "start", "-n", "3", "--base-port", str(base), "--data-dir", str(data),
               "--http-base-port", "0", "--timeout", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("single", 3, replica_assignment=[[1], [2], [3]])])["single"].result(TIMEOUT_S)
        state = json.loads((data / "cluster.json").read_text())
        pid = next(nd["pid"] for nd in state["nodes"] if nd["node_id"] == 2)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(),
                 10, "broker 2 gone")
        # single-1 has no replica left: listed with leader none and its replica (it was left out)
        r = litemq("cluster", "status", "--data-dir", str(data), env=dict(os.environ, COLUMNS="200"))
        assert r.returncode == 0, r.stdout + r.stderr
        rows = [[c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.splitlines() if "│ single" in line]
        assert sorted(row[1] for row in rows) == ["0", "1", "2"], r.stdout
        assert next(row for row in rows if row[1] == "1")[2:5] == ["none", "-", "2"], r.stdout
        r = litemq("cluster", "start", "--data-dir", str(data), "--base-port", str(base + 10))
        assert r.returncode == 1 and "its broker 2 exited" in r.stderr, r.stderr
        r = litemq("cluster", "start", "--data-dir", str(data), "--timeout", "60")
        assert r.returncode == 0 and "started broker 2 again" in r.stdout, r.stdout + r.stderr
        r = litemq("cluster", "status", "--data-dir", str(data))
        assert r.returncode == 0 and f"127.0.0.1:{base + 1}" in r.stdout, r.stdout + r.stderr
    finally:
        litemq("cluster", "stop", "--data-dir", str(data))


# ------------------------------------------------------------------ HOST:PORT values
@pytest.mark.parametrize("args, option, message", [
    (["serve", "--listen", "garbage"], "'--listen'",
     "'garbage': :PORT missing; expected HOST:PORT, e.g. 127.0.0.1:9092"),
    (["serve", "--listen", "no-such-host.invalid:9092"], "'--listen'",
     "'no-such-host.invalid:9092': cannot resolve host 'no-such-host.invalid'; expected HOST:PORT"),
    (["serve", "--listen", "127.0.0.1:x"], "'--listen'", "'127.0.0.1:x': port 'x' is not a number"),
    (["serve", "--listen", "127.0.0.1:70000"], "'--listen'", "port 70000 is not in 0..65535"),
    (["serve", "--advertise", "somehost"], "'--advertise'", "'somehost': :PORT missing; expected HOST:PORT"),
    (["serve", "--rpc-listen", "9192"], "'--rpc-listen'",
     "'9192': :PORT missing; expected HOST:PORT, e.g. 127.0.0.1:9192"),
    (["serve", "--http-listen", "garbage"], "'--http-listen'",
     "'garbage': :PORT missing; expected HOST:PORT or off, e.g. 127.0.0.1:8082"),
    (["serve", "--peers", "1@127.0.0.1:9192,2@127.0.0.1"], "'--peers'",
     "'2@127.0.0.1': :PORT missing; expected ID@HOST:PORT,..."),
    (["serve", "--peers", "127.0.0.1:9192"], "'--peers'", "ID@ missing; expected ID@HOST:PORT,..."),
    (["topic", "list", "-b", "notaport"], "'-b' / '--bootstrap-server'",
     "'notaport': :PORT missing; expected HOST:PORT[,HOST:PORT...], e.g. 127.0.0.1:9092"),
    (["consume", "t", "-b", "127.0.0.1:9092,other"], "'-b' / '--bootstrap-server'",
     "'other': :PORT missing; expected HOST:PORT[,HOST:PORT...]"),
    (["ingest", "x.log", "-b", "h:p"], "'-b' / '--bootstrap-server'", "port 'p' is not a number"),
])
def test_malformed_address_names_the_option_and_its_form(tmp_path, args, option, message):
    r = litemq(*args, *(["--data-dir", str(tmp_path / "d")] if args[0] == "serve" else []))
    assert r.returncode == 2, (r.returncode, r.stderr)
    error = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and f"Invalid value for {option}" in error[0] and message in error[0], r.stderr
    assert "Errno" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was created


def test_malformed_bootstrap_from_the_variable_names_it():
    r = litemq("group", "list", env=dict(os.environ, LITEMQ_BOOTSTRAP_SERVER="notaport"))
    assert r.returncode == 2
    assert "LITEMQ_BOOTSTRAP_SERVER" in r.stderr and "'notaport': :PORT missing" in r.stderr, r.stderr


def test_address_forms_accepted():
    from litemq.cli.common import parse_address

    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address(" [::1]:0 ") == ("::1", 0)
    assert parse_address(":9092") == ("", 9092)
    assert parse_address("localhost:65535", resolve=True) == ("localhost", 65535)
    for bad in ("::1:9092", "[::1]", "[::1:9092", "h:", "h:-1"):
        with pytest.raises(ValueError):
            parse_address(bad)


# ------------------------------------------------------------------ embedded broker shutdown
EMBEDDED_SCRIPT = textwrap.dedent("""
    import asyncio
    import time

    import litemq
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    with litemq.Broker(group_initial_rebalance_delay_ms=0) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(timeout=30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "fetch.wait.max.ms": 10000, "log_level": 0})
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "no assignment"
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # a Fetch now waits up to 10 s on the empty partition
            consumer.poll(0.2)
        long_polls = broker.call(lambda: sum(t.get_coro().__name__ == "_long_poll" for t in asyncio.all_tasks()))
        print("long polls", long_polls, flush=True)
    print("closed", flush=True)
""")


def test_leaving_the_embedded_broker_leaves_no_pending_task(tmp_path):
    """A consumer's long-poll Fetch is pending when the with-block ends: the broker cancels
    and awaits it (and every other task of its loop), so Python reports no destroyed task."""
    script = tmp_path / "embedded_exit.py"
    script.write_text(EMBEDDED_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "closed" and int(lines[0].split()[2]) >= 1, r.stdout  # a long poll was pending
    for needle in ("Task was destroyed", "was never awaited", "Traceback", "Exception ignored"):
        assert needle not in r.stderr, r.stderr


# ------------------------------------------------------------------ tables and -b help
def test_piped_group_describe_keeps_every_header_and_id_whole(shared_broker):
    bootstrap = shared_broker.bootstrap_servers
    _create_topic(bootstrap, "fm-describe-a-long-topic-name", partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        producer.produce("fm-describe-a-long-topic-name", value=b"v%d" % i, partition=i % 2)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fm-describe-group",
                         "client.id": "fm-describe-client-with-a-long-id", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["fm-describe-a-long-topic-name"])
    try:
        got = 0
        deadline = time.monotonic() + TIMEOUT_S
        while got < 4 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
        assert got == 4
        consumer.commit(asynchronous=False)
        member_id = consumer.memberid()
        # through LITEMQ_BOOTSTRAP_SERVER (no -b): the variable really is read
        r = litemq("group", "describe", "fm-describe-group",
                   env=dict(os.environ, LITEMQ_BOOTSTRAP_SERVER=bootstrap, COLUMNS="80"))
    finally:
        consumer.close()
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout, r.stdout
    header = next(line for line in r.stdout.splitlines() if "TOPIC" in line)
    cells = [c.strip() for c in header.split("┃")[1:-1]]  # rich's header separator
    assert cells == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                     "CLIENT-ID"], header
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.splitlines()
            if "fm-describe-a-long-topic-name" in line and "│" in line]
    assert len(rows) == 2 and all(row[4] == "0" and row[5] == member_id and row[7] ==
                                  "fm-describe-client-with-a-long-id" for row in rows), r.stdout


def test_bootstrap_help_names_the_variable():
    """``-b``'s help of every command taking it shows LITEMQ_BOOTSTRAP_SERVER."""
    import click

    from litemq.cli.app import main

    def walk(cmd: click.Command, path: list[str]):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])

    commands = [path for path, cmd in walk(main, []) if any("--bootstrap-server" in getattr(p, "opts", [])
                                                            for p in cmd.params)]
    assert len(commands) >= 10
    for path in (["consume"], ["group", "describe"], ["ingest"]):  # as a user sees it
        r = litemq(*path, "--help")
        assert r.returncode == 0 and "LITEMQ_BOOTSTRAP_SERVER" in r.stdout, (path, r.stdout)
    for path in commands:  # every other one
        cmd = main
        ctx = click.Context(main, info_name="litemq")
        for name in path:
            cmd = cmd.commands[name]
            ctx = click.Context(cmd, info_name=name, parent=ctx)
        assert "LITEMQ_BOOTSTRAP_SERVER" in cmd.get_help(ctx), path


# ------------------------------------------------------------------ one import direction
def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that the module at ``path`` imports anywhere (top level, in
    functions, under TYPE_CHECKING)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == package:
                out |= {f"{package}.{a.name}" for a in node.names}
            elif node.module.startswith(package + "."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(package + ".")}
    return out


def test_cli_modules_import_each_other_in_one_direction():
    import litemq.cli

    root = Path(litemq.cli.__file__).parent
    graph = {f"litemq.cli.{p.stem}": _imports(p, "litemq.cli") for p in root.glob("*.py")}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                todo += graph[m]
        return False

    cycles = [(a, b) for a, deps in graph.items() for b in deps if reaches(b, a)]
    assert not cycles, cycles
