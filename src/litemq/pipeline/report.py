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
    return out, label


def _small_multiples(win: pd.DataFrame, sources: list[str], path: Path, ycol, ylabel: str, title: str) -> None:
    """One subplot per source, each on its own time axis (sources may be years apart)."""
    import matplotlib.pyplot as plt

    n = len(sources)
    ncols = 1 if n == 1 else (2 if n <= 4 else 3)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 2.3 * nrows + 0.6), squeeze=False)
    for ax, source in zip(axes.flat, sources):
        series, unit = _resample(win[win["source"] == source])
        ax.plot(series["window_start"], ycol(series), lw=1, color="#4c72b0")
        ax.fill_between(series["window_start"], ycol(series).fillna(0), alpha=0.2, color="#4c72b0")
        ax.set_title(f"{source} (per {unit})", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=7)
        ax.tick_params(labelsize=6)
        for lab in ax.get_xticklabels():
            lab.set_rotation(25)
            lab.set_horizontalalignment("right")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
    _small_multiples(win, sources, rep / "volume.png", lambda g: g["lines"], "lines", "Lines over time per source")
    _small_multiples(win, sources, rep / "error_rate.png",
                     lambda g: g["errors"] / g["lines"].where(g["lines"] > 0) * 100, "error %",
                     "Error rate over time per source (ERROR/FATAL lines; access logs: 5xx)")
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
                 ("error rate", "right"), ("templates", "right"), ("alerts", "right"), ("event time", "left")):
        t.add_column(c, justify=j, overflow="fold")
    for r in s.itertuples():
        t.add_row(r.source, str(r.format), f"{r.lines:,}", f"{r.errors:,}",
                  "–" if pd.isna(r.error_rate) else f"{r.error_rate:.2%}", f"{r.templates:,}", f"{r.alerts:,}",
                  f"{r.first:%Y-%m-%d %H:%M} .. {r.last:%m-%d %H:%M}")
    return t
