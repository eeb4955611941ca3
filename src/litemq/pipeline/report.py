"""The end-of-run report of the log job: Markdown + PNG charts next to the output, and a short
summary table for the terminal (rich).

Written to ``OUT/report/``: ``report.md``, ``volume.png`` (one panel per source: lines per
period as bars, its ERROR/FATAL lines as red bars), ``error_rate.png`` (one panel per source:
the error rate of each period as a marker), ``top_templates.png``, all 1400 px wide; computed from the
parquet aggregates alone (``litemq.pipeline.sinks.load_aggregates``), so it can be rebuilt at
any time with ``litemq pipeline report OUT``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from litemq.pipeline.sinks import load_aggregates, load_alerts

__all__ = ["summarize", "build_report", "summary_table", "sort_alerts", "small_multiples_figure", "top_templates_figure",
           "ALERT_SEVERITY"]

ALERT_SEVERITY: dict[str, tuple[int, str]] = {
    "error_rate_jump": (0, "error"),
    "template_jump": (1, "warning"),
    "new_template": (2, "info"),
}
"""Alert type -> (rank, severity): the report lists alerts by rank, so the few error-rate and
template jumps come before the many new-template notices."""
_UNKNOWN_SEVERITY = (len(ALERT_SEVERITY), "info")
MAX_ALERT_ROWS = 50
"""Alerts listed in the report (the rest are counted; all are in ``alerts/``)."""
LOG_SCALE_MIN_RATIO = 20
"""The top-templates chart uses a log scale when its largest count is this many times its smallest."""


def summarize(out_dir: str | Path) -> pd.DataFrame:
    """One row per source: lines, errors, error rate, windows, templates, alerts, time range."""
    win = load_aggregates(out_dir, "windows")
    tpl = load_aggregates(out_dir, "templates")
    alr = load_alerts(out_dir)
    if win.empty:
        return pd.DataFrame(columns=["source", "format", "lines", "errors", "error_rate", "windows", "templates",
                                     "alerts", "first", "last"])
    g = win.groupby("source")
    df = pd.DataFrame({
        "format": g["fmt"].first(),
        "lines": g["lines"].sum().astype(int),
        "errors": g["errors"].sum().astype(int),
        "windows": g.size(),
        "first": g["window_start"].min(),
        "last": g["window_end"].max(),
    })
    df["error_rate"] = df["errors"] / df["lines"].where(df["lines"] > 0)
    df["templates"] = tpl.groupby("source")["template_id"].nunique() if not tpl.empty else 0
    df["alerts"] = alr.groupby("source").size() if not alr.empty else 0
    df = df.fillna({"templates": 0, "alerts": 0}).reset_index()
    df["templates"] = df["templates"].astype(int)
    df["alerts"] = df["alerts"].astype(int)
    return df[["source", "format", "lines", "errors", "error_rate", "windows", "templates", "alerts", "first",
               "last"]]


def _resample(w: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One source's lines and errors on a time axis coarse enough for a small chart."""
    span = (w["window_end"].max() - w["window_start"].min()).total_seconds()
    rule, label = "1D", "day"
    for limit, r, lab in ((3 * 3600, "1min", "minute"), (2 * 86400, "15min", "15 min"),
                          (20 * 86400, "1h", "hour"), (float("inf"), "1D", "day")):
        if span <= limit:
            rule, label = r, lab
            break
    out = w.set_index("window_start")[["lines", "errors"]].resample(rule).sum().reset_index()
    out.attrs["period"] = pd.Timedelta(rule)
    return out, label


def _date_axis(ax, series: pd.DataFrame) -> None:
    """Dates with the year on a time axis (sources may be years apart), with hours and minutes
    when the data spans two days or less."""
    from matplotlib.dates import AutoDateLocator, DateFormatter

    span = (series["window_start"].max() - series["window_start"].min()).total_seconds() if len(series) else 0
    ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=7))
    ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d %H:%M" if span <= 2 * 86400 else "%Y-%m-%d"))


CHART_WIDTH_IN = 14.0
CHART_DPI = 100
"""Charts are ``CHART_WIDTH_IN * CHART_DPI`` = 1400 px wide, fonts 10-15 pt: readable on a laptop screen."""
SPARSE_FRACTION = 0.25
"""A bar chart whose periods are less than this fraction non-empty also marks each bar's top."""
_BLUE, _RED, _GREY = "#4c72b0", "#c44e52", "#8c8c8c"
_FONT = {"font.size": 10, "axes.titlesize": 11.5, "axes.labelsize": 10, "xtick.labelsize": 9.5,
         "ytick.labelsize": 9.5, "legend.fontsize": 10, "figure.titlesize": 15}


def _grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels: one column up to 4 sources, two up to 12, then three."""
    ncols = 1 if n <= 4 else (2 if n <= 12 else 3)
    return -(-n // ncols), ncols


def small_multiples_figure(win: pd.DataFrame, sources: list[str], ycol, ylabel: str, title: str, *,
                           style: str = "bars", errors: bool = False):
    """One panel per source, each on its own time axis (sources may be years apart), laid out by
    :func:`_grid`, :data:`CHART_WIDTH_IN` wide; returns the matplotlib Figure.

    Args:
        win: window rows (``load_aggregates(out, "windows")``); resampled per source by ``_resample``.
        ycol: ``series -> y`` (a pandas Series; NaN = nothing to draw in that period).
        style: ``"bars"``: a bar per period; ``"markers"``: a marker on a stem per period with a
            value above 0, a small grey dot where the value is 0 (so a spike is a point, never
            the triangle a line between sparse points draws).
        errors: with ``"bars"``, the ERROR/FATAL lines of each period drawn as red bars in front.
    A panel whose source has no ERROR/FATAL line says so.
    """
    import matplotlib.pyplot as plt

    n = len(sources)
    nrows, ncols = _grid(n)
    with plt.rc_context(_FONT):
        fig, axes = plt.subplots(nrows, ncols, figsize=(CHART_WIDTH_IN, (2.9 if ncols == 1 else 3.3) * nrows + 1.0), squeeze=False)
        for ax, source in zip(axes.flat, sources):
            w = win[win["source"] == source]
            series, unit = _resample(w)
            y = ycol(series)
            x = series["window_start"]
            width = series.attrs["period"] * 0.85
            if style == "bars":
                y = y.fillna(0)
                ax.bar(x, y, width=width, align="edge", color=_BLUE, label="lines")
                if (y > 0).mean() < SPARSE_FRACTION:   # bars a pixel wide: a marker on each
                    ax.plot(x[y > 0] + width / 2, y[y > 0], "o", color=_BLUE, markersize=4)
                if errors:
                    e = series["errors"]
                    ax.bar(x, e, width=width, align="edge", color=_RED, label="ERROR/FATAL lines")
                    ax.plot(x[e > 0] + width / 2, e[e > 0], "o", color=_RED, markersize=5)
            else:
                pos = y > 0
                ax.vlines(x[pos], 0, y[pos], color=_RED, lw=1.2)
                ax.plot(x[pos], y[pos], "o", color=_RED, markersize=5)
                ax.plot(x[y == 0], y[y == 0], "o", color=_GREY, markersize=2.5)
                ax.set_ylim(bottom=0)
            if int(w["errors"].sum()) == 0:
                if style != "bars":
                    ax.set_ylim(0, 1)
                ax.text(0.99, 0.95, "no ERROR/FATAL lines", transform=ax.transAxes, ha="right", va="top",
                        color=_GREY, fontsize=9.5)
            _date_axis(ax, series)
            fmt = w["fmt"].iloc[0] if len(w) else "?"
            sep = ": " if ncols == 1 else "\n"   # two title lines when panels are side by side
            ax.set_title(f"{source} ({fmt}){sep}{int(w['lines'].sum()):,} lines, {int(w['errors'].sum()):,} errors, "
                         f"per {unit}", loc="left")
            if len(series) == 1:   # one period: an axis of three periods around it
                ax.set_xlim(x.iloc[0] - series.attrs["period"], x.iloc[0] + 2 * series.attrs["period"])
            ax.set_ylabel(ylabel)
            ax.grid(axis="y", alpha=0.3)
            for lab in ax.get_xticklabels():
                lab.set_rotation(20)
                lab.set_horizontalalignment("right")
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        if style == "bars" and errors:
            handles, labels = axes.flat[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="upper right", ncols=2, frameon=False)
        fig.suptitle(title, x=0.01, ha="left")
        fig.tight_layout(rect=(0, 0, 1, 0.985))
    return fig


def _small_multiples(win: pd.DataFrame, sources: list[str], path: Path, ycol, ylabel: str, title: str,
                     **kw) -> None:
    import matplotlib.pyplot as plt

    fig = small_multiples_figure(win, sources, ycol, ylabel, title, **kw)
    fig.savefig(path, dpi=CHART_DPI)
    plt.close(fig)


def top_templates_figure(top: pd.DataFrame):
    """Horizontal bars of the top templates' line counts, each labelled with its count; a log
    scale when the counts span more than :data:`LOG_SCALE_MIN_RATIO` (one busy template would
    flatten the others to nothing). Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    with plt.rc_context(_FONT):
        fig, ax = plt.subplots(figsize=(CHART_WIDTH_IN, 0.5 * len(top) + 1.4))
        labels = [f"{s}#{t}: {str(x)[:80]}" for s, t, x in zip(top["source"], top["template_id"], top["template"])]
        counts = [int(c) for c in top["count"]]
        log_scale = bool(counts) and min(counts) > 0 and max(counts) > LOG_SCALE_MIN_RATIO * min(counts)
        bars = ax.barh(range(len(top)), counts, color=_BLUE, log=log_scale)
        ax.bar_label(bars, labels=[f"{c:,}" for c in counts], padding=3)
        ax.set_yticks(range(len(top)), labels)
        ax.invert_yaxis()
        ax.margins(x=0.12)
        ax.set_xlabel("lines" + (" (log scale)" if log_scale else ""))
        ax.set_title(f"Top {len(top)} templates (lines)", loc="left")
        fig.tight_layout()
    return fig


def sort_alerts(alr: pd.DataFrame) -> pd.DataFrame:
    """Alerts most severe first (:data:`ALERT_SEVERITY`), then by window and source, with a
    ``severity`` column (``error``/``warning``/``info``)."""
    out = alr.copy()
    sev = [ALERT_SEVERITY.get(t, _UNKNOWN_SEVERITY) for t in out["alert_type"]]
    out["_rank"] = [r for r, _ in sev]
    out["severity"] = [name for _, name in sev]
    out = out.sort_values(["_rank", "window_start", "source"], kind="stable")
    return out.drop(columns="_rank").reset_index(drop=True)


def build_report(out_dir: str | Path, *, title: str = "LiteMQ log pipeline report", top_n: int = 10,
                 max_sources: int = 24) -> Path:
    """Write ``OUT/report/report.md`` and its charts; returns the Markdown path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    rep = out / "report"
    rep.mkdir(parents=True, exist_ok=True)
    summary = summarize(out)
    win = load_aggregates(out, "windows")
    tpl = load_aggregates(out, "templates")
    alr = load_alerts(out)
    md = [f"# {title}", "", f"Output directory: `{out}`", ""]
    if summary.empty:
        md += ["No data was processed.", ""]
        p = rep / "report.md"
        p.write_text("\n".join(md))
        return p

    md += ["## Sources", "", "| source | format | lines | errors | error rate | minutes with data | templates | "
           "alerts | first | last |", "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in summary.itertuples():
        rate = "–" if pd.isna(r.error_rate) else f"{r.error_rate:.2%}"
        md.append(f"| {r.source} | {r.format} | {r.lines:,} | {r.errors:,} | {rate} | {r.windows:,} | {r.templates:,} "
                  f"| {r.alerts:,} | {r.first:%Y-%m-%d %H:%M} | {r.last:%Y-%m-%d %H:%M} |")
    md.append("")

    sources = list(summary.sort_values(["lines", "source"], ascending=[False, True])["source"])[:max_sources]
    _small_multiples(win, sources, rep / "volume.png", lambda g: g["lines"], "lines",
                     "Lines over time per source (red: ERROR/FATAL lines; access logs: 5xx)", errors=True)
    _small_multiples(win, sources, rep / "error_rate.png",
                     lambda g: g["errors"] / g["lines"].where(g["lines"] > 0) * 100, "error %",
                     "Error rate over time per source (ERROR/FATAL lines; access logs: 5xx)", style="markers")
    if len(summary) > max_sources:
        md += [f"Charts show the {max_sources} largest of {len(summary)} sources.", ""]
    md += ["## Volume and error rate over time", "", "![lines per window](volume.png)", "",
           "![error rate](error_rate.png)", ""]

    if not tpl.empty:
        tot = tpl.groupby(["source", "template_id"], as_index=False).agg(count=("count", "sum"))
        last_text = tpl.sort_values("window_start").groupby(["source", "template_id"])["template"].last()
        tot["template"] = [last_text.get((s, t)) for s, t in zip(tot["source"], tot["template_id"])]
        top = tot.sort_values(["count", "source", "template_id"], ascending=[False, True, True]).head(top_n * 2)
        top = top.head(top_n)
        fig = top_templates_figure(top)
        fig.savefig(rep / "top_templates.png", dpi=CHART_DPI)
        plt.close(fig)
        md += ["## Top templates", "", "![top templates](top_templates.png)", "", "| source | id | lines | template |",
               "|---|---:|---:|---|"]
        for r in top.itertuples():
            text = str(r.template).replace("|", "\\|")[:160]
            md.append(f"| {r.source} | {r.template_id} | {r.count:,} | `{text}` |")
        md.append("")

    acc = win[win["requests"].notna()] if "requests" in win.columns else win.iloc[0:0]
    if not acc.empty:
        md += ["## Access logs", "", "| source | requests | 1xx | 2xx | 3xx | 4xx | 5xx | bytes | top paths |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for source, a in acc.groupby("source"):
            paths: dict[str, int] = {}
            for tp in a["top_paths"].dropna():
                for pth, n in json.loads(tp):
                    paths[pth] = paths.get(pth, 0) + n
            best = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
            cls = [int(a[f"status_{i}xx"].sum()) for i in range(1, 6)]
            md.append(f"| {source} | {int(a['requests'].sum()):,} | " + " | ".join(f"{c:,}" for c in cls)
                      + f" | {int(a['bytes'].sum()):,} | " + ", ".join(f"`{p}` ({n})" for p, n in best) + " |")
        md += ["", "Top paths are summed from each window's top 10, so they are a lower bound for paths "
               "outside some window's top 10.", ""]

    md += ["## Alerts", ""]
    if alr.empty:
        md += ["No alerts.", ""]
    else:
        ranked = sort_alerts(alr)
        counts = ranked["alert_type"].value_counts(sort=False)
        md += [f"{len(alr)} alerts: " + ", ".join(f"{k} {v}" for k, v in counts.items())
               + " (most severe first)", "", "| severity | window | source | type | message |", "|---|---|---|---|---|"]
        for r in ranked.head(MAX_ALERT_ROWS).itertuples():
            md.append(f"| {r.severity} | {r.window_start:%Y-%m-%d %H:%M} | {r.source} | {r.alert_type} | "
                      f"{str(r.message).replace('|', chr(92) + '|')[:200]} |")
        if len(alr) > MAX_ALERT_ROWS:
            left = ranked.iloc[MAX_ALERT_ROWS:]["alert_type"].value_counts(sort=False)
            md.append(f"| | … | | | {len(alr) - MAX_ALERT_ROWS} more in `alerts/`: "
                      + ", ".join(f"{k} {v}" for k, v in left.items()) + " |")
        md.append("")
    md += ["## Files", "", "- `aggregates/windows/source=*/date=*/` per source and minute: lines, errors, warns, "
           "error rate, new templates, access-log requests/status classes/bytes/top paths",
           "- `aggregates/templates/source=*/date=*/` per source, minute, level and template: count",
           "- `alerts/` alerts (also on topic `alerts`); window/template rows also on topic `log-metrics`", ""]
    p = rep / "report.md"
    p.write_text("\n".join(md))
    return p


def summary_table(out_dir: str | Path):
    """A rich ``Table`` of :func:`summarize`."""
    from rich.table import Table

    s = summarize(out_dir)
    t = Table(title="Log pipeline summary")
    for c, j in (("source", "left"), ("format", "left"), ("lines", "right"), ("errors", "right"),
                 ("error rate", "right"), ("templates", "right"), ("alerts", "right"), ("event time", "left")):
        t.add_column(c, justify=j, overflow="fold")
    for r in s.itertuples():
        t.add_row(r.source, str(r.format), f"{r.lines:,}", f"{r.errors:,}",
                  "–" if pd.isna(r.error_rate) else f"{r.error_rate:.2%}", f"{r.templates:,}", f"{r.alerts:,}",
                  f"{r.first:%Y-%m-%d %H:%M} .. {r.last:%m-%d %H:%M}")
    return t
