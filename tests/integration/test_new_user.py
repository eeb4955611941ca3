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
