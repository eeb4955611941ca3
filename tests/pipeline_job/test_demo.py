"""``litemq demo`` (what ``bash scripts/demo.sh`` runs) as a subprocess: embedded broker, bundled
access log, Spark job until caught up, report; its aggregates equal a plain Python count."""

from __future__ import annotations

import subprocess
import sys

import pytest

from litemq.pipeline.demo_data import access_log_path

from .reference import access_counts
from .test_job import _assert_equal_to_reference

pytestmark = pytest.mark.slow


def test_demo_command_end_to_end(tmp_path):
    out = tmp_path / "demo-out"
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "demo", "-o", str(out)], capture_output=True, text=True,
                       timeout=600, env={**__import__("os").environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-4000:]
    assert "ingested 10,000 lines from 1 source(s)" in r.stderr
    assert "running the pipeline (spark)" in r.stderr                 # not the local fallback
    assert "report" in r.stdout and str(out / "report" / "report.md") in r.stdout
    assert "10,000" in r.stdout                                         # the summary table
    for f in ("report.md", "volume.png", "error_rate.png", "top_templates.png"):
        assert (out / "report" / f).stat().st_size > 0
    md = (out / "report" / "report.md").read_text()
    assert "| elastic_examples_apache_logs | apache_access | 10,000 |" in md
    _assert_equal_to_reference(out, {"elastic_examples_apache_logs": access_counts(access_log_path())})
