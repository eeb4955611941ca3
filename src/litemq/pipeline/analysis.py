"""Per-source stream analysis: the logic the Spark job runs inside its stateful operator.

Pure Python + pandas, no Spark: :func:`process_source` takes one source's records of one
micro-batch (raw lines with their topic/partition/offset) and the source's state from the
previous micro-batch, and returns the rows to emit plus the new state. Spark runs it per source
(``applyInPandasWithState`` grouped by ``source``) and checkpoints the state with the offsets,
so a rerun after a crash recomputes exactly the same rows from exactly the same state.

Per source the state holds: the detected format, the drain3 miner (``TemplateMiner.state()``),
the open one-minute windows, a short history of closed windows (the alert baselines) and the
source's own event-time watermark (max event time seen - ``watermark_s``). The watermark is per
source on purpose: sources replayed from different eras (a 2015 access log next to a 2008 HDFS
log) would otherwise push one global watermark past each other's data and drop it as late.

Emitted rows (one flat schema, ``kind`` tells them apart; see :data:`OUTPUT_SCHEMA`):

- ``window``: per source and minute: lines, errors (ERROR/FATAL), warns, error rate, late lines,
  new templates, and for access logs requests, status classes 1xx..5xx, bytes, top paths (JSON).
- ``template``: per source, minute, level and template id: count and template text.
- ``alert``: ``new_template`` (a template never seen before on the source, after the source's
  first ``warmup_lines`` lines), ``error_rate_jump`` and ``template_jump`` (a closed window well
  above the mean of the source's previous ``baseline_windows`` closed non-empty windows).

``window``/``template`` rows are *upserts*: a window's row is emitted again, with its full
values, every micro-batch that changes it, and once more with ``final=True`` when the source's
watermark passes its end. The sinks keep the last version per key.
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field

import pandas as pd

from litemq.pipeline.formats import detect_format, parse_line
from litemq.pipeline.templates import TemplateMiner

__all__ = ["AnalysisConfig", "SourceState", "WindowAgg", "process_source", "OUTPUT_COLUMNS",
           "OUTPUT_SCHEMA", "INPUT_COLUMNS", "ERROR_LEVELS", "path_key"]

ERROR_LEVELS = frozenset({"ERROR", "FATAL"})
INPUT_COLUMNS = ["source", "fmt_hint", "topic", "partition", "offset", "timestamp_ms", "value", "year_hint"]

#: (name, Spark SQL type) of every output column, in order.
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("kind", "string"),
    ("source", "string"),
    ("fmt", "string"),
    ("window_start", "timestamp"),
    ("window_end", "timestamp"),
    ("final", "boolean"),
    ("level", "string"),
    ("template_id", "bigint"),
    ("template", "string"),
    ("count", "bigint"),
    ("lines", "bigint"),
    ("errors", "bigint"),
    ("warns", "bigint"),
    ("error_rate", "double"),
    ("late_lines", "bigint"),
    ("new_templates", "bigint"),
    ("requests", "bigint"),
    ("status_1xx", "bigint"),
    ("status_2xx", "bigint"),
    ("status_3xx", "bigint"),
    ("status_4xx", "bigint"),
    ("status_5xx", "bigint"),
    ("bytes", "bigint"),
    ("top_paths", "string"),
    ("alert_type", "string"),
    ("alert_value", "double"),
    ("alert_baseline", "double"),
    ("message", "string"),
]
OUTPUT_COLUMNS = [n for n, _t in OUTPUT_FIELDS]
OUTPUT_SCHEMA = ", ".join(f"{n} {t}" for n, t in OUTPUT_FIELDS)
_INT_COLS = [n for n, t in OUTPUT_FIELDS if t == "bigint"]


@dataclass(frozen=True)
class AnalysisConfig:
    window_s: int = 60                 # tumbling event-time window
    watermark_s: int = 300             # a window closes when the source's max event time passes end + this
    baseline_windows: int = 15         # alert baseline: the source's previous N closed non-empty windows
    min_baseline_windows: int = 5      # no jump alerts before this many windows of history
    warmup_lines: int = 500            # no new-template alerts during a source's first N lines
    error_rate_factor: float = 3.0     # error-rate jump: rate > factor * baseline and > baseline + min_delta
    error_rate_min_delta: float = 0.10
    min_errors: int = 5
    count_factor: float = 4.0          # template jump: count > factor * baseline mean + min_count
    min_count: int = 20
    top_paths: int = 10
    max_history_templates: int = 2000  # per closed window kept for baselines

    @property
    def window_ms(self) -> int:
        return self.window_s * 1000


@dataclass
class WindowAgg:
    lines: int = 0
    errors: int = 0
    warns: int = 0
    late: int = 0
    new_templates: int = 0
    requests: int = 0
    status: list = field(default_factory=lambda: [0, 0, 0, 0, 0])
    bytes: int = 0
    paths: Counter = field(default_factory=Counter)
    templates: Counter = field(default_factory=Counter)       # (level, template_id) -> count


@dataclass
class SourceState:
    fmt: str | None = None
    year: int | None = None        # the year of year-less timestamps, from the records' "year" header
    lines_seen: int = 0
    miner: bytes | None = None
    max_event_ms: int | None = None
    windows: dict = field(default_factory=dict)                # window_start_ms -> WindowAgg
    history: deque = field(default_factory=deque)              # closed: (start_ms, lines, errors, {tid: n})
    template_text: dict = field(default_factory=dict)          # tid -> latest template text

    def dumps(self) -> bytes:
        return zlib.compress(pickle.dumps(self, protocol=5), 3)

    @staticmethod
    def loads(blob: bytes | None) -> "SourceState":
        if not blob:
            return SourceState()
        return pickle.loads(zlib.decompress(blob))

    def watermark_ms(self, cfg: AnalysisConfig) -> int | None:
        return None if self.max_event_ms is None else self.max_event_ms - cfg.watermark_s * 1000


def path_key(path: str | None) -> str | None:
    """An access log's path without its query string (the unit of "top paths")."""
    if path is None:
        return None
    return path.split("?", 1)[0]


def _ts(ms: int) -> pd.Timestamp:
    return pd.Timestamp(ms, unit="ms", tz="UTC")


def _window_rows(source: str, fmt: str, start: int, w: WindowAgg, st: SourceState, cfg: AnalysisConfig,
                 final: bool) -> list[dict]:
    end = start + cfg.window_ms
    access = w.requests > 0
    top = json.dumps(w.paths.most_common(cfg.top_paths)) if access else None
    rows = [{
        "kind": "window", "source": source, "fmt": fmt, "window_start": _ts(start), "window_end": _ts(end),
        "final": final, "lines": w.lines, "errors": w.errors, "warns": w.warns,
        "error_rate": (w.errors / w.lines) if w.lines else 0.0, "late_lines": w.late,
        "new_templates": w.new_templates,
        "requests": w.requests if access else None,
        "status_1xx": w.status[0] if access else None, "status_2xx": w.status[1] if access else None,
        "status_3xx": w.status[2] if access else None, "status_4xx": w.status[3] if access else None,
        "status_5xx": w.status[4] if access else None, "bytes": w.bytes if access else None,
        "top_paths": top,
    }]
    for (level, tid), n in sorted(w.templates.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        rows.append({"kind": "template", "source": source, "fmt": fmt, "window_start": _ts(start),
                     "window_end": _ts(end), "final": final, "level": level, "template_id": tid,
                     "template": st.template_text.get(tid), "count": n})
    return rows


def _close_window(source: str, fmt: str, start: int, w: WindowAgg, st: SourceState, cfg: AnalysisConfig,
                  out: list[dict]) -> None:
    """Emit the final rows of a window, evaluate the jump alerts against the baseline, and move
    the window into the history."""
    out.extend(_window_rows(source, fmt, start, w, st, cfg, True))
    hist = list(st.history)
    if len(hist) >= cfg.min_baseline_windows:
        n_windows = len(hist)
        rates = [h[2] / h[1] for h in hist if h[1]]
        base_rate = sum(rates) / len(rates) if rates else 0.0
        rate = w.errors / w.lines if w.lines else 0.0
        if (w.errors >= cfg.min_errors and rate > cfg.error_rate_factor * base_rate
                and rate > base_rate + cfg.error_rate_min_delta):
            out.append({"kind": "alert", "source": source, "fmt": fmt, "window_start": _ts(start),
                        "window_end": _ts(start + cfg.window_ms), "alert_type": "error_rate_jump",
                        "alert_value": rate, "alert_baseline": base_rate, "errors": w.errors, "lines": w.lines,
                        "message": f"{source}: error rate {rate:.1%} ({w.errors}/{w.lines}) in the minute from "
                                   f"{_ts(start)} vs {base_rate:.1%} over the previous {n_windows} active minutes"})
        per_tid: Counter = Counter()
        for (_lvl, tid), n in w.templates.items():
            per_tid[tid] += n
        for tid, n in sorted(per_tid.items()):
            base = sum(h[3].get(tid, 0) for h in hist) / n_windows
            if n >= cfg.min_count and n > cfg.count_factor * base + cfg.min_count:
                out.append({"kind": "alert", "source": source, "fmt": fmt, "window_start": _ts(start),
                            "window_end": _ts(start + cfg.window_ms), "alert_type": "template_jump",
                            "template_id": tid, "template": st.template_text.get(tid), "count": n,
                            "alert_value": float(n), "alert_baseline": base,
                            "message": f"{source}: template {tid} seen {n} times in the minute from {_ts(start)} "
                                       f"vs {base:.1f}/min over the previous {n_windows} active minutes: "
                                       f"{st.template_text.get(tid)}"})
    per_tid = Counter()
    for (_lvl, tid), n in w.templates.items():
        per_tid[tid] += n
    if len(per_tid) > cfg.max_history_templates:
        per_tid = Counter(dict(per_tid.most_common(cfg.max_history_templates)))
    st.history.append((start, w.lines, w.errors, dict(per_tid)))
    while len(st.history) > cfg.baseline_windows:
        st.history.popleft()


def process_source(source: str, pdf: pd.DataFrame, state_blob: bytes | None,
                   cfg: AnalysisConfig = AnalysisConfig()) -> tuple[pd.DataFrame, bytes]:
    """Analyse one micro-batch of one source.

    Args:
        source: the source name.
        pdf: the source's records in this micro-batch, columns :data:`INPUT_COLUMNS`
            (``value`` = raw line bytes, ``timestamp_ms`` = record timestamp, ``fmt_hint`` = the
            ``format`` header or ``None``, ``year_hint`` = the ``year`` header, the year the
            ingester dated the source's year-less lines with, or ``None``; the column may be
            absent). Processed in (topic, partition, offset) order, so the
            result does not depend on how Spark shuffled the rows.
        state_blob: the state returned for this source by the previous micro-batch, or ``None``.

    Returns:
        ``(rows, new_state_blob)``; ``rows`` has :data:`OUTPUT_COLUMNS`.
    """
    st = SourceState.loads(state_blob)
    out: list[dict] = []
    if len(pdf):
        pdf = pdf.sort_values(["topic", "partition", "offset"], kind="stable")
        values = [bytes(v) if v is not None else b"" for v in pdf["value"]]
        texts = [v.decode("utf-8", "replace") for v in values]
        if st.fmt is None:
            hints = [h for h in pdf["fmt_hint"] if isinstance(h, str) and h and h != "unknown"]
            fmt = hints[0] if hints else detect_format(texts[:64])
            # an undecided source with few lines so far detects again next micro-batch
            if fmt != "unknown" or st.lines_seen + len(texts) >= 64:
                st.fmt = fmt
        else:
            fmt = st.fmt
        if st.year is None and "year_hint" in pdf:  # the ingester's year for lines without one
            years = [h for h in pdf["year_hint"] if isinstance(h, str) and h.isdigit()]
            st.year = int(years[0]) if years else None
        miner = TemplateMiner.from_state(st.miner) if st.miner else TemplateMiner(fmt if fmt != "unknown" else "default")
        touched: set[int] = set()
        wm = st.watermark_ms(cfg)
        rec_ts = pdf["timestamp_ms"].tolist()
        wms = cfg.window_ms
        for text, rts in zip(texts, rec_ts):
            p = parse_line(text, fmt, year=st.year)
            ts = p.timestamp_ms if p.timestamp_ms is not None else (int(rts) if rts is not None and rts == rts else 0)
            tid, template, is_new = miner.add(p.message)
            st.template_text[tid] = template
            st.lines_seen += 1
            start = ts - ts % wms
            late = wm is not None and start + wms <= wm and start not in st.windows
            if late:
                # its window is closed already: counted as a late line of the oldest open
                # window (or a new one at the watermark), never silently dropped
                start = min(st.windows) if st.windows else (wm - wm % wms)
            w = st.windows.get(start)
            if w is None:
                w = st.windows[start] = WindowAgg()
            touched.add(start)
            if late:
                w.late += 1
            w.lines += 1
            level = p.level
            if level in ERROR_LEVELS:
                w.errors += 1
            elif level == "WARN":
                w.warns += 1
            w.templates[(level, tid)] += 1
            if is_new:
                w.new_templates += 1
                if st.lines_seen > cfg.warmup_lines:
                    out.append({"kind": "alert", "source": source, "fmt": fmt, "window_start": _ts(start),
                                "window_end": _ts(start + wms), "alert_type": "new_template",
                                "template_id": tid, "template": template, "level": level,
                                "message": f"{source}: new template {tid} after {st.lines_seen - 1} lines: {template}"})
            if p.status is not None:
                w.requests += 1
                cls = p.status // 100
                if 1 <= cls <= 5:
                    w.status[cls - 1] += 1
                w.bytes += p.bytes or 0
                pk = path_key(p.path)
                if pk is not None:
                    w.paths[pk] += 1
            if st.max_event_ms is None or ts > st.max_event_ms:
                st.max_event_ms = ts
        st.miner = miner.state()
        wm = st.watermark_ms(cfg)
        for start in sorted(st.windows):
            if wm is not None and start + wms <= wm:
                _close_window(source, fmt, start, st.windows.pop(start), st, cfg, out)
                touched.discard(start)
        for start in sorted(touched):
            out.extend(_window_rows(source, fmt, start, st.windows[start], st, cfg, False))
    rows = pd.DataFrame(out, columns=OUTPUT_COLUMNS)
    for c in _INT_COLS:
        rows[c] = rows[c].astype("Int64")
    rows["final"] = rows["final"].astype("boolean")
    for c in ("window_start", "window_end"):
        rows[c] = pd.to_datetime(rows[c], utc=True)
    for c in ("error_rate", "alert_value", "alert_baseline"):
        rows[c] = rows[c].astype("float64")
    return rows, st.dumps()
