"""``litemq pipeline run``: the PySpark Structured Streaming log analytics job.

Plan (one streaming query)::

    readStream.format("litemq")  subscribePattern, startingOffsets=earliest, includeHeaders
      -> select source (header ``source``, else the topic), format hint (header ``format``),
         topic, partition, offset, timestamp, value
      -> groupBy("source").applyInPandasWithState(analysis.process_source)   # parse, drain3,
         per-source event-time windows + watermark, alerts; state checkpointed per micro-batch
      -> foreachBatch(sinks.Sinks.write_batch)   # parquet upserts, alerts, topics log-metrics/alerts

The checkpoint (``OUT/_checkpoint``) holds the source offsets and the operator state of every
micro-batch, and every sink write is idempotent per batch id (parquet upserts; the topics in one
Kafka transaction per batch, skipped when the batch's marker says it was committed, with the
query id from the checkpoint as the transactions' writer id), so a rerun after a crash or Ctrl-C
resumes where the last committed batch ended and gives the same results (no double counting).

``engine="local"`` runs the same analysis and sinks without Spark (confluent-kafka consumer,
state and offsets in ``OUT/_local_state``): a reference and a fallback for machines without
Java; the CLI uses Spark unless told otherwise.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from litemq.pipeline.analysis import INPUT_COLUMNS, OUTPUT_SCHEMA, AnalysisConfig, process_source
from litemq.pipeline.sinks import Sinks

__all__ = ["JobResult", "run_pipeline", "get_spark", "topic_regex", "connector_available"]

INTERNAL_TOPICS = ("alerts", "log-metrics")


@dataclass
class JobResult:
    out_dir: Path
    batches: int = 0
    rows_in: int = 0
    totals: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    engine: str = "spark"
    stopped_by_user: bool = False


def topic_regex(patterns: list[str] | tuple[str, ...]) -> str:
    """One Java regex for ``subscribePattern`` from the CLI's TOPIC_PATTERNs (regexes, as in
    Kafka's subscribePattern; a pattern without regex characters is a literal topic name).
    The job's own output topics (:data:`INTERNAL_TOPICS`) never match: a pattern such as
    ``.*`` would otherwise read back what the job writes (matched as a whole name, as Kafka's
    ``subscribePattern`` and the litemq source do)."""
    parts = []
    for p in patterns:
        parts.append(p if re.search(r"[\\^$.*+?()\[\]{}|]", p) else re.escape(p))
    own = "|".join(re.escape(t) for t in INTERNAL_TOPICS)
    return f"(?!(?:{own})$)(?:" + "|".join(f"(?:{p})" for p in parts) + ")"


def connector_available() -> bool:
    try:
        import pyspark_litemq  # noqa: F401
    except Exception:
        return False
    return True


_SPARK = None


def get_spark(app_name: str = "litemq-pipeline", master: str | None = None, shuffle_partitions: int = 2,
              conf: dict[str, str] | None = None):
    """The process-wide SparkSession for the job (created once; tests share it).

    Args:
        master: Spark master URL (``local[2]``, ``spark://host:7077``, ...); default
            ``LITEMQ_SPARK_MASTER`` or ``local[2]``.
        conf: Spark settings by Spark's names, applied over the job's defaults (as
            ``spark-submit --conf``).

    The executors' Python workers run this process's interpreter (``spark.pyspark.python`` and
    ``PYSPARK_PYTHON`` default to ``sys.executable``), so on a standalone cluster of this machine
    they import the same installed ``litemq`` (the connector's reader and the job's state
    function are unpickled there).
    """
    global _SPARK
    import sys

    from pyspark.sql import SparkSession

    if _SPARK is not None and _SPARK._jsc is not None and not _SPARK._jsc.sc().isStopped():
        return _SPARK
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (SparkSession.builder.appName(app_name)
         .master(master or os.environ.get("LITEMQ_SPARK_MASTER", "local[2]"))
         .config("spark.pyspark.python", python)
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
         .config("spark.driver.memory", os.environ.get("LITEMQ_SPARK_DRIVER_MEMORY", "1g"))
         .config("spark.python.worker.reuse", "true")
         .config("spark.ui.showConsoleProgress", "false")
         # pyspark's own pandas concat in applyInPandasWithState warns about all-NA columns
         .config("spark.executorEnv.PYTHONWARNINGS", "ignore::FutureWarning"))
    for key, value in (conf or {}).items():
        b = b.config(key, value)
    _SPARK = b.getOrCreate()
    _SPARK.sparkContext.setLogLevel("ERROR")
    return _SPARK


def _state_fn(cfg: AnalysisConfig):
    def fn(key, pdfs, state):
        blob = state.get[0] if state.exists else None
        frames = [p for p in pdfs if len(p)]
        pdf = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=INPUT_COLUMNS)
        rows, blob = process_source(key[0], pdf, blob, cfg)
        state.update((blob,))
        if len(rows):
            yield rows

    return fn


def build_stream(spark, bootstrap: str, patterns: list[str], cfg: AnalysisConfig, *,
                 max_offsets_per_trigger: int | None = None, starting_offsets: str = "earliest"):
    """The analysed stream (rows of :data:`litemq.pipeline.analysis.OUTPUT_SCHEMA`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    r = (spark.readStream.format("litemq")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("subscribePattern", topic_regex(patterns))
         .option("startingOffsets", starting_offsets)
         .option("includeHeaders", "true"))
    if max_offsets_per_trigger:
        r = r.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    raw = r.load()
    hdr = lambda name: F.expr(f"cast(try_element_at(filter(headers, h -> h.key = '{name}'), 1).value as string)")  # noqa: E731
    inp = raw.select(
        F.coalesce(hdr("source"), F.col("topic")).alias("source"),
        hdr("format").alias("fmt_hint"),
        "topic", "partition", "offset",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "value",
        hdr("year").alias("year_hint"),
    )
    return inp.groupBy("source").applyInPandasWithState(
        _state_fn(cfg), OUTPUT_SCHEMA, "blob binary", "append", GroupStateTimeout.NoTimeout)


def run_pipeline(bootstrap: str, patterns: list[str], out_dir: str | Path, *, once: bool = False,
                 cfg: AnalysisConfig = AnalysisConfig(), engine: str = "spark", spark=None,
                 max_offsets_per_trigger: int | None = None, trigger_interval_s: float = 5.0,
                 stop: threading.Event | None = None, produce: bool = True,
                 on_batch=None, timeout_s: float | None = None) -> JobResult:
    """Run the job until caught up (``once``) or until ``stop`` is set / Ctrl-C.

    ``on_batch(batch_id, counts)`` is called after each micro-batch's sinks are written.
    """
    out = Path(out_dir).absolute()   # the checkpoint path must mean the same on every executor
    out.mkdir(parents=True, exist_ok=True)
    sinks = Sinks(out, bootstrap, produce=produce)
    res = JobResult(out_dir=out, engine=engine)
    t0 = time.monotonic()
    try:
        if engine == "local":
            _run_local(bootstrap, patterns, out, once, cfg, sinks, res, stop, max_offsets_per_trigger,
                       trigger_interval_s, on_batch, timeout_s)
        else:
            _run_spark(spark, bootstrap, patterns, out, once, cfg, sinks, res, stop, max_offsets_per_trigger,
                       trigger_interval_s, on_batch, timeout_s)
    finally:
        sinks.close()
        res.totals = dict(sinks.totals)
        res.elapsed_s = time.monotonic() - t0
    return res


def _run_spark(spark, bootstrap, patterns, out, once, cfg, sinks, res, stop, max_offsets, interval_s, on_batch,
               timeout_s):
    if not connector_available():
        raise RuntimeError("the PySpark connector format('litemq') (module pyspark_litemq) is not installed; "
                           "use engine='local' (--engine local)")
    spark = spark or get_spark()
    stream = build_stream(spark, bootstrap, patterns, cfg, max_offsets_per_trigger=max_offsets)

    def each(df, batch_id):
        if sinks.writer_id is None:
            sinks.writer_id = spark_query_id(out / "_checkpoint")
        pdf = df.toPandas()
        counts = sinks.write_batch(pdf, batch_id)
        res.batches += 1
        if on_batch is not None:
            on_batch(batch_id, counts)

    w = (stream.writeStream.queryName(f"litemq_pipeline_{abs(hash(str(out))) % 10**8}")
         .outputMode("append").foreachBatch(each)
         .option("checkpointLocation", str(out / "_checkpoint")))
    w = w.trigger(availableNow=True) if once else w.trigger(processingTime=f"{interval_s} seconds")
    q = w.start()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    interrupted = threading.Event()
    restore = {}
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C/SIGTERM only set a flag: the query is stopped between micro-batches below.
        # (PySpark's own SIGINT handler calls into py4j from inside the signal handler, which
        # breaks the py4j call in progress.)
        for sig in (signal.SIGINT, signal.SIGTERM):
            restore[sig] = signal.signal(sig, lambda _s, _f: interrupted.set())
    try:
        while q.isActive:
            if interrupted.is_set() or (stop is not None and stop.is_set()):
                res.stopped_by_user = True
                break
            if deadline is not None and time.monotonic() > deadline:
                break
            q.awaitTermination(0.5)
    except KeyboardInterrupt:
        res.stopped_by_user = True
    finally:
        if q.isActive:
            _stop_between_batches(q, interrupted, lambda: res.batches)
        for sig, h in restore.items():
            signal.signal(sig, h)
    if q.exception() is not None:
        raise RuntimeError(f"streaming query failed: {q.exception()}")


def spark_query_id(checkpoint: Path) -> str:
    """The streaming query id kept in a checkpoint (``metadata``: ``{"id": "<uuid>"}``, written
    by Spark when the query is first started; stable across restarts). Raises FileNotFoundError,
    ValueError."""
    import json

    text = (Path(checkpoint) / "metadata").read_text()
    return str(json.loads(text.splitlines()[0])["id"])


def local_writer_id(out: Path) -> str:
    """The local engine's stable id (``OUT/_local_state/writer-id``, made once)."""
    import uuid

    path = out / "_local_state" / "writer-id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"local-{uuid.uuid4()}\n")
        os.replace(tmp, path)
    return path.read_text().strip()


def _stop_between_batches(q, interrupted: threading.Event, batches_done, wait_s: float = 120.0) -> None:
    """Let the running micro-batch finish its sinks, then stop the query (``StreamingQuery.stop``
    cancels a batch in progress: safe for exactly-once, since the batch is re-run on restart, but
    noisy). A second Ctrl-C stops at once."""
    interrupted.clear()
    n0 = batches_done()
    deadline = time.monotonic() + wait_s
    try:
        while q.isActive and time.monotonic() < deadline and not interrupted.is_set():
            if not q.status.get("isTriggerActive", False) or batches_done() > n0:
                break
            time.sleep(0.05)
    finally:
        q.stop()


# ---------------------------------------------------------------------------------------------
# local engine (no Spark): same analysis and sinks, state + offsets committed after each batch

def _run_local(bootstrap, patterns, out, once, cfg, sinks, res, stop, max_offsets, interval_s, on_batch, timeout_s):
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    state_path = out / "_local_state" / "state.pkl"
    plan_path = out / "_local_state" / "plan.pkl"
    sinks.writer_id = sinks.writer_id or local_writer_id(out)
    st = {"batch_id": -1, "offsets": {}, "sources": {}}
    if state_path.exists():
        st = pickle.loads(state_path.read_bytes())
    rx = re.compile(topic_regex(patterns))
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "litemq-pipeline-local",
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 3})
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    per_batch = max_offsets or 200_000
    try:
        while True:
            if stop is not None and stop.is_set():
                res.stopped_by_user = True
                break
            batch_id = st["batch_id"] + 1
            plan = _planned(plan_path, batch_id)
            if plan is None:
                md = admin.list_topics(timeout=10)
                tps = [(t, p) for t, tm in sorted(md.topics.items()) if rx.fullmatch(t)
                       and t not in INTERNAL_TOPICS and not t.startswith("__") for p in sorted(tm.partitions)]
                ends = {}
                for t, p in tps:
                    _lo, hi = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                    ends[(t, p)] = hi
                todo = {tp: (st["offsets"].get(tp, 0), hi) for tp, hi in ends.items()
                        if st["offsets"].get(tp, 0) < hi}
                if not todo:
                    if once:
                        break
                    if deadline is not None and time.monotonic() > deadline:
                        break
                    time.sleep(interval_s)
                    continue
                # admission: at most per_batch records, spread over partitions in order
                budget = per_batch
                plan = {}
                for tp, (start, hi) in sorted(todo.items()):
                    if budget <= 0:
                        break
                    end = min(hi, start + budget)
                    plan[tp] = (start, end)
                    budget -= end - start
                # like Spark's offsets log: a batch re-run after a crash reads the same ranges, so
                # its (exactly-once) topic transaction holds the same records
                _write_atomic_bytes(plan_path, pickle.dumps({"batch_id": batch_id, "plan": plan}))
            rows = []
            for (t, p), (start, end) in plan.items():
                consumer.assign([TopicPartition(t, p, start)])
                pos = start
                while pos < end:
                    # no more than the range still holds: consume() waits out its whole timeout
                    # for a fuller batch (5 s per partition of a small source, every batch)
                    msgs = consumer.consume(min(5000, end - pos), timeout=1)
                    if not msgs:
                        continue
                    for m in msgs:
                        if m.error() is not None:
                            if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= end:
                                pos = end  # the range ends with a control record (transaction marker)
                                break
                            continue
                        if m.offset() >= end:
                            pos = end
                            break
                        h = dict(m.headers() or [])
                        src = h.get("source")
                        fmt = h.get("format")
                        year = h.get("year")
                        rows.append((src.decode() if src else t, fmt.decode() if fmt else None, t, p, m.offset(),
                                     m.timestamp()[1], m.value(), year.decode() if year else None))
                        pos = m.offset() + 1
                consumer.unassign()
            pdf = pd.DataFrame(rows, columns=INPUT_COLUMNS)
            outs = []
            new_states = dict(st["sources"])
            for source, g in pdf.groupby("source", sort=True):
                r, blob = process_source(source, g, st["sources"].get(source), cfg)
                new_states[source] = blob
                outs.append(r)
            out_rows = pd.concat(outs, ignore_index=True) if outs else pd.DataFrame()
            counts = sinks.write_batch(out_rows, batch_id) if len(out_rows) else {}
            new_offsets = dict(st["offsets"])
            for tp, (_s, end) in plan.items():
                new_offsets[tp] = end
            st = {"batch_id": batch_id, "offsets": new_offsets, "sources": new_states}
            _write_atomic_bytes(state_path, pickle.dumps(st))
            res.batches += 1
            res.rows_in += len(pdf)
            if on_batch is not None:
                on_batch(batch_id, counts)
    except KeyboardInterrupt:
        res.stopped_by_user = True
    finally:
        consumer.close()


def _planned(plan_path: Path, batch_id: int) -> dict | None:
    """The ranges planned for ``batch_id`` by a run that crashed before finishing it, else None."""
    if not plan_path.exists():
        return None
    saved = pickle.loads(plan_path.read_bytes())
    return saved["plan"] if saved.get("batch_id") == batch_id else None


def _write_atomic_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
