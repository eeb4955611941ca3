"""kafka-python's own integration tests against one LiteMQ broker and a 3-broker cluster
(``scripts/kafka-python-suite.sh``, docs/kafka-python-suite.md): a real client's suite, written
for real Kafka, must pass except for the known differences the script lists with their reasons.
The script fetches kafka-python's source distribution from PyPI into ``.cache/`` once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from litemq.testing.cluster import free_base_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("cluster", [False, True], ids=["one-broker", "cluster"])
def test_kafka_python_integration_suite_passes(cluster):
    base_port = free_base_port(3)
    env = {**os.environ, "KAFKA_PYTHON_SUITE_PORT": str(base_port),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(Path(sys.executable).parent.parent)}
    args = ["bash", "scripts/kafka-python-suite.sh", *(["--cluster"] if cluster else [])]
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=840,
                         stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "no unexpected failure" in run.stdout, out
    passed = int(re.search(r"(\d+) passed", run.stdout).group(1))
    # a test that failed once and passed when run again (kafka-python's metadata race) counts as passed
    flaky = run.stdout.count("flaky (passed when run again):")
    known = run.stdout.count("failed as expected:")
    assert passed + flaky >= 51, out  # 54 tests run; on the cluster at most the 3 known differences fail
    assert known <= (3 if cluster else 0), out
