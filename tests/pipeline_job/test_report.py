"""The end-of-run report (issue 13): alerts by severity, a readable top-templates chart, gappy
error-rate lines drawn as points, dates with the year. The output directory is written by the
job's own sinks (``Sinks.write_batch``) from rows built here, then read back by the report."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd

from litemq.pipeline.report import build_report, load_aggregates, small_multiples_figure, top_templates_figure
from litemq.pipeline.sinks import ALERT_COLUMNS, TEMPLATE_COLUMNS, WINDOW_COLUMNS, Sinks

T0 = datetime(2015, 5, 17, 10, 0, tzinfo=timezone.utc)
T1 = datetime(2023, 11, 2, 8, 0, tzinfo=timezone.utc)  # a second source, years later


def _window(source: str, start: datetime, lines: int, errors: int) -> dict:
    return {"kind": "window", "source": source, "fmt": "syslog", "window_start": start,
            "window_end": start + timedelta(minutes=1), "final": True, "lines": lines, "errors": errors, "warns": 0,
            "error_rate": errors / lines if lines else None, "late_lines": 0, "new_templates": 0}


def _template(source: str, start: datetime, tid: str, count: int) -> dict:
    return {"kind": "template", "source": source, "fmt": "syslog", "window_start": start,
            "window_end": start + timedelta(minutes=1), "final": True, "level": "INFO", "template_id": int(tid),
            "template": f"template {tid} <*>", "count": count}


def _alert(source: str, start: datetime, kind: str, i: int) -> dict:
    return {"kind": "alert", "source": source, "fmt": "syslog", "window_start": start,
            "window_end": start + timedelta(minutes=1), "alert_type": kind, "template_id": i,
            "message": f"{source}: {kind} {i}"}


def _output(tmp_path):
    rows = []
    # source a: data in minutes 0-2 and 9 hours later: the hourly error-rate series has gaps
    for m in (0, 1, 2):
        rows.append(_window("a", T0 + timedelta(minutes=m), 100, 5))
    rows.append(_window("a", T0 + timedelta(hours=9), 50, 25))
    for h in range(72):  # source b: three days, a window every hour (hourly resolution, no gaps)
        rows.append(_window("b", T1 + timedelta(hours=h), 10, h % 2))
    rows += [_template("a", T0, "1", 50_000), _template("a", T0, "2", 40), _template("b", T1, "3", 7)]
    # 60 new-template notices before (in time) the two jumps
    rows += [_alert("a", T0 + timedelta(seconds=i), "new_template", i) for i in range(60)]
    rows += [_alert("a", T0 + timedelta(hours=9), "template_jump", 100),
             _alert("a", T0 + timedelta(hours=9), "error_rate_jump", 101)]
    cols = ["kind", *dict.fromkeys(WINDOW_COLUMNS + TEMPLATE_COLUMNS + ALERT_COLUMNS)]
    Sinks(tmp_path, None, produce=False).write_batch(pd.DataFrame(rows).reindex(columns=cols), 0)
    return tmp_path


def test_alerts_are_listed_by_severity(tmp_path):
    md = build_report(_output(tmp_path)).read_text()
    table = [line for line in md.split("## Alerts")[1].splitlines() if line.startswith("| ")]
    assert table[0].startswith("| severity | window | source | type |")
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table[1:]]
    assert [r[0] for r in rows[:2]] == ["error", "warning"]
    assert [r[3] for r in rows[:2]] == ["error_rate_jump", "template_jump"]
    assert all(r[3] == "new_template" for r in rows[2:50])
    assert rows[-1][4] == "12 more in `alerts/`: new_template 12"
    assert "62 alerts: error_rate_jump 1, template_jump 1, new_template 60 (most severe first)" in md


def test_error_rate_is_drawn_as_markers_and_dates_have_the_year(tmp_path):
    """Issue 17: error spikes are markers on stems (a line between sparse points drew triangles),
    one panel per source, 1400 px wide."""
    win = load_aggregates(_output(tmp_path), "windows")
    fig = small_multiples_figure(win, ["a", "b"], lambda g: g["errors"] / g["lines"].where(g["lines"] > 0) * 100,
                                 "error %", "error rate", style="markers")
    fig.canvas.draw()
    assert fig.get_size_inches()[0] * 100 >= 1200
    gappy, full = fig.axes[0], fig.axes[1]
    for ax in (gappy, full):
        assert ax.lines[0].get_marker() == "o" and ax.lines[0].get_linestyle() == "None"
        assert not [c for c in ax.collections if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
    # the spike: a's hour 9 h later with 25 of 50 lines ERROR is a marker at 50 %
    assert 50.0 in list(gappy.lines[0].get_ydata())
    for ax, year in ((gappy, "2015"), (full, "2023")):
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert labels and all(lab.startswith(year + "-") for lab in labels), labels
    assert all(len(t.get_text()) == len("2015-05-17 10:00") for t in gappy.get_xticklabels() if t.get_text())


def test_top_templates_chart_is_log_scaled_and_labelled(tmp_path):
    top = pd.DataFrame({"source": ["a", "a", "b"], "template_id": ["1", "2", "3"],
                        "template": ["x", "y", "z"], "count": [50_000, 40, 7]})
    ax = top_templates_figure(top).axes[0]
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.texts] == ["50,000", "40", "7"]
    even = top.assign(count=[30, 20, 10])
    ax = top_templates_figure(even).axes[0]
    assert ax.get_xscale() == "linear" and [t.get_text() for t in ax.texts] == ["30", "20", "10"]
    assert (build_report(_output(tmp_path)).parent / "top_templates.png").stat().st_size > 0
