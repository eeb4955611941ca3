"""Sinks of the log job: parquet aggregates, alerts, and the ``log-metrics`` / ``alerts`` topics.

All writes of a micro-batch are idempotent, so Spark re-running a micro-batch after a crash (it
re-runs the last batch whose commit was not recorded, with the same offsets and the same
operator state) leaves the same result:

- ``OUT/aggregates/windows/source=S/date=D/part-0.parquet`` and ``.../templates/...``: the rows
  are *upserted* by key (``source, window_start`` and ``source, window_start, level,
  template_id``): each partition file is read, merged (last version wins) and atomically
  replaced. Re-applying a batch writes the same values again.
- ``OUT/alerts/batch-<id>.parquet``: one file per micro-batch, overwritten on a re-run.
- Topics: ``log-metrics`` (window/template rows as JSON, keyed ``source|window|...``; created
  compacted, so it keeps the latest version of each row) and ``alerts``; record timestamps are
  the produce time. Exactly-once for ``read_committed`` consumers: a batch's records on both
  topics are written in one Kafka transaction together with the marker "batch B done"
  (:class:`litemq.spark.transactional.TransactionalBatchWriter`, the code of the Spark sink,
  with the job's query id as writer id and partition 0), so a re-run of a batch whose
  transaction committed writes nothing, and a batch killed mid-transaction is aborted (by the
  coordinator, at the latest when the re-run's producer starts). Each record also carries
  ``batch_id`` in a header.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from litemq.pipeline.analysis import OUTPUT_FIELDS

__all__ = ["Sinks", "load_aggregates", "load_alerts", "WINDOW_COLUMNS", "TEMPLATE_COLUMNS", "ALERT_COLUMNS"]

WINDOW_COLUMNS = ["source", "fmt", "window_start", "window_end", "final", "lines", "errors", "warns", "error_rate",
                  "late_lines", "new_templates", "requests", "status_1xx", "status_2xx", "status_3xx", "status_4xx",
                  "status_5xx", "bytes", "top_paths"]
TEMPLATE_COLUMNS = ["source", "fmt", "window_start", "window_end", "final", "level", "template_id", "template",
                    "count"]
ALERT_COLUMNS = ["source", "fmt", "window_start", "window_end", "alert_type", "template_id", "template", "level",
                 "count", "lines", "errors", "alert_value", "alert_baseline", "message"]
_KEYS = {"windows": ["window_start"], "templates": ["window_start", "level", "template_id"]}
_PA_TYPES = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC")}
_FIELD_TYPES = dict(OUTPUT_FIELDS)


def _schema(cols: list[str]) -> pa.Schema:
    return pa.schema([(c, _PA_TYPES[_FIELD_TYPES[c]]) for c in cols])


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in str(name)) or "_"


def _write_atomic(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _to_table(pdf: pd.DataFrame, cols: list[str]) -> pa.Table:
    pdf = pdf[cols].copy()
    for c in cols:
        if _FIELD_TYPES[c] == "timestamp":
            pdf[c] = pd.to_datetime(pdf[c], utc=True)
    return pa.Table.from_pandas(pdf, schema=_schema(cols), preserve_index=False)


class Sinks:
    """Writes one micro-batch of analysis rows (see :mod:`litemq.pipeline.analysis`)."""

    def __init__(self, out_dir: str | Path, bootstrap: str | None, *, metrics_topic: str = "log-metrics",
                 alerts_topic: str = "alerts", produce: bool = True, writer_id: str | None = None):
        """``writer_id``: the stable identity of the job for the topic transactions (the Spark
        query id, stable across restarts from the checkpoint); may be set later through the
        attribute, before the first :meth:`write_batch` that produces."""
        self.out = Path(out_dir)
        self.bootstrap = bootstrap
        self.metrics_topic = metrics_topic
        self.alerts_topic = alerts_topic
        self.produce = produce and bootstrap is not None
        self.writer_id = writer_id
        self._tw = None  # TransactionalBatchWriter, kept across batches
        self.totals = {"windows": 0, "templates": 0, "alerts": 0, "batches": 0}

    def _upsert(self, kind: str, rows: pd.DataFrame, cols: list[str]) -> None:
        if rows.empty:
            return
        rows = rows.copy()
        rows["_date"] = pd.to_datetime(rows["window_start"], utc=True).dt.strftime("%Y-%m-%d")
        keys = _KEYS[kind]
        for (source, date), part in rows.groupby(["source", "_date"], sort=True):
            path = self.out / "aggregates" / kind / f"source={_safe(source)}" / f"date={date}" / "part-0.parquet"
            new = _to_table(part, cols)
            if path.exists():
                old = pq.read_table(path, schema=_schema(cols))
                merged = pa.concat_tables([old, new]).to_pandas()
                merged = merged.drop_duplicates(subset=keys, keep="last")
                merged = merged.sort_values(keys, kind="stable", na_position="first")
                new = _to_table(merged, cols)
            _write_atomic(new, path)

    def write_batch(self, rows: pd.DataFrame, batch_id: int) -> dict:
        """Apply one micro-batch's rows to every sink. Idempotent per ``batch_id``."""
        kinds = rows["kind"] if len(rows) else pd.Series([], dtype=object)
        win = rows[kinds == "window"]
        tpl = rows[kinds == "template"]
        alr = rows[kinds == "alert"]
        self._upsert("windows", win, WINDOW_COLUMNS)
        self._upsert("templates", tpl, TEMPLATE_COLUMNS)
        if not alr.empty:
            _write_atomic(_to_table(alr, ALERT_COLUMNS), self.out / "alerts" / f"batch-{batch_id:09d}.parquet")
        if self.produce and len(rows):
            self._produce(win, tpl, alr, batch_id)
        counts = {"windows": len(win), "templates": len(tpl), "alerts": len(alr)}
        for k, v in counts.items():
            self.totals[k] += v
        self.totals["batches"] += 1
        return counts

    def _produce(self, win: pd.DataFrame, tpl: pd.DataFrame, alr: pd.DataFrame, batch_id: int) -> None:
        """Produce a batch's rows to the topics in one transaction, unless an earlier run of
        ``batch_id`` committed them. Raises RuntimeError (no writer id), KafkaException."""
        from litemq.spark.transactional import TransactionalBatchWriter

        if self.writer_id is None:
            raise RuntimeError("Sinks.writer_id must be set before producing (the job's stable query id)")
        if self._tw is None:
            self._ensure_topics()
            self._tw = TransactionalBatchWriter({"bootstrap.servers": self.bootstrap, "linger.ms": 20,
                                                 "compression.type": "none"}, f"pipeline-{self.writer_id}", 0)
        self._tw.write(batch_id, lambda p, cb: self._send(p, cb, win, tpl, alr, batch_id))

    def _send(self, p, cb, win: pd.DataFrame, tpl: pd.DataFrame, alr: pd.DataFrame, batch_id: int) -> int:
        n = 0
        hdr = [("batch_id", str(batch_id).encode())]
        for kind, df, cols in (("window", win, WINDOW_COLUMNS), ("template", tpl, TEMPLATE_COLUMNS),
                               ("alert", alr, ALERT_COLUMNS)):
            topic = self.alerts_topic if kind == "alert" else self.metrics_topic
            for rec in df[cols].to_dict("records"):
                doc = {"kind": kind}
                for k, v in rec.items():
                    if v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT:
                        continue
                    if isinstance(v, pd.Timestamp):
                        v = v.isoformat()
                    elif hasattr(v, "item"):
                        v = v.item()
                    doc[k] = v
                ws = doc.get("window_start", "")
                key = "|".join(str(x) for x in (doc.get("source"), ws, kind, doc.get("level", ""),
                                               doc.get("template_id", ""), doc.get("alert_type", "")))
                while True:
                    try:
                        p.produce(topic, json.dumps(doc).encode(), key=key.encode(), headers=hdr, on_delivery=cb)
                        break
                    except BufferError:
                        p.poll(0.05)
                n += 1
        return n

    def _ensure_topics(self) -> None:
        """Create the output topics if missing: ``log-metrics`` compacted (a keyed changelog of
        window rows: the latest version per key is what counts), ``alerts`` with broker defaults.
        Records carry the produce time, not the (possibly years old) window time, so time
        retention applies to when they were written."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        existing = set(admin.list_topics(timeout=10).topics)
        new = [NewTopic(t, num_partitions=-1, replication_factor=-1, config=cfg)
               for t, cfg in ((self.metrics_topic, {"cleanup.policy": "compact"}), (self.alerts_topic, {}))
               if t not in existing]
        if new:
            for _t, fut in admin.create_topics(new, operation_timeout=10).items():
                try:
                    fut.result(timeout=30)
                except Exception as exc:
                    if "exist" not in str(exc).lower():
                        raise

    def close(self) -> None:
        """Drop the producer (every batch's transaction is committed or aborted in
        :meth:`write_batch`: nothing is pending)."""
        if self._tw is not None:
            self._tw.close()
            self._tw = None


def _read_dataset(path: Path) -> pd.DataFrame | None:
    if not path.exists() or not any(path.rglob("*.parquet")):
        return None
    import pyarrow.dataset as ds

    d = ds.dataset(str(path), format="parquet", partitioning="hive", exclude_invalid_files=True)
    t = d.to_table()
    df = t.to_pandas()
    for c in ("source", "date"):
        if c in df.columns:
            df[c] = df[c].astype(str)
    return df


def load_aggregates(out_dir: str | Path, kind: str = "windows") -> pd.DataFrame:
    """The aggregates of a job's output directory (``kind``: ``windows`` or ``templates``) as one
    DataFrame (with ``source`` and ``date`` from the partition directories); empty if none."""
    cols = WINDOW_COLUMNS if kind == "windows" else TEMPLATE_COLUMNS
    df = _read_dataset(Path(out_dir) / "aggregates" / kind)
    if df is None:
        return pd.DataFrame(columns=cols + ["date"])
    return df.sort_values(["source"] + _KEYS[kind], kind="stable").reset_index(drop=True)


def load_alerts(out_dir: str | Path) -> pd.DataFrame:
    p = Path(out_dir) / "alerts"
    files = sorted(p.glob("batch-*.parquet")) if p.exists() else []
    if not files:
        return pd.DataFrame(columns=ALERT_COLUMNS)
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
