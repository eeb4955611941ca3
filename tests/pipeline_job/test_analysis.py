"""The per-source analysis the Spark operator runs (no Spark here): results do not depend on how
the stream is cut into micro-batches; windows, watermark and alerts."""

from __future__ import annotations

import pandas as pd

from litemq.pipeline.analysis import AnalysisConfig, process_source
from litemq.pipeline.demo_data import access_log_path
from litemq.pipeline.ingest import iter_file_lines

from .reference import access_counts


def _frame(lines, start=0):
    return pd.DataFrame({"source": "s", "fmt_hint": None, "topic": "t", "partition": 0,
                         "offset": range(start, start + len(lines)), "timestamp_ms": 0, "value": lines})


def _run(lines, cuts, cfg=AnalysisConfig()):
    state, outs, i = None, [], 0
    for n in cuts + [len(lines)]:
        rows, state = process_source("s", _frame(lines[i:i + n] if n else [], i), state, cfg)
        outs.append(rows)
        i += n
        if i >= len(lines):
            break
    rows = pd.concat([o for o in outs if len(o)], ignore_index=True)
    win = rows[rows.kind == "window"].drop_duplicates(["window_start"], keep="last")
    tpl = rows[rows.kind == "template"].drop_duplicates(["window_start", "level", "template_id"], keep="last")
    return win.set_index("window_start").sort_index(), tpl, rows[rows.kind == "alert"]


def test_batching_does_not_change_results_and_matches_plain_count():
    lines = list(iter_file_lines(access_log_path()))
    w1, t1, a1 = _run(lines, [])
    w2, t2, a2 = _run(lines, [1, 7, 500, 0, 1234, 3000, 2])
    cols = ["lines", "errors", "warns", "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes",
            "new_templates", "top_paths"]
    pd.testing.assert_frame_equal(w1[cols], w2[cols])
    assert list(a1.message) == list(a2.message)
    ref = access_counts(access_log_path())["per_minute"]
    got = {ts.tz_convert(None).to_pydatetime(): r for ts, r in w1.iterrows()}
    assert set(got) == set(ref)
    for minute, c in ref.items():
        r = got[minute]
        for k in ("lines", "errors", "warns", "bytes", "status_2xx", "status_3xx", "status_4xx", "status_5xx"):
            assert r[k] == c.get(k, 0), (minute, k)
    # per template and level counts add up to the window's lines
    per_window = t1.groupby("window_start")["count"].sum()
    assert (per_window.sort_index().values == w1["lines"].values).all()


def _hdfs(t_s, level, msg):
    import time

    tm = time.gmtime(t_s)
    return (f"{tm.tm_year % 100:02d}{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}{tm.tm_min:02d}{tm.tm_sec:02d} "
            f"42 {level} dfs.DataNode: {msg}").encode()


def test_alerts_error_rate_jump_template_jump_new_template_and_late_lines():
    t0 = 1_226_000_000 - 1_226_000_000 % 60
    lines = []
    for minute in range(12):                    # 12 quiet minutes: 30 INFO, 1 ERROR
        for i in range(30):
            lines.append(_hdfs(t0 + minute * 60 + i, "INFO", f"Receiving block blk_{minute}{i} src: /10.0.0.{i}"))
        lines.append(_hdfs(t0 + minute * 60 + 40, "ERROR", f"Exception in receiveBlock for block blk_{minute}"))
    for i in range(60):                         # minute 12: error burst with a brand-new template
        lines.append(_hdfs(t0 + 12 * 60 + i % 60, "ERROR", f"DataXceiver: java.io.IOException: Connection reset by peer {i}"))
    lines.append(_hdfs(t0 + 30 * 60, "INFO", "Receiving block blk_9 src: /10.0.0.9"))   # closes minute 12
    lines.append(_hdfs(t0 + 60, "INFO", "Receiving block blk_late src: /10.0.0.1"))    # late: minute 1 is closed
    cfg = AnalysisConfig(warmup_lines=100, watermark_s=120)
    win, _tpl, alerts = _run(lines, [200, 300], cfg)
    kinds = alerts.alert_type.value_counts().to_dict()
    assert kinds.get("error_rate_jump") == 1, alerts.message.tolist()
    assert kinds.get("template_jump") == 1 and kinds.get("new_template") == 1
    jump = alerts[alerts.alert_type == "error_rate_jump"].iloc[0]
    assert jump.window_start == pd.Timestamp((t0 + 12 * 60) * 1000, unit="ms", tz="UTC")
    assert win["late_lines"].sum() == 1
    assert win["lines"].sum() == len(lines)         # the late line is counted, not dropped


def test_year_hint_dates_yearless_lines():
    """The ``year`` header the ingester sends (column ``year_hint``) dates the lines of a format
    without a year in the analysis too; it is kept in the source's state for later batches."""
    line = b"Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass; user unknown"
    first = _frame([line] * 3).assign(fmt_hint="linux", year_hint="2005")
    rows, state = process_source("s", first, None, AnalysisConfig())
    later = _frame([line], 3).assign(fmt_hint="linux", year_hint=None)
    rows2, _ = process_source("s", later, state, AnalysisConfig())
    starts = set(pd.concat([rows, rows2])["window_start"].dropna())
    assert starts and {t.year for t in starts} == {2005}
    no_hint, _ = process_source("s", _frame([line]).assign(fmt_hint="linux"), None, AnalysisConfig())
    years = {t.year for t in no_hint["window_start"].dropna()}
    assert years and 2005 not in years
