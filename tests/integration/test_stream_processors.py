"""Python stream processors on LiteMQ: Quix Streams and Faust (faust-streaming), unchanged, with
exactly-once processing and state in changelog topics, against one broker and a 3-broker cluster
(replication factor 3).

They run in a venv of their own, ``.cache/stream-processors-venv``, built once from
``scripts/stream-processors/requirements.txt`` (pinned; Quix Streams needs confluent-kafka < 2.13,
below this project's pin). The applications are ``scripts/stream-processors/*.py``:

- Quix Streams: counts per key with RocksDB state, output and input offsets in one transaction;
  a second run with an empty state directory restores the counts from the changelog topic and
  goes on: every key ends at exactly twice its first count (no record lost or counted twice).
- Faust: counts per key in a table with aiokafka's transactional producers (one per input
  partition); every record is processed once and all N outputs are committed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litemq.testing.cluster import LocalCluster
from litemq.testing.process import BrokerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "scripts" / "stream-processors"
VENV = ROOT / ".cache" / "stream-processors-venv"
N = 1000

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def _venv_python() -> Path:
    """The venv's python, (re)built when requirements.txt changed (one builder at a time)."""
    requirements = APPS / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "stream-processors-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = VENV / "requirements.sha256"
        if not stamp.exists() or stamp.read_text() != digest:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True, timeout=300)
            subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "-r", str(requirements)], check=True, timeout=900)
            stamp.write_text(digest)
    return VENV / "bin" / "python"


@pytest.fixture(params=["one-broker", "cluster"])
def bootstrap(request, tmp_path):
    """(bootstrap servers, replication factor) of a fresh broker or 3-broker cluster."""
    if request.param == "one-broker":
        with BrokerProcess(tmp_path / "data") as broker:
            yield broker.bootstrap_servers, 1
    else:
        with LocalCluster(tmp_path / "cluster", 3) as cluster:
            cluster.wait_ready()
            yield cluster.bootstrap_servers, 3


def _run(args: list[str], bs: str, rf: int, tmp_path: Path) -> dict:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "BS": bs, "RF": str(rf), "N": str(N),
           "FAUST_DATADIR": str(tmp_path / "faust"), "FAUST_WEB_PORT": str(free_port())}
    run = subprocess.run([str(_venv_python()), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=400, stdin=subprocess.DEVNULL)
    # the last line holding a JSON object (a Faust worker logs what it prints: to stderr, with a header)
    lines = [line[line.index('{"'):].strip() for line in (run.stdout + run.stderr).splitlines() if '{"' in line]
    assert run.returncode == 0 and lines, (run.returncode, run.stdout[-3000:], run.stderr[-5000:])
    return json.loads(lines[-1])


def test_quix_streams_exactly_once_state_restored_from_its_changelog(bootstrap, tmp_path):
    bs, rf = bootstrap
    result = _run([str(APPS / "quix_app.py")], bs, rf, tmp_path)
    assert result["first"] == {f"k{i}": N // 5 for i in range(5)}, result
    assert result["second"] == {f"k{i}": 2 * N // 5 for i in range(5)}, result


def test_faust_exactly_once_table(bootstrap, tmp_path):
    bs, rf = bootstrap
    result = _run([str(APPS / "faust_app.py"), "worker", "-l", "warn"], bs, rf, tmp_path)
    assert result["processed"] == N and result["committed_outputs"] == N, result
    assert result["counts"] == {f"k{i}": N // 5 for i in range(5)}, result
