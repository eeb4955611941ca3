"""The end-of-run report of the log job: Markdown + PNG charts next to the output, and a short
summary table for the terminal (rich).

Written to ``OUT/report/``: ``report.md``, ``volume.png`` (lines per window per source),
``error_rate.png`` (error rate per window per source), ``top_templates.png``; computed from the
parquet aggregates alone (``litemq.pipeline.sinks.load_aggregates``), so it can be rebuilt at
any time with ``litemq pipeline report OUT``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from litemq.pipeline.sinks import load_aggregates, load_alerts

__all__ = ["summarize", "build_report", "summary_table"]


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


def _resample(win: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Lines and errors per source on a time axis coarse enough for a chart."""
    span = (win["window_end"].max() - win["window_start"].min()).total_seconds()
    rule, label = ("1min", "minute")
    for limit, r, lab in ((6 * 3600, "1min", "minute"), (3 * 86400, "15min", "15 minutes"),
                          (30 * 86400, "1h", "hour"), (float("inf"), "1D", "day")):
        if span <= limit:
            rule, label = r, lab
            break
    w = win.set_index("window_start")
    out = (w.groupby("source")[["lines", "errors"]].resample(rule).sum().reset_index())
    return out, label


def build_report(out_dir: str | Path, *, title: str = "LiteMQ log pipeline report", top_n: int = 10) -> Path:
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

    series, unit = _resample(win)
    def line_chart(ycol, title, ylabel, fname):
        fig, ax = plt.subplots(figsize=(10, 4))
        for source, grp in series.groupby("source"):
            ax.plot(grp["window_start"], ycol(grp), label=source, lw=1)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, loc="upper right")
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(rep / fname, dpi=110)
        plt.close(fig)

    line_chart(lambda g: g["lines"], f"Lines per {unit}", "lines", "volume.png")
    line_chart(lambda g: g["errors"] / g["lines"].where(g["lines"] > 0) * 100,
               f"Error rate per {unit} (ERROR/FATAL lines; access logs: 5xx)", "%", "error_rate.png")
    md += ["## Volume and error rate over time", "", "![lines per window](volume.png)", "",
           "![error rate](error_rate.png)", ""]

    if not tpl.empty:
        tot = tpl.groupby(["source", "template_id"], as_index=False).agg(count=("count", "sum"))
        last_text = tpl.sort_values("window_start").groupby(["source", "template_id"])["template"].last()
        tot["template"] = [last_text.get((s, t)) for s, t in zip(tot["source"], tot["template_id"])]
        top = tot.sort_values(["count", "source", "template_id"], ascending=[False, True, True]).head(top_n * 2)
        top = top.head(top_n)
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(top) + 1.2))
        labels = [f"{s}#{t}: {str(x)[:60]}" for s, t, x in zip(top["source"], top["template_id"], top["template"])]
        ax.barh(range(len(top)), top["count"], color="#4c72b0")
        ax.set_yticks(range(len(top)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"Top {len(top)} templates (lines)")
        fig.tight_layout()
        fig.savefig(rep / "top_templates.png", dpi=110)
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
        md += [f"{len(alr)} alerts: " + ", ".join(f"{k} {v}" for k, v in alr["alert_type"].value_counts().items()),
               "", "| window | source | type | message |", "|---|---|---|---|"]
        for r in alr.sort_values("window_start").head(50).itertuples():
            md.append(f"| {r.window_start:%Y-%m-%d %H:%M} | {r.source} | {r.alert_type} | "
                      f"{str(r.message).replace('|', chr(92) + '|')[:200]} |")
        if len(alr) > 50:
            md.append(f"| … | | | {len(alr) - 50} more in `alerts/` |")
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
                 ("error rate", "right"), ("templates", "right"), ("alerts", "right"), ("from", "left"),
                 ("to", "left")):
        t.add_column(c, justify=j)
    for r in s.itertuples():
        t.add_row(r.source, str(r.format), f"{r.lines:,}", f"{r.errors:,}",
                  "–" if pd.isna(r.error_rate) else f"{r.error_rate:.2%}", f"{r.templates:,}", f"{r.alerts:,}",
                  f"{r.first:%Y-%m-%d %H:%M}", f"{r.last:%Y-%m-%d %H:%M}")
    return t
