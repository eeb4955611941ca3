"""What a new user meets in the first ten minutes (issue 13, "New-user fixes"), with real
``litemq`` processes: one-line errors against a broker that is not running, bad settings named
as typed, ``cluster stop`` then ``cluster start`` at once, ``LITEMQ_BOOTSTRAP_SERVER``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from litemq.testing.process import free_port

CLIENT_COMMANDS = [
    ["topic", "list"],
    ["topic", "create", "t", "-p", "1"],
    ["topic", "describe", "t"],
    ["produce", "t"],
    ["consume", "t", "-n", "1"],
    ["group", "list"],
    ["group", "describe", "g"],
    ["ingest", __file__],  # no librdkafka error after 10 s
    ["pipeline", "run", "-o", "/nonexistent/litemq-pipeline-output", "--once", "logs"],  # no Spark job first
]


def _start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "litemq.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_client_commands_without_a_broker_print_one_line_quickly():
    """No broker on the port: every client command exits 1 within a few seconds with one line
    naming the address and the reason (not librdkafka's ~195 connection-refused log lines).
    Half of them get the address from LITEMQ_BOOTSTRAP_SERVER, which every client command honours."""
    dead = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, LITEMQ_BOOTSTRAP_SERVER=dead)
    t0 = time.monotonic()
    procs = [_start([*cmd, "-b", dead]) if i % 2 else _start(cmd, env) for i, cmd in enumerate(CLIENT_COMMANDS)]
    results = [(cmd, *p.communicate(timeout=30), p.returncode) for cmd, p in zip(CLIENT_COMMANDS, procs)]
    elapsed = time.monotonic() - t0
    for cmd, out, err, rc in results:
        lines = err.decode().splitlines()
        assert rc == 1, (cmd, rc, err)
        assert lines == [f"error: cannot reach a broker at {dead} (connection refused)"], (cmd, err)
        assert out == b"", cmd
    assert elapsed < 15, elapsed  # all in parallel; each gives up after CONNECT_GIVE_UP_S (4 s)


def test_unresolvable_bootstrap_host_is_one_line():
    p = _start(["topic", "list", "-b", "no-such-host.invalid:9092"])
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1
    assert err.decode().splitlines() == ["error: cannot reach a broker at no-such-host.invalid:9092 "
                                         "(cannot resolve host)"]


def test_bootstrap_server_variable_is_used(shared_broker):
    env = dict(os.environ, LITEMQ_BOOTSTRAP_SERVER=shared_broker.bootstrap_servers)
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "topic", "create", "nu-env", "-p", "2"],
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "topic", "list"], capture_output=True, env=env,
                       timeout=60)
    assert r.returncode == 0 and b"nu-env" in r.stdout, r


def _litemq(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, env=env,
                          timeout=timeout)


def _one_error_line(r: subprocess.CompletedProcess, expected: str) -> None:
    assert r.returncode == 1, r
    assert r.stderr.decode().splitlines() == [f"error: {expected}"], r.stderr
    assert b"Traceback" not in r.stdout + r.stderr


def test_cluster_stop_then_start_at_once_on_the_same_ports(tmp_path):
    """Connections the stopped brokers closed linger in TIME-WAIT on their ports; that is not
    "in use" (every listener binds with SO_REUSEADDR), so a restart on the same ports works."""
    import socket

    from litemq.testing.cluster import HOST, free_base_port

    base = free_base_port(1)
    data = str(tmp_path / "c")
    start = ["cluster", "start", "-n", "1", "--base-port", str(base), "--data-dir", data, "--timeout", "30"]
    r = _litemq(*start)
    assert r.returncode == 0, r.stderr
    try:
        # idle connections to both listeners: the broker closes them when it stops (TIME-WAIT there)
        conns = [socket.create_connection((HOST, port)) for port in (base, base + 100)]
        r = _litemq("cluster", "stop", "--data-dir", data)
        assert r.returncode == 0, r.stderr
        for c in conns:
            assert c.recv(1) == b""  # closed by the broker first
            c.close()
        t0 = time.monotonic()
        r = _litemq(*start)
        assert r.returncode == 0, r.stderr + r.stdout
        assert b"cluster ready" in r.stdout
        assert time.monotonic() - t0 < 30
    finally:
        _litemq("cluster", "stop", "--data-dir", data)


def test_serve_bad_numeric_settings_are_one_line_naming_the_setting(tmp_path):
    cases = {"message.max.bytes=-5": "invalid value -5 for configuration message.max.bytes: value must be at least 0",
             "log.segment.bytes=0": "invalid value 0 for configuration log.segment.bytes: value must be at least "
                                    "1048576",
             "num.partitions=0": "invalid value 0 for configuration num.partitions: value must be between 1 and "
                                 "10000",
             "log.roll.hours=0": "invalid value 0 for configuration log.roll.hours: value must be at least 1",
             "num.partitions=x": "bad value for num.partitions: 'x' (invalid literal for int() with base 10: 'x')"}
    procs = {o: _start(["serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "-o", o])
             for o in cases}
    for o, p in procs.items():
        out, err = p.communicate(timeout=60)
        _one_error_line(subprocess.CompletedProcess(p.args, p.returncode, out, err), cases[o])
    r = _litemq("serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "--num-partitions", "0")
    _one_error_line(r, cases["num.partitions=0"])
    assert not (tmp_path / "d").exists()  # refused before anything was created


def test_cluster_start_checks_settings_before_starting_brokers(tmp_path):
    r = _litemq("cluster", "start", "-n", "1", "--base-port", "9092", "--data-dir", str(tmp_path / "c"),
                "-o", "message.max.bytes=-5")
    _one_error_line(r, "invalid value -5 for configuration message.max.bytes: value must be at least 0")
    assert not (tmp_path / "c").exists()


def test_embedded_broker_bad_setting_is_a_value_error_naming_it(tmp_path):
    import pytest

    import litemq

    with pytest.raises(ValueError, match="^invalid value 0 for configuration log.segment.bytes: "):
        litemq.Broker(data_dir=tmp_path, log_segment_bytes=0)
    with pytest.raises(ValueError, match="^invalid value -5 for configuration message.max.bytes: "):
        litemq.Broker(data_dir=tmp_path, overrides={"message.max.bytes": "-5"})
    with pytest.raises(ValueError, match="^invalid value 0 for configuration num.partitions: "):
        litemq.Broker(data_dir=tmp_path, num_partitions=0)


def test_log_setting_bounds_equal_the_topic_config_bounds():
    """Each log.* broker default feeds a topic config (LogConfig): their lower bounds agree, so
    a value the broker accepts never fails later under the topic config's name."""
    from litemq.config import SETTING_BOUNDS, BrokerConfig
    from litemq.storage.config import LogConfig

    topic_name = {"log.segment.bytes": "segment.bytes", "log.roll.ms": "segment.ms",
                  "log.retention.ms": "retention.ms", "log.retention.bytes": "retention.bytes",
                  "log.flush.interval.messages": "flush.messages", "log.flush.interval.ms": "flush.ms",
                  "log.index.interval.bytes": "index.interval.bytes",
                  "log.segment.index.bytes": "segment.index.bytes", "message.max.bytes": "max.message.bytes"}
    for broker_name, topic in topic_name.items():
        lo = SETTING_BOUNDS[broker_name][0]
        defaults = BrokerConfig.from_sources(overrides={broker_name: str(lo)}).log_config_defaults()
        assert LogConfig.from_kafka_configs({topic: defaults[topic]}).to_kafka_configs()[topic] == str(lo)
        try:
            LogConfig.from_kafka_configs({topic: str(lo - 1)})
        except ValueError:
            continue
        raise AssertionError(f"{topic}={lo - 1} accepted but {broker_name} refuses it")


def test_topic_describe_names_config_sources(tmp_path):
    """Config sources by Kafka's names, as kafka-configs.sh prints them: a topic override is
    DYNAMIC_TOPIC_CONFIG, a value from the broker's own settings STATIC_BROKER_CONFIG, the rest
    DEFAULT_CONFIG (confluent-kafka hands the CLI bare numbers)."""
    from litemq.testing.process import BrokerProcess

    with BrokerProcess(tmp_path / "d", overrides={"log.retention.ms": "1000000"}) as broker:
        b = ["-b", broker.bootstrap_servers]
        assert _litemq("topic", "create", "nu-src", "-c", "segment.bytes=2097152", *b).returncode == 0
        r = _litemq("topic", "describe", "nu-src", *b)
    assert r.returncode == 0, r.stderr
    rows = {cells[0]: cells[1:] for cells in (
        [c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.decode().splitlines() if "│" in line)
        if len(cells) == 3}
    assert rows["segment.bytes"] == ["2097152", "DYNAMIC_TOPIC_CONFIG"]
    assert rows["retention.ms"] == ["1000000", "STATIC_BROKER_CONFIG"]
    assert rows["cleanup.policy"] == ["delete", "DEFAULT_CONFIG"]


def test_every_command_with_a_bootstrap_server_reads_the_variable():
    """Every ``litemq`` command taking ``-b/--bootstrap-server`` (now and later ones) also reads
    LITEMQ_BOOTSTRAP_SERVER, and the README's command table lists every top-level command."""
    from pathlib import Path

    import click

    from litemq.cli.app import main

    def walk(cmd: click.Command, path: str):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{path} {name}")

    with_bootstrap = []
    for path, cmd in walk(main, "litemq"):
        for p in cmd.params:
            if "--bootstrap-server" in getattr(p, "opts", []):
                with_bootstrap.append(path)
                assert p.envvar == "LITEMQ_BOOTSTRAP_SERVER", path
    assert {"litemq topic create", "litemq produce", "litemq consume", "litemq group list",
            "litemq ingest", "litemq pipeline run"} <= set(with_bootstrap)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "LITEMQ_BOOTSTRAP_SERVER" in readme
    for name in main.commands:
        assert f"`litemq {name}" in readme, f"README does not list `litemq {name}`"
