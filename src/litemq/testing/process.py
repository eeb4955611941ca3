"""Real broker processes for tests and tools: start, SIGKILL, SIGSTOP/SIGCONT, restart.

``BrokerProcess`` runs ``python -m litemq.cli serve`` as a child process on a free loopback
port and waits until it accepts connections. Used by LiteMQ's own fault tests and available to
users who want a broker in a separate process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 30.0

HARNESS_OVERRIDES: dict[str, str] = {"group.initial.rebalance.delay.ms": "0"}
"""Settings every test-harness broker starts with unless the caller overrides them: consumer
groups form at once instead of after Kafka's default 3 s initial rebalance delay, as in Kafka's
own test configs (``TestUtils.createBrokerConfig``) and its shipped ``config/server.properties``.
``litemq serve`` and ``litemq.Broker()`` keep Kafka's default."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    """

    def __init__(self, data_dir: str | Path, port: int = 0, overrides: dict[str, str] | None = None,
                 log_path: str | Path | None = None, extra_args: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.overrides = {**HARNESS_OVERRIDES, **(overrides or {})}
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"broker-{self.port}.log"
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "BrokerProcess":
        args = [sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(self.data_dir),
                "--listen", f"127.0.0.1:{self.port}"]
        for k, v in self.overrides.items():
            args += ["-o", f"{k}={v}"]
        args += self.extra_args
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            wait_for_port("127.0.0.1", self.port)
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
