"""``litemq demo`` (what ``bash scripts/demo.sh`` runs) as a subprocess: embedded broker, bundled
access log and this machine's own logs, Spark job until caught up, report; the access log's
aggregates equal a plain Python count."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from litemq.pipeline.demo_data import access_log_path
from litemq.pipeline.local_sources import machine_log_sources

from .reference import access_counts
from .test_job import _assert_equal_to_reference

pytestmark = pytest.mark.slow


def test_demo_command_end_to_end(tmp_path):
    """The access log plus this machine's own logs (each its own source); loghub left out to stay short."""
    found = machine_log_sources(tmp_path, log=lambda _line: None)
    out = tmp_path / "demo-out"
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "demo", "--no-loghub", "-o", str(out)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-4000:]
    assert re.search(rf"ingested [\d,]+ lines from {1 + len(found)} source\(s\)", r.stderr), r.stderr[-2000:]
    for m in found:
        assert f"machine log {m.name}: {m.origin} ({m.fmt})" in r.stderr
    assert "running the pipeline (spark)" in r.stderr                 # not the local fallback
    assert "report" in r.stdout and str(out / "report" / "report.md") in r.stdout
    assert "10,000" in r.stdout                                         # the summary table
    for f in ("report.md", "volume.png", "error_rate.png", "top_templates.png"):
        assert (out / "report" / f).stat().st_size > 0
    md = (out / "report" / "report.md").read_text()
    assert "| elastic_examples_apache_logs | apache_access | 10,000 |" in md
    for m in found:
        assert f"| {m.name} | {m.fmt} | " in md
    _assert_equal_to_reference(out, {"elastic_examples_apache_logs": access_counts(access_log_path())},
                               other_sources=True)
