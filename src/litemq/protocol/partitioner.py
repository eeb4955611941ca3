"""Kafka's default partitioner for keyed records, the one rule every LiteMQ producer follows.

A record with a key goes to ``to_positive(murmur2(key)) % num_partitions``, as the Java
client's ``BuiltInPartitioner.partitionForKey`` (``Utils.toPositive(Utils.murmur2(keyBytes)) %
numPartitions``) and kafka-python's ``DefaultPartitioner`` do. An empty key (``b""``) is a key
and is hashed; only a null key is spread (sticky/random, the client's choice).

LiteMQ's own producers use it two ways, so a key lands on the same partition whichever one sent
it (per-key order holds across them):

- code that picks a partition itself (the REST API) calls :func:`partition_for_key`;
- every confluent-kafka (librdkafka) producer LiteMQ creates (``litemq produce``, ``litemq
  ingest``, the Spark sink, the log pipeline's outputs) starts from :func:`producer_config`,
  which sets librdkafka's ``partitioner=murmur2_random`` (the same hash; librdkafka's default,
  ``consistent_random``, is CRC32 and picks other partitions).

Source: Kafka ``org.apache.kafka.common.utils.Utils.murmur2`` / ``toPositive``,
``org.apache.kafka.clients.producer.internals.BuiltInPartitioner`` (KIP-794); librdkafka
CONFIGURATION.md, ``partitioner``.
"""

from __future__ import annotations

__all__ = ["LIBRDKAFKA_PARTITIONER", "murmur2", "partition_for_key", "producer_config", "to_positive"]

LIBRDKAFKA_PARTITIONER = "murmur2_random"
"""librdkafka's name of the Java-compatible partitioner: murmur2 of a key, random for a null key
(sticky for ``sticky.partitioning.linger.ms``)."""

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (MurmurHash2, seed 0x9747b28c) of ``data`` as a signed int32.

    Example (Kafka's ``UtilsTest``): ``murmur2(b"21") == -973932308``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: ``n & 0x7fffffff`` (not ``abs``: ``MIN_VALUE`` maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition (0 <= p < ``num_partitions``) Kafka's default partitioner gives ``key``.

    Raises ValueError if ``num_partitions`` < 1."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


def producer_config(settings: dict | None = None) -> dict:
    """The librdkafka producer settings every LiteMQ producer starts from
    (``{"partitioner": "murmur2_random"}``), with ``settings`` applied over them (a caller's
    explicit ``partitioner`` wins). Returns a new dict."""
    conf: dict = {"partitioner": LIBRDKAFKA_PARTITIONER}
    conf.update(settings or {})
    return conf
