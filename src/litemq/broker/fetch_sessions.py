"""Incremental fetch sessions (KIP-227): a broker's session cache and one Fetch's context.

Source: KIP-227 and FetchRequest/FetchResponse v7+ (``SessionId``, ``SessionEpoch``,
``ForgottenTopicsData``; topic ids from v13, KIP-516), with the semantics of Kafka 4's
``kafka.server.FetchManager``, ``FetchSession``, ``FetchSessionCache`` and
``org.apache.kafka.server.CachedPartition``:

- ``SessionId`` 0, ``SessionEpoch`` -1 (or a Fetch before v7): a *sessionless* full fetch.
- ``SessionEpoch`` 0: a full fetch that asks for a new session. Any session the request names
  is closed first; the answer carries the new session's id, or 0 when the cache has no slot.
- ``SessionId`` S, ``SessionEpoch`` -1: close S, then a sessionless full fetch.
- ``SessionId`` S, ``SessionEpoch`` N > 0: an *incremental* fetch. The request carries only the
  partitions added or changed since the last one and the forgotten ones; the broker reads every
  partition of the session and answers only those with records, a new high watermark or log
  start offset, an error, a preferred read replica. Errors: FETCH_SESSION_ID_NOT_FOUND (70)
  for an unknown S, INVALID_FETCH_SESSION_EPOCH (71) when N is not the epoch the session
  expects next, FETCH_SESSION_TOPIC_ID_ERROR (106) when a session of topic names is used with
  topic ids (v13+) or the reverse. A session left with no partition is closed.

Partitions that returned records move to the end of their session, so that a response's byte
budget is shared fairly over successive fetches (Kafka's ``PartitionIterator``).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's
default 1000). A new session takes a free slot, else the slot of the session unused for the
longest if that is older than ``limits.FETCH_SESSION_EVICTION_MS``, else that of the smallest
session created more than that long ago, if it is not larger than the new one (a follower's
session, ``ReplicaId`` >= 0, may also take a consumer's at any age): Kafka's eviction rule. The
partitions of all sessions together are bounded too (``limits.FETCH_SESSION_CACHE_MAX_PARTITIONS``).

No asyncio here: the Fetch handler calls in on the broker's event-loop thread.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from litemq import limits
from litemq.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
"""A response's session id when no session exists (KIP-227)."""
INITIAL_EPOCH = 0
"""A request's epoch asking for a new session."""
FINAL_EPOCH = -1
"""A request's epoch closing its session (and, with session id 0, a sessionless fetch)."""
_MAX_EPOCH = 2**31 - 1
QUIET: dict = {}
"""The response partition of a session partition the read skipped: unchanged since it last had
nothing to read or tell (an incremental answer leaves it out)."""


def next_epoch(epoch: int) -> int:
    """The epoch a session expects after ``epoch``: 1 after the largest int32 (Kafka's
    ``FetchMetadata.nextEpoch``)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class CachedPartition:
    """One partition of a session: what the consumer last asked (``fetch_offset``,
    ``partition_max_bytes``, ``current_leader_epoch``, ``last_fetched_epoch``, ``log_start_offset``:
    the attributes of a FetchRequest ``FetchPartition``, so the read path takes either) and what
    it was last told (``high_watermark``, ``sent_log_start_offset``; -1 = unknown, resend).
    ``quiet``: the replica's state when a read last found nothing to read in it and nothing the
    consumer did not know (set by the Fetch handler; None = read it)."""

    __slots__ = ("topic", "topic_id", "partition", "fetch_offset", "partition_max_bytes",
                 "current_leader_epoch", "last_fetched_epoch", "log_start_offset",
                 "high_watermark", "sent_log_start_offset", "quiet")

    def __init__(self, topic: str, topic_id: Any, fp: Any) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = fp.partition
        self.high_watermark = -1
        self.sent_log_start_offset = -1
        self.quiet = None
        self.update(fp)

    def update(self, fp: Any) -> None:
        """Take the request parameters of FetchRequest partition ``fp``."""
        self.quiet = None
        self.fetch_offset = fp.fetch_offset
        self.partition_max_bytes = fp.partition_max_bytes
        self.current_leader_epoch = getattr(fp, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(fp, "last_fetched_epoch", -1)
        self.log_start_offset = getattr(fp, "log_start_offset", -1)

    def must_respond(self, out: dict) -> bool:
        """Whether response partition ``out`` (a FetchResponse ``PartitionData`` dict) goes in an
        incremental response; records what the consumer is told (Kafka
        ``CachedPartition.maybeUpdateResponseData``)."""
        respond = bool(out["records"])
        if out["high_watermark"] != self.high_watermark:
            respond = True
            self.high_watermark = out["high_watermark"]
        if out["log_start_offset"] != self.sent_log_start_offset:
            respond = True
            self.sent_log_start_offset = out["log_start_offset"]
        if out.get("preferred_read_replica", -1) != -1:
            respond = True
        if out["error_code"] != ErrorCode.NONE:
            self.high_watermark = -1  # sent again once the error is gone
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    """A session: its partitions in fetch order, keyed by (topic key, partition), the topic key
    being the name (Fetch v7-12) or the topic id (v13+)."""

    id: int
    privileged: bool
    uses_topic_ids: bool
    created_ms: float
    last_used_ms: float
    epoch: int = 1
    partitions: dict[tuple[Any, int], CachedPartition] = field(default_factory=dict)

    def update(self, topics: Iterable[Any], forgotten: Iterable[Any]) -> None:
        """Apply an incremental request: add or update its partitions, then drop the forgotten."""
        uses_ids = self.uses_topic_ids
        parts = self.partitions
        for t in topics:
            key = t.topic_id if uses_ids else t.topic
            for fp in t.partitions:
                cached = parts.get((key, fp.partition))
                if cached is None:
                    parts[(key, fp.partition)] = CachedPartition("" if uses_ids else t.topic,
                                                                  t.topic_id if uses_ids else None, fp)
                else:
                    cached.update(fp)
        for t in forgotten:
            key = t.topic_id if uses_ids else t.topic
            for idx in t.partitions:
                parts.pop((key, idx), None)


@dataclass(eq=False)
class ReadTopic:
    """A topic to read, shaped as a FetchRequest ``FetchTopic`` (``topic``, ``topic_id``,
    ``partitions``)."""

    topic: str
    topic_id: Any
    partitions: list


class FetchContext:
    """What one Fetch reads and how its response is shaped (Kafka's ``FetchContext``).

    ``error`` is set for a request refused at the top level (the response carries it, session
    id 0, no partition); otherwise ``topics`` are the topics to read, each shaped as a
    FetchRequest topic, and :meth:`finish` turns the read partitions into the response's.
    """

    __slots__ = ("cache", "kind", "error", "topics", "session", "privileged", "uses_topic_ids")

    def __init__(self, cache: "FetchSessionCache", kind: str, topics: Sequence[Any] = (),
                 error: int = ErrorCode.NONE, session: FetchSession | None = None,
                 privileged: bool = False, uses_topic_ids: bool = False) -> None:
        self.cache, self.kind, self.topics, self.error = cache, kind, topics, error
        self.session, self.privileged, self.uses_topic_ids = session, privileged, uses_topic_ids

    def finish(self, topics_out: list[dict]) -> tuple[int, list[dict]]:
        """(response session id, response topics) from ``topics_out``, the read of
        :attr:`topics` (one output partition per input partition, in order)."""
        if self.kind == "sessionless":
            return INVALID_SESSION_ID, topics_out
        if self.kind == "full":
            return self.cache.maybe_create(self.topics, topics_out, self.privileged, self.uses_topic_ids), topics_out
        session = self.session
        assert session is not None
        shown = []
        moved = []
        for t, t_out in zip(self.topics, topics_out):
            parts = [out for cached, out in zip(t.partitions, t_out["partitions"])
                     if out is not QUIET and cached.must_respond(out)]
            for cached, out in zip(t.partitions, t_out["partitions"]):
                if out is not QUIET and out["records"]:
                    moved.append(cached)
            if parts:
                shown.append(dict(t_out, partitions=parts))
        if moved:
            key_of = (lambda c: c.topic_id) if session.uses_topic_ids else (lambda c: c.topic)
            for cached in moved:
                k = (key_of(cached), cached.partition)
                if session.partitions.get(k) is cached:
                    del session.partitions[k]
                    session.partitions[k] = cached
        return session.id, shown


class FetchSessionCache:
    """A broker's fetch sessions (Kafka ``FetchSessionCache``): at most ``max_sessions`` (the
    broker setting ``max.incremental.fetch.session.cache.slots``; 0 = none are created).
    ``clock_ms``: the monotonic clock in ms. ``evictions`` counts sessions evicted for a new one."""

    def __init__(self, max_sessions: int, clock_ms: Callable[[], float],
                 eviction_ms: int = limits.FETCH_SESSION_EVICTION_MS) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._clock_ms = clock_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def partitions_cached(self) -> int:
        """Partitions in all sessions (Kafka ``NumIncrementalFetchPartitionsCached``)."""
        return sum(len(s.partitions) for s in self.sessions.values())

    def new_context(self, version: int, req: Any) -> FetchContext:
        """The context of FetchRequest ``req`` of ``version`` (Kafka ``FetchManager.newContext``);
        updates the session an incremental request names and moves it to its next epoch."""
        privileged = _replica_id(req, version) >= 0
        uses_ids = version >= 13
        if version < 7:
            return FetchContext(self, "sessionless", req.topics)
        session_id, epoch = req.session_id, req.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)  # a full request closes the session it names
            kind = "sessionless" if epoch == FINAL_EPOCH else "full"
            return FetchContext(self, kind, req.topics, privileged=privileged, uses_topic_ids=uses_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(self, "error", error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(self, "error", error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return FetchContext(self, "error", error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        size = len(session.partitions)
        session.update(req.topics, req.forgotten_topics_data)
        if len(session.partitions) > size and self.partitions_cached > limits.FETCH_SESSION_CACHE_MAX_PARTITIONS:
            del self.sessions[session_id]
            return FetchContext(self, "error", error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if not session.partitions:
            del self.sessions[session_id]
            return FetchContext(self, "sessionless", ())
        session.last_used_ms = self._clock_ms()
        session.epoch = next_epoch(session.epoch)
        return FetchContext(self, "incremental", _group(session.partitions.values()), session=session)

    def maybe_create(self, topics: Sequence[Any], topics_out: list[dict], privileged: bool,
                     uses_topic_ids: bool) -> int:
        """Open a session for a full fetch of ``topics`` answered with ``topics_out``; its id, or
        :data:`INVALID_SESSION_ID` when no slot is free or can be evicted."""
        now = self._clock_ms()
        size = sum(len(t.partitions) for t in topics)
        if self.partitions_cached + size > limits.FETCH_SESSION_CACHE_MAX_PARTITIONS:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_sessions and not self._evict_for(privileged, size, now):
            return INVALID_SESSION_ID
        session_id = random.randint(1, 2**31 - 1)
        while session_id in self.sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = FetchSession(session_id, privileged, uses_topic_ids, now, now)
        for t, t_out in zip(topics, topics_out):
            for fp, out in zip(t.partitions, t_out["partitions"]):
                cached = CachedPartition(t.topic if not uses_topic_ids else "", t.topic_id if uses_topic_ids else None, fp)
                cached.must_respond(out)  # what the full response told the consumer
                session.partitions[(cached.topic_id if uses_topic_ids else cached.topic, cached.partition)] = cached
        self.sessions[session_id] = session
        return session_id

    def _evict_for(self, privileged: bool, size: int, now: float) -> bool:
        if self.max_sessions <= 0 or not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - stale.last_used_ms > self.eviction_ms:
            victim = stale
        else:
            # evictable: created more than eviction_ms ago, or (by a follower) a consumer's session
            candidates = [s for s in self.sessions.values()
                          if now - s.created_ms > self.eviction_ms or (privileged and not s.privileged)]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.last_used_ms))
            if (privileged, size) < (victim.privileged, len(victim.partitions)):
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True

    def response_dropped(self, session_id: int, topics_out: Iterable[dict]) -> int:
        """A response of session ``session_id`` was replaced by an empty one (a Fetch throttled by a
        client quota): the partitions it held are sent again next time, and a session that response
        would have opened is closed. Returns the session id the empty response carries."""
        session = self.sessions.get(session_id)
        if session is None:
            return INVALID_SESSION_ID
        if session.epoch == 1:  # opened by this very response (an incremental one moves it on)
            del self.sessions[session_id]
            return INVALID_SESSION_ID
        for t in topics_out:
            key = t.get("topic_id") if session.uses_topic_ids else t.get("topic")
            for out in t.get("partitions", ()):
                cached = session.partitions.get((key, out["partition_index"]))
                if cached is not None:
                    cached.high_watermark = -1
                    cached.quiet = None
        return session_id


def _replica_id(req: Any, version: int) -> int:
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return getattr(state, "replica_id", -1) if state is not None else -1
    return getattr(req, "replica_id", -1)


def _group(partitions: Iterable[CachedPartition]) -> list[ReadTopic]:
    """Session partitions in order, as topics of consecutive partitions of one topic."""
    topics: list[ReadTopic] = []
    last = None
    for cached in partitions:
        if last is None or last.topic != cached.topic or last.topic_id != cached.topic_id:
            last = ReadTopic(cached.topic, cached.topic_id, [])
            topics.append(last)
        last.partitions.append(cached)
    return topics
