"""The main job with several real sources (issue 17): the machine's own logs are found (absent,
empty, unreadable and unknown-format candidates skipped with one line each), and the pipeline on
an embedded broker yields one series per source in the report, with 1400 px wide charts.
Samples: real Debian 12 log lines (tests/pipeline/test_machine_formats.py)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import matplotlib.image

from litemq.embedded import Broker
from litemq.pipeline.ingest import ingest
from litemq.pipeline.job import run_pipeline
from litemq.pipeline.local_sources import loghub_dir, loghub_sets, machine_log_sources
from litemq.pipeline.report import build_report, small_multiples_figure, summarize
from litemq.pipeline.sinks import load_aggregates

from ..pipeline.test_machine_formats import ALTERNATIVES, APT_HISTORY, APT_TERM, DPKG, SYSLOG_ISO


def _machine(tmp_path):
    logs = tmp_path / "var-log"
    (logs / "apt").mkdir(parents=True)
    (logs / "dpkg.log").write_text(DPKG)
    (logs / "alternatives.log").write_text(ALTERNATIVES)
    (logs / "apt" / "history.log").write_text(APT_HISTORY)
    (logs / "apt" / "term.log").write_text(APT_TERM)
    (logs / "syslog").write_text(SYSLOG_ISO)
    (logs / "fontconfig.log").write_text("Font directories:\n\t/usr/share/fonts\n")   # not a log format
    (logs / "empty.log").write_text("")
    (logs / "dir.log").mkdir()
    cands = (("dpkg", str(logs / "dpkg.log")), ("alternatives", str(logs / "alternatives.log")),
             ("apt_history", str(logs / "apt" / "history.log")), ("apt_term", str(logs / "apt" / "term.log")),
             ("syslog", str(logs / "syslog")), ("messages", str(logs / "messages")))
    links = tmp_path / "links"
    links.mkdir()
    skipped: list[str] = []
    found = machine_log_sources(links, log=skipped.append, candidates=cands, var_log_dir=logs)
    return found, skipped, logs


def test_machine_logs_found_and_skipped_with_one_line_each(tmp_path):
    found, skipped, logs = _machine(tmp_path)
    assert [(m.name, m.fmt) for m in found] == [("dpkg", "dpkg"), ("alternatives", "alternatives"),
                                                ("apt_history", "apt_history"), ("apt_term", "apt_term"),
                                                ("syslog", "syslog_iso")]
    assert all(m.path.resolve() == __import__("pathlib").Path(m.origin).resolve() for m in found)
    assert sorted(skipped) == sorted([f"skipped {logs / 'messages'}: not present",
                                      f"skipped {logs / 'dir.log'}: not a regular file",
                                      f"skipped {logs / 'empty.log'}: empty",
                                      f"skipped {logs / 'fontconfig.log'}: format not recognised",
                                      "skipped journal: the syslog file has the same messages"])


def test_loghub_dir_honours_the_env_var(tmp_path, monkeypatch):
    for s in ("HDFS", "Linux"):
        (tmp_path / "loghub" / s).mkdir(parents=True)
        (tmp_path / "loghub" / s / f"{s}_2k.log").write_text("x\n")
    (tmp_path / "loghub" / "README.md").write_text("x")
    monkeypatch.setenv("LITEMQ_LOGHUB_DIR", str(tmp_path))
    assert loghub_dir() == tmp_path
    assert loghub_sets() == [tmp_path / "loghub" / "HDFS" / "HDFS_2k.log", tmp_path / "loghub" / "Linux" / "Linux_2k.log"]
    assert loghub_sets(tmp_path / "nothing") == []


def test_pipeline_on_embedded_broker_reports_one_series_per_source(tmp_path):
    found, _skipped, _logs = _machine(tmp_path)
    out = tmp_path / "out"
    with Broker(data_dir=tmp_path / "broker", num_partitions=1) as b:
        stats = ingest([str(m.path) for m in found], b.bootstrap_servers, topic_prefix="logs.")
        assert stats.errors == 0
        assert stats.per_source["apt_history"] == 2          # one record per stanza
        res = run_pipeline(b.bootstrap_servers, [r"logs\..*"], out, once=True, engine="local")
        assert res.batches >= 1
    md = build_report(out).read_text()
    summary = summarize(out).set_index("source")
    assert dict(summary["format"]) == {"dpkg": "dpkg", "alternatives": "alternatives", "apt_history": "apt_history",
                                       "apt_term": "apt_term", "syslog": "syslog_iso"}
    assert dict(summary["lines"]) == {"dpkg": 8, "alternatives": 3, "apt_history": 2, "apt_term": 9, "syslog": 3}
    assert dict(summary["errors"]) == {"dpkg": 0, "alternatives": 0, "apt_history": 1, "apt_term": 2, "syslog": 0}
    for source in summary.index:
        assert re.search(rf"^\| {source} \| {summary.loc[source, 'format']} \| ", md, re.M), source
    # term.log's lines without a time are dated by their "Log started:" header, not by when they were read
    win = load_aggregates(out, "windows")
    term = win[win.source == "apt_term"]
    assert set(term["window_start"]) == {datetime(2025, 6, 24, 14, 36, tzinfo=timezone.utc)}
    fig = small_multiples_figure(win, list(summary.index), lambda g: g["lines"], "lines", "t", errors=True)
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert sorted(t.split(" (")[0] for t in titles) == sorted(summary.index)     # one panel per source
    for name in ("volume.png", "error_rate.png", "top_templates.png"):
        img = matplotlib.image.imread(out / "report" / name)
        assert img.shape[1] >= 1200, (name, img.shape)
    assert matplotlib.image.imread(out / "report" / "volume.png").shape[1] == 1400
