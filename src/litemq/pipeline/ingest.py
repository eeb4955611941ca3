"""``litemq ingest``: send log files to a Kafka-protocol cluster, one record per line.

Each *source* (a file; a directory or glob expands to its files) goes to its own topic
``<prefix><source name>`` or, with ``single_topic``, all sources share one topic and are told
apart by the ``source`` header. Every record carries two headers: ``source`` (the source name)
and ``format`` (the format detected from the source's first lines, see
:func:`litemq.pipeline.formats.detect_format`), which the Spark job uses as a hint.

- value: the raw line bytes, without its line ending (``\\n`` or ``\\r\\n``); bytes that are not
  valid UTF-8 are sent as they are (only the parsing for key/timestamp decodes with
  replacement); a last line without a final newline is sent too. Blank lines are skipped.
- key: the line's host, else its component, when the format has one; else no key.
- timestamp: the line's own timestamp (UTC epoch ms) when it parses; else that of the source's
  last line that had one (a continuation line: a stack trace, dpkg's output in apt's
  ``term.log``); else the time it is read.
- multi-line formats (``apt_history``: one ``Start-Date:`` stanza) are sent as one record per
  stanza, its lines joined by ``\\n`` (:func:`litemq.pipeline.formats.join_records`).
- producer: confluent-kafka with ``enable.idempotence=true`` (no duplicates from retries).
- topics that do not exist yet are created with ``retention.ms=-1`` (``retention_ms``): like
  Kafka, a broker deletes segments by the *record timestamps*, so lines replayed from an old
  log (dated 2015) would otherwise be deleted by time retention within seconds.

Modes: replay (as fast as possible, ``rate`` lines/s, or ``speed`` times the logs' own pace)
and follow (like ``tail -F``: keeps reading new lines, reopens a file that was rotated
(inode changed) or truncated, and picks up files that appear later under a glob/directory).
"""

from __future__ import annotations

import glob as _glob
import heapq
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from litemq.pipeline.formats import RecordJoiner, detect_format, join_records, parse_line
from litemq.storage.config import LogConfig

RECORD_TIMESTAMP_AFTER_MAX_MS = LogConfig().message_timestamp_after_max_ms
"""A line whose parsed time is more than this ahead of now (a source in a zone east of UTC read
as UTC) is sent with now as its record timestamp: a topic at Kafka's default
``message.timestamp.after.max.ms`` would refuse it."""

__all__ = ["Source", "IngestStats", "Ingester", "resolve_sources", "iter_file_lines", "FollowedFile",
           "source_name", "topic_for", "ingest"]

DETECT_LINES = 64
_TOPIC_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_LOG_SUFFIXES = (".log", ".txt", ".out")
#: in a directory, files with these suffixes are not taken as logs (loghub's ground-truth CSVs,
#: READMEs); a file named explicitly is always taken
SKIP_IN_DIRS = (".csv", ".md", ".json", ".py", ".html", ".pdf", ".zip", ".tar")
#: in a directory, rotated copies of a log are not taken as sources of their own (logrotate's
#: ``app.log.1``, ``app.log.2.gz``, ``dateext``'s ``app.log-20261129[.gz]``): with ``--follow``
#: the rotated file is read to its end as part of its source, and a rescan must not send its
#: lines again as a new one
ROTATED_IN_DIRS = re.compile(r".*(\.\d+|-\d{8}(\d{2})?)(\.gz)?")


def source_name(path: str | Path) -> str:
    """A source's name from its file name: ``/var/log/nginx/access.log`` -> ``access``.

    Characters that are not legal in a Kafka topic name become ``_``.
    """
    name = Path(path).name
    for suf in (".gz",):
        if name.endswith(suf):
            name = name[: -len(suf)]
    for suf in _LOG_SUFFIXES:
        if name.endswith(suf) and len(name) > len(suf):
            name = name[: -len(suf)]
            break
    name = _TOPIC_BAD.sub("_", name).strip("._") or "log"
    return name[:200]


def topic_for(prefix: str, name: str) -> str:
    return (_TOPIC_BAD.sub("_", prefix) + name)[:249]


@dataclass
class Source:
    """One log file and where its lines go."""

    name: str
    path: Path
    topic: str
    fmt: str | None = None          # detected lazily from the first lines
    last_ts_ms: int | None = None   # timestamp of the last line that had one (for continuation lines)
    year: int | None = None         # year of its year-less timestamps (None: the Ingester's, else the latest fitting)


def _expand(spec: str) -> tuple[list[Path], bool]:
    """Files named by one SOURCE argument; second item: whether it is a pattern (dir/glob)."""
    p = Path(spec)
    if p.is_dir():
        return sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                      and not f.name.lower().endswith(SKIP_IN_DIRS) and not ROTATED_IN_DIRS.fullmatch(f.name)), True
    if any(ch in spec for ch in "*?["):
        return sorted(Path(f) for f in _glob.glob(spec) if Path(f).is_file()), True
    return [p], False


def resolve_sources(specs: Iterable[str | Path], topic_prefix: str = "logs.",
                    single_topic: str | None = None, *, must_exist: bool = True,
                    years: dict[str, int] | None = None) -> list[Source]:
    """Expand files, directories and globs into :class:`Source` objects with unique names;
    ``years`` maps a file's path (as given or resolved) to the year of its year-less timestamps.

    Raises:
        FileNotFoundError: a plain file does not exist (and ``must_exist``).
    """
    out: list[Source] = []
    seen: dict[str, int] = {}
    paths: list[Path] = []
    for spec in specs:
        files, _pattern = _expand(str(spec))
        for f in files:
            if not f.exists() and must_exist:
                raise FileNotFoundError(f"no such log file: {f}")
            if f.resolve() not in {q.resolve() for q in paths}:
                paths.append(f)
    for f in paths:
        name = source_name(f)
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        else:
            seen[name] = 1
        topic = single_topic if single_topic else topic_for(topic_prefix, name)
        year = None
        if years:
            year = years.get(str(f), years.get(str(f.resolve())))
        out.append(Source(name=name, path=f, topic=topic, year=year))
    return out


def strip_eol(raw: bytes) -> bytes:
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw


def iter_file_lines(path: str | Path) -> Iterator[bytes]:
    """Lines of a file as bytes without line endings; the last line may lack a newline.

    ``.gz`` files are decompressed. Blank lines are skipped.
    """
    import gzip

    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rb") as fh:
        for raw in fh:
            line = strip_eol(raw)
            if line.strip():
                yield line


def _detect(path: Path) -> str:
    sample = []
    try:
        for line in iter_file_lines(path):
            sample.append(line.decode("utf-8", "replace"))
            if len(sample) >= DETECT_LINES:
                break
    except OSError:
        return "unknown"
    return detect_format(sample)


class FollowedFile:
    """``tail -F`` for one path: :meth:`poll` returns the complete lines appended since the last
    call, surviving rotation (the path now names another inode: the old file is read to its end,
    then the new one from its start) and truncation (size below the read position: read again
    from the start). A partial last line is held until its newline arrives, or emitted when the
    file is rotated away or :meth:`close` is called with ``flush=True``.
    """

    def __init__(self, path: str | Path, *, from_end: bool = False):
        self.path = Path(path)
        self._fh = None
        self._ino: int | None = None
        self._buf = b""
        self._from_end = from_end
        self._open(initial=True)

    def _open(self, initial: bool = False) -> None:
        try:
            fh = open(self.path, "rb")
        except OSError:
            self._fh, self._ino = None, None
            return
        st = os.fstat(fh.fileno())
        self._fh, self._ino = fh, st.st_ino
        if initial and self._from_end:
            fh.seek(0, os.SEEK_END)

    def _drain(self) -> list[bytes]:
        out: list[bytes] = []
        if self._fh is None:
            return out
        while True:
            chunk = self._fh.read(1 << 20)
            if not chunk:
                break
            self._buf += chunk
        if b"\n" in self._buf:
            *lines, self._buf = self._buf.split(b"\n")
            for raw in lines:
                line = raw[:-1] if raw.endswith(b"\r") else raw
                if line.strip():
                    out.append(line)
        return out

    def _flush_partial(self) -> list[bytes]:
        line, self._buf = strip_eol(self._buf), b""
        return [line] if line.strip() else []

    def poll(self) -> list[bytes]:
        if self._fh is None:
            self._open()
            return self._drain()
        out = self._drain()
        try:
            st = os.stat(self.path)
        except OSError:
            return out          # rotated away, new file not created yet: keep the old one open
        if st.st_ino != self._ino:
            out += self._drain() + self._flush_partial()
            self._fh.close()
            self._open()
            out += self._drain()
        elif st.st_size < self._fh.tell():
            # truncated in place (copytruncate): start over
            self._buf = b""
            self._fh.seek(0)
            out += self._drain()
        return out

    def close(self, flush: bool = True) -> list[bytes]:
        out = self._drain() + (self._flush_partial() if flush else [])
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        return out


@dataclass
class IngestStats:
    lines: int = 0
    bytes: int = 0
    errors: int = 0
    per_source: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


class Ingester:
    """Sends lines of :class:`Source` s through one idempotent confluent-kafka producer; a line's
    key (its host/component) picks the partition as Kafka's Java client does (murmur2,
    :mod:`litemq.protocol.partitioner`).

    Args:
        bootstrap: ``bootstrap.servers``.
        producer_config: extra librdkafka settings (override the defaults).
        on_progress: called as ``on_progress(source, n_lines, n_bytes)`` after each chunk.
        year: year for formats without one in the line (see ``parse_line``).
    """

    def __init__(self, bootstrap: str, *, producer_config: dict | None = None,
                 on_progress: Callable[[Source, int, int], None] | None = None,
                 year: int | None = None, create_topics: bool = True, retention_ms: int | None = -1,
                 partitions: int = -1):
        from confluent_kafka import Producer

        from litemq.protocol import partitioner

        conf = partitioner.producer_config({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 500_000,
            "compression.type": "none",
            "log_level": 3,
        })
        conf.update(producer_config or {})
        self.bootstrap = bootstrap
        self.producer = Producer(conf)
        self.stats = IngestStats()
        self.on_progress = on_progress
        self.year = year
        self.create_topics = create_topics
        self.retention_ms = retention_ms
        self.partitions = partitions
        self._topics_ready: set[str] = set()
        self._first_error: str | None = None

    # -- topics -------------------------------------------------------------------------------
    def ensure_topics(self, topics: Iterable[str]) -> None:
        todo = sorted(set(topics) - self._topics_ready)
        if not todo or not self.create_topics:
            self._topics_ready.update(todo)
            return
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        existing = set(admin.list_topics(timeout=10).topics)
        cfg = {} if self.retention_ms is None else {"retention.ms": str(self.retention_ms)}
        new = [NewTopic(t, num_partitions=self.partitions, replication_factor=-1, config=cfg)
               for t in todo if t not in existing]
        if new:
            for t, fut in admin.create_topics(new, operation_timeout=10).items():
                try:
                    fut.result(timeout=30)
                except Exception as exc:  # already exists (a concurrent ingest) is fine
                    if "exist" not in str(exc).lower():
                        raise
        self._topics_ready.update(todo)

    # -- sending ------------------------------------------------------------------------------
    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.stats.errors += 1
            if self._first_error is None:
                self._first_error = str(err)

    def _year_of(self, src: Source) -> int | None:
        """The year of ``src``'s year-less timestamps: its own, else this ingester's (None: the
        latest one that fits, :func:`parse_line`)."""
        return src.year if src.year is not None else self.year

    def send(self, src: Source, line: bytes, now_ms: int | None = None) -> int | None:
        """Produce one line (bytes, no line ending). Returns the record timestamp used."""
        if src.fmt is None:
            src.fmt = _detect(src.path)
        text = line.decode("utf-8", "replace")
        key = None
        ts = None
        year = self._year_of(src)
        if src.fmt != "unknown":
            p = parse_line(text, src.fmt, year=year)
            k = p.host or p.component
            key = k.encode("utf-8") if k else None
            ts = p.timestamp_ms
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if ts is not None and ts >= 0:
            src.last_ts_ms = ts
        elif src.last_ts_ms is not None:
            ts = src.last_ts_ms
        else:
            ts = now
        if ts - now > RECORD_TIMESTAMP_AFTER_MAX_MS:
            # A broker refuses a record this far ahead of its clock (INVALID_TIMESTAMP, Kafka 4's
            # message.timestamp.after.max.ms): the record takes now; the line keeps its own time,
            # which the analysis parses again.
            ts = now
        headers = [("source", src.name.encode()), ("format", src.fmt.encode())]
        if year is not None:  # the analysis dates year-less lines with it too
            headers.append(("year", str(year).encode()))
        while True:
            try:
                self.producer.produce(src.topic, line, key=key, timestamp=ts, headers=headers,
                                      on_delivery=self._on_delivery)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.stats.lines += 1
        self.stats.bytes += len(line)
        self.stats.per_source[src.name] = self.stats.per_source.get(src.name, 0) + 1
        return ts

    def _tick(self, src: Source, n: int, nbytes: int) -> None:
        self.producer.poll(0)
        if self.on_progress is not None:
            self.on_progress(src, n, nbytes)

    def flush(self, timeout_s: float = 60.0) -> None:
        left = self.producer.flush(timeout_s)
        if left:
            raise RuntimeError(f"{left} records not delivered after {timeout_s:.0f} s")
        if self._first_error is not None:
            raise RuntimeError(f"{self.stats.errors} records failed; first error: {self._first_error}")

    # -- modes --------------------------------------------------------------------------------
    def replay(self, sources: list[Source], *, rate: float | None = None, speed: float | None = None,
               stop: threading.Event | None = None) -> IngestStats:
        """Send every line of every source once. ``rate``: lines/s over all sources.
        ``speed``: follow the lines' own timestamps, ``speed`` times faster (sources merged in
        timestamp order)."""
        self.ensure_topics(s.topic for s in sources)
        for s in sources:
            if s.fmt is None:
                s.fmt = _detect(s.path)
        t0 = time.monotonic()
        sent = 0
        if speed:
            first_ts: list[int] = []
            for _ts, _i, src, line in self._merged(sources):
                if stop is not None and stop.is_set():
                    break
                if _ts is not None:
                    if not first_ts:
                        first_ts.append(_ts)
                    due = t0 + (_ts - first_ts[0]) / 1000.0 / speed
                    delay = due - time.monotonic()
                    if delay > 0:
                        self.producer.poll(0)
                        time.sleep(delay)
                self.send(src, line)
                sent += 1
                if sent % 256 == 0 or speed:
                    self._tick(src, 1, len(line))
        else:
            for src in sources:
                n = nb = 0
                for line in join_records(iter_file_lines(src.path), src.fmt):
                    if stop is not None and stop.is_set():
                        break
                    self.send(src, line)
                    sent += 1
                    n += 1
                    nb += len(line)
                    if rate:
                        due = t0 + sent / rate
                        delay = due - time.monotonic()
                        if delay > 0:
                            self.producer.poll(0)
                            time.sleep(delay)
                    if n >= 512 or rate:
                        self._tick(src, n, nb)
                        n = nb = 0
                self._tick(src, n, nb)
        self.flush()
        return self.stats

    def _merged(self, sources: list[Source]) -> Iterator[tuple[int | None, int, Source, bytes]]:
        def gen(i: int, src: Source):
            last = None
            for line in join_records(iter_file_lines(src.path), src.fmt):
                ts = None
                if src.fmt != "unknown":
                    ts = parse_line(line.decode("utf-8", "replace"), src.fmt, year=self._year_of(src)).timestamp_ms
                last = ts if ts is not None else last
                yield (last if last is not None else -1, i, src, line)

        for ts, i, src, line in heapq.merge(*(gen(i, s) for i, s in enumerate(sources)),
                                           key=lambda t: (t[0], t[1])):
            yield (None if ts == -1 else ts), i, src, line

    def follow(self, specs: list[str], *, topic_prefix: str = "logs.", single_topic: str | None = None,
               stop: threading.Event | None = None, from_end: bool = False, poll_interval_s: float = 0.2,
               idle_timeout_s: float | None = None, rescan_s: float = 1.0) -> IngestStats:
        """Follow files (``tail -F``) until ``stop`` is set (or nothing new for ``idle_timeout_s``).

        Directories and globs are rescanned every ``rescan_s`` for new files (read from their
        start). Files that do not exist yet are waited for.
        """
        stop = stop or threading.Event()
        followed: dict[Path, tuple[Source, FollowedFile]] = {}
        joiners: dict[str, RecordJoiner] = {}   # source name -> its multi-line record joiner
        names: set[str] = set()

        def scan(first: bool) -> None:
            for spec in specs:
                files, _pattern = _expand(str(spec))
                for f in files:
                    if f in followed:
                        continue
                    name = source_name(f)
                    base, k = name, 1
                    while name in names:
                        k += 1
                        name = f"{base}_{k}"
                    names.add(name)
                    src = Source(name, f, single_topic or topic_for(topic_prefix, name))
                    self.ensure_topics([src.topic])
                    followed[f] = (src, FollowedFile(f, from_end=from_end and first))

        scan(True)
        last_scan = last_data = time.monotonic()
        try:
            while not stop.is_set():
                got = 0
                for src, ff in list(followed.values()):
                    lines = ff.poll()
                    if lines and src.fmt in (None, "unknown"):
                        src.fmt = None if src.fmt == "unknown" else src.fmt
                        if src.fmt is None:
                            src.fmt = _detect(src.path)
                            if src.fmt == "unknown":
                                src.fmt = detect_format(line.decode("utf-8", "replace") for line in lines[:DETECT_LINES])
                    nb = 0
                    joiner = joiners.setdefault(src.name, RecordJoiner(src.fmt)) if lines else None
                    for line in lines:
                        for rec in joiner.feed(line):
                            self.send(src, rec)
                        nb += len(line)
                    if lines:
                        got += len(lines)
                        self._tick(src, len(lines), nb)
                now = time.monotonic()
                if got:
                    last_data = now
                    self.producer.flush(30)
                elif idle_timeout_s is not None and now - last_data >= idle_timeout_s:
                    break
                if now - last_scan >= rescan_s:
                    scan(False)
                    last_scan = now
                if not got:
                    stop.wait(poll_interval_s)
        finally:
            for src, ff in followed.values():
                joiner = joiners.get(src.name) or RecordJoiner(src.fmt)
                for line in ff.close(flush=True):
                    for rec in joiner.feed(line):
                        self.send(src, rec)
                for rec in joiner.flush():
                    self.send(src, rec)
            self.flush()
        return self.stats


def ingest(specs: list[str], bootstrap: str, *, topic_prefix: str = "logs.", single_topic: str | None = None,
           follow: bool = False, rate: float | None = None, speed: float | None = None,
           stop: threading.Event | None = None, producer_config: dict | None = None,
           on_progress=None, years: dict[str, int] | None = None, **follow_kw) -> IngestStats:
    """Library entry point of ``litemq ingest`` (see the module docstring). ``years``: the year
    of the year-less timestamps of given files, by path (:func:`resolve_sources`)."""
    ing = Ingester(bootstrap, producer_config=producer_config, on_progress=on_progress)
    if follow:
        return ing.follow([str(s) for s in specs], topic_prefix=topic_prefix, single_topic=single_topic,
                          stop=stop, **follow_kw)
    sources = resolve_sources(specs, topic_prefix, single_topic, years=years)
    return ing.replay(sources, rate=rate, speed=speed, stop=stop)
