"""Client quota enforcement on one broker: rates per user / client id and throttle times
(Kafka ``ClientQuotaManager``, ``ClientRequestQuotaManager``, ``QuotaUtils``; KIP-13, KIP-55,
KIP-124, KIP-219).

The quotas themselves are cluster metadata (:mod:`litemq.security.client_quotas`); each broker
measures and enforces them on its own traffic, as Kafka's brokers do (a quota is per broker).

- **Produce** (``producer_byte_rate``): the size of each Produce request is recorded.
- **Fetch** (``consumer_byte_rate``): the size of each Fetch response is recorded; a Fetch asks
  for at most what the quota lets through in one window (Kafka ``maxValueInQuotaWindow``:
  ``quota x (samples - 1) x window``), and a response that violates the quota is not sent: an
  empty one carrying the throttle time goes instead, and its bytes are taken back off the rate.
- **Requests** (``request_percentage``): the time the event loop spends on each request (its
  handler's synchronous part and the response's encoding) as a percentage of one thread; the
  throttle is at most one window. ApiVersions and the SASL handshake are exempt.
- **Connections** (``connection_creation_rate`` of an IP, KIP-612): a connection that breaks it
  is not served and is closed after the throttle time, and does not count.
- **Controller mutations** (``controller_mutation_rate``, KIP-599): partitions created
  (CreateTopics, CreatePartitions) or deleted (DeleteTopics) come out of a token bucket; while it
  is below zero, the topics of a request at a KIP-599 version are refused with
  THROTTLING_QUOTA_EXCEEDED, older versions are only throttled.

A rate is Kafka's ``Rate`` over a ``SampledStat``: ``CLIENT_QUOTA_WINDOW_SAMPLES`` samples of
``CLIENT_QUOTA_WINDOW_MS``, the total divided by the elapsed window (at least ``samples - 1``
whole windows). A value that takes the rate above the quota gives the throttle time that brings
it back, ``(rate - quota) / quota x window``: it goes into the response's ``throttle_time_ms``
and the connection reads no further request for that long (KIP-219: the client holds off too).

Event-loop thread only; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from litemq import limits
from litemq.security.client_quotas import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaStore,
)

_SAMPLES = limits.CLIENT_QUOTA_WINDOW_SAMPLES
_WINDOW_MS = limits.CLIENT_QUOTA_WINDOW_MS
_PURGE_EVERY_MS = 60_000

REQUEST_QUOTA_EXEMPT_API_KEYS = frozenset({17, 18, 36})
"""SaslHandshake, ApiVersions, SaslAuthenticate: never throttled by ``request_percentage``."""


class SampledRate:
    """Kafka's ``Rate`` of a ``SampledStat`` (see the module docstring). Times in ms."""

    __slots__ = ("starts", "values", "last_ms")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.values: list[float] = []
        self.last_ms = 0.0

    def _purge(self, now_ms: float) -> None:
        expire = now_ms - _SAMPLES * _WINDOW_MS
        while self.starts and self.starts[0] < expire:
            del self.starts[0]
            del self.values[0]

    def record(self, value: float, now_ms: float) -> None:
        """Add ``value`` at ``now_ms`` (a new sample when the current one is a window old)."""
        self._purge(now_ms)
        self.last_ms = now_ms
        if not self.starts or now_ms >= self.starts[-1] + _WINDOW_MS:
            self.starts.append(now_ms)
            self.values.append(0.0)
            if len(self.starts) > _SAMPLES:
                del self.starts[0]
                del self.values[0]
        self.values[-1] += value

    def window_ms(self, now_ms: float) -> float:
        """Kafka ``Rate.windowSize``: time since the oldest sample, at least ``samples - 1``
        whole windows, at least 1 ms."""
        elapsed = now_ms - self.starts[0] if self.starts else 0.0
        full = int(elapsed // _WINDOW_MS)
        if full < _SAMPLES - 1:
            elapsed += (_SAMPLES - 1 - full) * _WINDOW_MS
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Recorded values per second."""
        self._purge(now_ms)
        return sum(self.values) * 1000.0 / self.window_ms(now_ms)


class TokenBucket:
    """KIP-599's bucket of partition mutations: it holds at most ``rate x samples x window``
    credits and refills at ``rate`` per second; taking may leave it below zero."""

    __slots__ = ("rate", "tokens", "last_ms")

    def __init__(self, rate: float, now_ms: float) -> None:
        self.rate = rate
        self.tokens = self._burst(rate)
        self.last_ms = now_ms

    @staticmethod
    def _burst(rate: float) -> float:
        return rate * _SAMPLES * _WINDOW_MS / 1000

    def refill(self, rate: float, now_ms: float) -> None:
        """Add what ``rate`` (the quota now) earned since the last refill, up to the burst."""
        self.rate = rate
        self.tokens = min(self._burst(rate), self.tokens + (now_ms - self.last_ms) * rate / 1000)
        self.last_ms = now_ms


def throttle_time_ms(rate: float, bound: float, window_ms: float) -> int:
    """Kafka ``QuotaUtils.throttleTime``: the delay that brings ``rate`` back to ``bound``
    (0 when within it; ``MAX_CLIENT_QUOTA_THROTTLE_MS`` for a quota of 0)."""
    if rate <= bound:
        return 0
    if bound <= 0:
        return limits.MAX_CLIENT_QUOTA_THROTTLE_MS
    return min(round((rate - bound) / bound * window_ms), limits.MAX_CLIENT_QUOTA_THROTTLE_MS)


class ClientQuotaManager:
    """Rates and throttle times of one broker.

    Args:
        store: returns the cluster's current :class:`ClientQuotaStore` (the metadata changes
            object when a cluster installs a snapshot).
        now_ms: the clock, in ms (the event loop's).

    Attributes:
        throttle_ms_total, throttled: per quota key, the throttle time imposed and how many
            responses carried one (metrics).
    """

    def __init__(self, store: Callable[[], ClientQuotaStore], now_ms: Callable[[], float]) -> None:
        self._store = store
        self._now_ms = now_ms
        self._sensors: dict[tuple[str, str, str], SampledRate] = {}
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._last_purge_ms = 0.0
        self.throttle_ms_total: dict[str, int] = {}
        self.throttled: dict[str, int] = {}

    def record(self, key: str, user: str, client_id: str, value: float) -> int:
        """Record ``value`` against quota ``key`` for (``user``, ``client_id``); the throttle
        time in ms it earns (0: within the quota, or no quota applies)."""
        found = self._store().quota(user, client_id, key)
        if found is None:
            return 0
        bound, tags = found
        ms, _sensor, _now = self._record(key, tags, bound, value)
        if key == REQUEST_PERCENTAGE:
            ms = min(ms, limits.MAX_REQUEST_QUOTA_THROTTLE_MS)
        return ms

    def _record(self, key: str, tags: tuple[str, str], bound: float, value: float
                ) -> tuple[int, SampledRate, float]:
        """Record ``value`` in the rate of (``key``, ``tags``): (the throttle time it earns
        against ``bound``, that rate, the time recorded at)."""
        now = self._now_ms()
        sensor = self._sensor(key, tags, now)
        sensor.record(value, now)
        return throttle_time_ms(sensor.rate(now), bound, sensor.window_ms(now)), sensor, now

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take ``value`` back (a throttled Fetch response that was not sent)."""
        found = self._store().quota(user, client_id, key)
        if found is not None:
            now = self._now_ms()
            self._sensor(key, found[1], now).record(-value, now)

    def max_fetch_bytes(self, user: str, client_id: str) -> int | None:
        """The most a Fetch may return at once under ``consumer_byte_rate`` (Kafka
        ``maxValueInQuotaWindow``), or None when no such quota applies."""
        found = self._store().quota(user, client_id, CONSUMER_BYTE_RATE)
        if found is None:
            return None
        return int(found[0] * (_SAMPLES - 1) * _WINDOW_MS / 1000)

    def record_connection(self, ip: str) -> int:
        """A new connection from ``ip`` (KIP-612 ``connection_creation_rate``): the throttle
        time in ms when it breaks the IP's quota - the connection is then not served, not
        counted, and closed after that time (Kafka ``ConnectionQuotas``) - else 0."""
        bound = self._store().ip_quota(ip)
        if bound is None:
            return 0
        ms, sensor, now = self._record(CONNECTION_CREATION_RATE, (ip, ""), bound, 1.0)
        if ms > 0:
            sensor.record(-1.0, now)
        return ms

    # ------------------------------------------------------------ KIP-599 controller mutations
    def mutations_exhausted(self, user: str, client_id: str) -> bool:
        """True when (``user``, ``client_id``) has used its ``controller_mutation_rate``
        credit (its bucket is below zero): a strict request's next topic is refused with
        THROTTLING_QUOTA_EXCEEDED (Kafka ``StrictControllerMutationQuota``)."""
        bucket = self._bucket(user, client_id)
        return bucket is not None and bucket.tokens < 0

    def record_mutations(self, user: str, client_id: str, partitions: int) -> None:
        """Take ``partitions`` (created or deleted) from the bucket, which may go below zero."""
        bucket = self._bucket(user, client_id)
        if bucket is not None:
            bucket.tokens -= partitions

    def mutation_throttle_ms(self, user: str, client_id: str) -> int:
        """How long until the bucket is back at zero (0 when it is not below)."""
        bucket = self._bucket(user, client_id)
        if bucket is None or bucket.tokens >= 0:
            return 0
        if bucket.rate <= 0:
            return limits.MAX_CLIENT_QUOTA_THROTTLE_MS
        return min(math.ceil(-bucket.tokens / bucket.rate * 1000), limits.MAX_CLIENT_QUOTA_THROTTLE_MS)

    def _bucket(self, user: str, client_id: str) -> TokenBucket | None:
        found = self._store().quota(user, client_id, CONTROLLER_MUTATION_RATE)
        if found is None:
            return None
        bound, tags = found
        now = self._now_ms()
        name = (CONTROLLER_MUTATION_RATE, tags[0], tags[1])
        bucket = self._buckets.get(name)
        if bucket is None:
            if len(self._buckets) >= limits.MAX_CLIENT_QUOTA_SENSORS:
                self._buckets.clear()
            bucket = self._buckets[name] = TokenBucket(bound, now)
        bucket.refill(bound, now)
        return bucket

    def note_throttle(self, key: str, ms: int) -> None:
        """A response carried ``ms`` of throttle for quota ``key`` (metrics)."""
        self.throttle_ms_total[key] = self.throttle_ms_total.get(key, 0) + ms
        self.throttled[key] = self.throttled.get(key, 0) + 1

    def _sensor(self, key: str, tags: tuple[str, str], now_ms: float) -> SampledRate:
        sensors = self._sensors
        name = (key, tags[0], tags[1])
        sensor = sensors.get(name)
        if sensor is None:
            if len(sensors) >= limits.MAX_CLIENT_QUOTA_SENSORS or now_ms - self._last_purge_ms > _PURGE_EVERY_MS:
                self._purge(now_ms)
            sensor = sensors[name] = SampledRate()
        return sensor

    def _purge(self, now_ms: float) -> None:
        """Drop rates idle for ``CLIENT_QUOTA_SENSOR_IDLE_MS``; at the bound, the idlest half."""
        self._last_purge_ms = now_ms
        sensors = self._sensors
        for name in [n for n, s in sensors.items() if now_ms - s.last_ms > limits.CLIENT_QUOTA_SENSOR_IDLE_MS]:
            del sensors[name]
        if len(sensors) >= limits.MAX_CLIENT_QUOTA_SENSORS:
            for name, _ in sorted(sensors.items(), key=lambda kv: kv[1].last_ms)[: len(sensors) // 2]:
                del sensors[name]


__all__ = ["ClientQuotaManager", "SampledRate", "TokenBucket", "throttle_time_ms",
           "REQUEST_QUOTA_EXEMPT_API_KEYS", "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE", "REQUEST_PERCENTAGE",
           "CONTROLLER_MUTATION_RATE", "CONNECTION_CREATION_RATE"]
