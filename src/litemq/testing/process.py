"""Real broker processes for tests and tools: start, SIGKILL, SIGSTOP/SIGCONT, restart.

``BrokerProcess`` runs ``python -m litemq.cli serve`` as a child process on free loopback
ports (one per listener) and waits until every listener accepts connections. Used by LiteMQ's
own fault tests and available to users who want a broker in a separate process.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 30.0

HOST = "127.0.0.1"

HARNESS_OVERRIDES: dict[str, str] = {"group.initial.rebalance.delay.ms": "0",
                                     "leader.imbalance.check.interval.ms": "5000"}
"""Settings every test-harness broker starts with unless the caller overrides them: consumer
groups form at once instead of after Kafka's default 3 s initial rebalance delay, as in Kafka's
own test configs (``TestUtils.createBrokerConfig``) and its shipped ``config/server.properties``;
a restarted broker gets its preferred leaderships back within 5 s instead of Kafka's 5 minutes.
``litemq serve`` and ``litemq.Broker()`` keep Kafka's defaults."""


TEST_PORT_RANGE = (10000, 32000)
"""Ports the test processes of a parallel run (pytest-xdist) pick from, below Linux's usual
ephemeral range (32768 up, which the kernel gives outgoing connections and ``bind(0)``)."""
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=512)
"""Ports this process handed out lately: a port picked but not yet bound by its broker looks
free, so it is not picked again."""


def worker_port_range() -> tuple[int, int] | None:
    """This pytest-xdist worker's own slice ``[lo, hi)`` of :data:`TEST_PORT_RANGE`, or None
    outside a parallel run. Workers never pick the same port, so one worker's broker cannot
    take the port another worker's broker is about to bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return None
    lo, hi = TEST_PORT_RANGE
    size = (hi - lo) // count
    index = int(worker[2:]) % count
    return lo + index * size, lo + (index + 1) * size


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when a listener could bind ``host:port`` right now.

    The probe sets SO_REUSEADDR, as every LiteMQ listener does (asyncio's ``create_server``), so
    connections of a stopped broker lingering in TIME-WAIT do not count as "in use"; a socket
    listening on the port does (Linux refuses that bind even with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def claim_ports(ports: list[int]) -> bool:
    """Whether every one of ``ports`` is free and not handed out lately; if so they are
    remembered as handed out."""
    if any(p in _RECENT_PORTS for p in ports) or not all(port_is_free(p) for p in ports):
        return False
    _RECENT_PORTS.extend(ports)
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: the kernel's pick (``bind(0)``), or
    in a parallel test run one from this worker's :func:`worker_port_range`.

    Raises:
        RuntimeError: a parallel run's worker found no free port in 1000 tries.
    """
    rng = worker_port_range()
    if rng is None:
        with socket.socket() as s:
            s.bind((HOST, 0))
            return s.getsockname()[1]
    for _ in range(1000):
        port = random.randrange(*rng)
        if claim_ports([port]):
            return port
    raise RuntimeError(f"no free port in {rng[0]}..{rng[1]}")


def distinct_free_port(taken: set[int]) -> int:
    """A free port (as :func:`free_port`) not in ``taken``; it is added to ``taken``."""
    while True:
        port = free_port()
        if port not in taken:
            taken.add(port)
            return port


def wait_for_port(host: str, port: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Block until ``host:port`` accepts a TCP connection; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s}s")


class BrokerProcess:
    """One ``litemq serve`` child process.

    Args:
        data_dir: the broker's log directory (kept across restarts).
        port: listen port; 0 picks a free one once (kept across restarts).
        overrides: broker settings by Kafka name (``{"num.partitions": "3"}``), applied over
            :data:`HARNESS_OVERRIDES` (pass ``{"group.initial.rebalance.delay.ms": "3000"}`` for
            Kafka's default group formation delay).
        log_path: file receiving the broker's stdout and stderr (appended across restarts).
        extra_args: more ``litemq serve`` arguments, appended after the others (e.g. the
            cluster options ``["--node-id", "2", "--rpc-listen", ..., "--peers", ...]``).
        listeners: listener name -> port on 127.0.0.1 (0 picks a free one once), e.g.
            ``{"PLAINTEXT": 0, "SSL": 0, "SASL_SSL": 0}``; replaces ``port`` (the broker gets
            ``listeners=NAME://127.0.0.1:PORT,...``). TLS listeners need ``ssl.*`` overrides.
        http_port: the broker's HTTP port (``/metrics``, console, REST API) on 127.0.0.1: None =
            off (unless ``overrides`` set ``http.listen``), 0 = a free one picked once (kept across
            restarts).

    Attributes:
        ports: listener name -> port (``{"PLAINTEXT": port}`` without ``listeners``).
        port: the first listener's port.
        http_port: the HTTP port, or None when off.
    """

    def __init__(self, data_dir: str | Path, port: int = 0, overrides: dict[str, str] | None = None,
                 log_path: str | Path | None = None, extra_args: list[str] | None = None,
                 listeners: dict[str, int] | None = None, http_port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.listeners_given = bool(listeners)
        if listeners:
            taken: set[int] = {p for p in listeners.values() if p}
            self.ports = {name.upper(): p or distinct_free_port(taken) for name, p in listeners.items()}
        else:
            self.ports = {"PLAINTEXT": port or free_port()}
        self.port = next(iter(self.ports.values()))
        self.overrides = {**HARNESS_OVERRIDES, **(overrides or {})}
        taken_ports = set(self.ports.values())
        self.http_port = None if http_port is None else (http_port or distinct_free_port(taken_ports))
        if "http.listen" not in self.overrides:  # a harness broker never takes the default 8082
            self.overrides["http.listen"] = "off" if self.http_port is None else f"{HOST}:{self.http_port}"
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"broker-{self.port}.log"
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:port`` of the first listener."""
        return f"{HOST}:{self.port}"

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https://`` with ``http.ssl.enabled=true``) of the HTTP
        port. Raises RuntimeError when it is off."""
        if self.http_port is None:
            raise RuntimeError("this BrokerProcess has no HTTP port (pass http_port=0)")
        scheme = "https" if str(self.overrides.get("http.ssl.enabled", "")).lower() == "true" else "http"
        return f"{scheme}://{HOST}:{self.http_port}"

    def bootstrap(self, listener: str | None = None) -> str:
        """``127.0.0.1:port`` of ``listener`` (the first one when None). Raises KeyError."""
        return f"{HOST}:{self.port if listener is None else self.ports[listener.upper()]}"

    def start(self) -> "BrokerProcess":
        """Start the process and wait until every listener accepts TCP connections.

        Raises:
            RuntimeError: not listening within 30 s (the log tail is in the message).
        """
        args = [sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(self.data_dir)]
        if self.listeners_given:
            args += ["-o", "listeners=" + ",".join(f"{n}://{HOST}:{p}" for n, p in self.ports.items())]
        else:
            args += ["--listen", f"{HOST}:{self.port}"]
        for k, v in self.overrides.items():
            args += ["-o", f"{k}={v}"]
        args += self.extra_args
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            for port in [*self.ports.values(), *([self.http_port] if self.http_port else [])]:
                wait_for_port(HOST, port, max(deadline - time.monotonic(), 0.1))
        except TimeoutError:
            self.kill()
            raise RuntimeError(f"broker did not start; log:\n{self.log_path.read_text()[-4000:]}") from None
        return self

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (clean shutdown) and wait; returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: no flush, no clean-shutdown marker."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> "BrokerProcess":
        if self.proc is not None:
            self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            try:
                self.stop(timeout_s=15)
            except subprocess.TimeoutExpired:
                self.kill()
