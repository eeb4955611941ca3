"""A Spark standalone cluster (one master, N workers) from the pip-installed PySpark, on loopback.

The pip wheel of PySpark ships the jars and ``bin/spark-class`` but not ``sbin/start-master.sh``
or ``sbin/start-worker.sh``, so :class:`SparkStandalone` runs the daemons' main classes
(``org.apache.spark.deploy.master.Master``, ``org.apache.spark.deploy.worker.Worker``) through
``spark-class`` as child processes, each in its own process group: stopping a worker's group also
ends the executor JVMs and Python workers it launched. Every worker has its own work directory
(``base_dir/worker-<i>/work``), where it puts one directory per executor
(``<app id>/<executor id>/`` with the executor's stdout and stderr), so a test can tell which
worker ran which executor.

Used by ``tests/spark/test_standalone_cluster.py``; the same commands as plain shell are in
``docs/pipeline.md`` ("Running on a Spark standalone cluster").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from litemq.testing.cluster import HOST
from litemq.testing.process import free_port, wait_for_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90.0
"""How long the master may take to listen and every worker to register with it (seconds)."""
STOP_TIMEOUT_S = 20.0
"""How long a daemon's process group gets after SIGTERM before SIGKILL (seconds)."""
DAEMON_MEMORY = "256m"
"""Heap of the master and worker daemons themselves (``SPARK_DAEMON_MEMORY``; Spark's default is 1g)."""


def spark_home() -> Path:
    """The pip-installed PySpark's directory, which is a SPARK_HOME (``bin/``, ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """A standalone master and ``workers`` workers, each a separate JVM, on ``host``.

    Args:
        base_dir: logs (``master.log``, ``worker-<i>.log``) and the workers' work directories.
        workers: number of workers.
        cores: cores each worker offers (``--cores``).
        memory: memory each worker offers to executors (``--memory``, e.g. ``"1g"``).
        host: address every daemon binds to and advertises (also ``SPARK_LOCAL_IP``).
        port: master port; 0 = a free one (Spark's default is 7077).
        webui_port: master web UI port (its JSON at ``/json/``); 0 = a free one (Spark: 8080).
            The workers' web UIs get free ports.

    ``master_url`` is ``spark://host:port``. Use as a context manager or call :meth:`start` and
    :meth:`stop`.
    """

    def __init__(self, base_dir: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 host: str = HOST, port: int = 0, webui_port: int = 0) -> None:
        if workers < 1:
            raise ValueError(f"a standalone cluster needs at least one worker, not {workers}")
        self.base_dir = Path(base_dir).absolute()
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.port = port or free_port()
        self.webui_port = webui_port or free_port()
        self.master_url = f"spark://{host}:{self.port}"
        self.webui_url = f"http://{host}:{self.webui_port}"
        self.procs: list[subprocess.Popen] = []
        self._logs: list = []

    def work_dir(self, worker: int) -> Path:
        """Work directory of worker ``worker`` (1-based): ``<app id>/<executor id>/`` per executor."""
        return self.base_dir / f"worker-{worker}" / "work"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=self.host, SPARK_DAEMON_MEMORY=DAEMON_MEMORY)
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.base_dir / f"{name}.log", "wb")
        self._logs.append(log)
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self._env(),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "SparkStandalone":
        """Start the master, then the workers, and wait until the master lists every worker ALIVE.

        Raises:
            TimeoutError: not within ``timeout_s`` seconds (everything started is stopped; the
                logs stay in ``base_dir``).
            RuntimeError: a daemon exited while starting.
        """
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            master = self._spawn("master", [MASTER_CLASS, "--host", self.host, "--port", str(self.port),
                                            "--webui-port", str(self.webui_port)])
            wait_for_port(self.host, self.port, timeout_s)
            for i in range(1, self.n_workers + 1):
                self.work_dir(i).mkdir(parents=True, exist_ok=True)
                self._spawn(f"worker-{i}", [WORKER_CLASS, "--host", self.host, "--webui-port", "0",
                                            "--cores", str(self.cores), "--memory", self.memory,
                                            "--work-dir", str(self.work_dir(i)), self.master_url])
            deadline = time.monotonic() + timeout_s
            while len(self.alive_workers()) < self.n_workers:
                dead = [p for p in self.procs if p.poll() is not None]
                if dead or master.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited while starting; logs in {self.base_dir}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(self.alive_workers())} of {self.n_workers} workers registered with "
                                       f"{self.master_url} after {timeout_s}s; logs in {self.base_dir}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def master_state(self, timeout_s: float = 2.0) -> dict:
        """The master's JSON state (``GET /json/``: ``workers``, ``activeapps``, ``completedapps``...).

        Raises:
            OSError: the master's web UI does not answer.
        """
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout_s) as r:
            return json.loads(r.read())

    def alive_workers(self) -> list[dict]:
        """The workers the master lists as ALIVE (empty while it does not answer)."""
        try:
            return [w for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"]
        except (OSError, ValueError):
            return []

    def executors_by_worker(self, app_id: str) -> dict[int, list[str]]:
        """Worker number (1-based) -> ids of the executors of application ``app_id`` it launched
        (from the work directories)."""
        out = {}
        for i in range(1, self.n_workers + 1):
            d = self.work_dir(i) / app_id
            out[i] = sorted(e.name for e in d.iterdir()) if d.is_dir() else []
        return out

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every daemon's process group (workers first: a worker's shutdown kills its
        executors), SIGKILL what is left after ``timeout_s`` seconds. Idempotent."""
        for proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in reversed(self.procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)   # the group's leftovers (executors, Python workers)
            proc.wait()
        self.procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self) -> "SparkStandalone":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
