"""Driver-side offset lookups and offset arithmetic for the Spark source.

Offsets are ``{topic: {partition: offset}}`` dicts. In a Spark streaming offset (JSON, as in
Spark's ``KafkaSourceOffset``) partitions are strings and both levels are sorted, so the same
positions always serialise to the same text: ``{"t":{"0":12,"1":7}}``.

Lookups use a confluent-kafka ``Consumer`` (librdkafka) built from the ``kafka.*`` options, so
they work with any setting the client supports (TLS, SASL, ...). Group id: ``kafka.group.id``
if given, else ``<groupIdPrefix or spark-kafka-source>-<uuid>``; nothing is ever committed.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

log = logging.getLogger("litemq.spark")

TopicOffsets = dict  # {topic: {partition(int): offset(int)}}


def to_json_offsets(offs: TopicOffsets) -> dict:
    """``{topic: {int: int}}`` -> Spark's sorted ``{topic: {"p": off}}`` form."""
    return {t: {str(p): int(offs[t][p]) for p in sorted(offs[t])} for t in sorted(offs)}


def from_json_offsets(d: dict) -> TopicOffsets:
    """Inverse of :func:`to_json_offsets` (partition keys back to int)."""
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in (d or {}).items()}


def flatten(offs: TopicOffsets) -> dict[tuple[str, int], int]:
    return {(t, p): o for t, parts in offs.items() for p, o in parts.items()}


def nest(flat: dict[tuple[str, int], int]) -> TopicOffsets:
    out: TopicOffsets = {}
    for (t, p), o in flat.items():
        out.setdefault(t, {})[p] = o
    return out


def rate_limit(start: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
               max_rows: int) -> dict[tuple[str, int], int]:
    """End offsets that admit at most ``max_rows`` offsets in total, split across partitions in
    proportion to what each has available (like Spark's ``maxOffsetsPerTrigger``), but never
    more than ``max_rows`` (Spark may exceed it by rounding up small shares; this does not).
    Every partition with data gets at least one offset while the budget lasts.
    """
    avail = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: (max_rows * a) // total for tp, a in avail.items()}
    left = max_rows - sum(shares.values())
    # hand the remainder out one by one, largest backlog first (deterministic order)
    for tp in sorted(avail, key=lambda k: (-(avail[k] - shares[k]), k)):
        if left <= 0:
            break
        if shares[tp] < avail[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + shares[tp] for tp in latest}


class OffsetReader:
    """Metadata and offset lookups on the driver (or the streaming source runner process).

    Args:
        so: :class:`~litemq.spark.options.SourceOptions`.
    Raises (on use): ``confluent_kafka.KafkaException`` after ``fetchOffset.numRetries`` retries.
    """

    def __init__(self, so) -> None:
        self.so = so
        self._consumer = None

    def _client(self):
        if self._consumer is None:
            import confluent_kafka as ck

            cfg = dict(self.so.client)
            prefix = self.so.extra.get("groupidprefix") or "spark-kafka-source"
            cfg.setdefault("group.id", f"{prefix}-{uuid.uuid4()}")
            cfg["enable.auto.commit"] = False
            cfg.setdefault("client.id", "litemq-spark-driver")
            cfg.setdefault("log_level", 3)
            self._consumer = _make_client(ck.Consumer, cfg)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # closing a broken client must not mask the real error
                pass
            self._consumer = None

    def _retry(self, fn, *args):
        so = self.so
        for attempt in range(so.num_retries + 1):
            try:
                return fn(*args)
            except Exception as exc:
                if attempt >= so.num_retries:
                    raise
                log.warning("litemq: offset lookup failed (%s); retrying", exc)
                time.sleep(so.retry_interval_ms / 1000)
                if attempt >= 1:
                    self.close()

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Sorted ``(topic, partition)`` of the subscription as it is now.

        ``subscribe``: listed topics that exist; ``subscribePattern``: every non-internal topic
        whose whole name matches; ``assign``: exactly the given partitions.
        """
        return self._retry(self._topic_partitions)

    def _topic_partitions(self) -> list[tuple[str, int]]:
        so = self.so
        if so.assign is not None:
            return sorted((t, p) for t, ps in so.assign.items() for p in ps)
        md = self._client().list_topics(timeout=30)
        out = []
        if so.subscribe is not None:
            names = [t for t in so.subscribe if t in md.topics and md.topics[t].error is None]
        else:
            rx = re.compile(so.pattern)
            names = [t for t in md.topics if not t.startswith("__") and rx.fullmatch(t)
                     and md.topics[t].error is None]
        for t in names:
            out.extend((t, p) for p in md.topics[t].partitions)
        return sorted(out)

    def watermarks(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(topic, partition): (log start offset, high watermark)}``."""
        import confluent_kafka as ck

        def get():
            c = self._client()
            return {tp: c.get_watermark_offsets(ck.TopicPartition(tp[0], tp[1]), timeout=30, cached=False)
                    for tp in tps}

        return self._retry(get)

    def earliest(self, tps) -> dict[tuple[str, int], int]:
        return {tp: lo for tp, (lo, hi) in self.watermarks(tps).items()}

    def latest(self, tps) -> dict[tuple[str, int], int]:
        return {tp: hi for tp, (lo, hi) in self.watermarks(tps).items()}

    def for_times(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """First offset with timestamp >= the given ms per partition; -1 where none."""
        import confluent_kafka as ck

        if not wanted:
            return {}

        def get():
            res = self._client().offsets_for_times(
                [ck.TopicPartition(t, p, ts) for (t, p), ts in wanted.items()], timeout=30)
            out = {}
            for r in res:
                if r.error is not None:
                    raise ck.KafkaException(r.error)
                out[(r.topic, r.partition)] = r.offset if r.offset >= 0 else -1
            return out

        return self._retry(get)


_WARNED_UNKNOWN: set[str] = set()
"""Client settings this process already warned about (see :func:`_make_client`)."""


def _make_client(cls, cfg: dict):
    """Build a confluent-kafka client; settings librdkafka does not know are dropped with a
    warning (Java-only consumer/producer settings passed through ``kafka.*``)."""
    import confluent_kafka as ck

    cfg = dict(cfg)
    for _ in range(32):
        try:
            return cls(cfg)
        except ck.KafkaException as exc:
            m = re.search(r'No such configuration property: "([^"]+)"', str(exc))
            if not m or m.group(1) not in cfg:
                raise
            if m.group(1) not in _WARNED_UNKNOWN:  # once a process, not at every client it builds
                _WARNED_UNKNOWN.add(m.group(1))
                log.warning("litemq: client setting %r is unknown to librdkafka; ignored", m.group(1))
            del cfg[m.group(1)]
    raise ValueError("too many unknown client settings")
