"""Topic configs the broker interprets itself (not the partition log), with their defaults.

A module of its own, below ``broker.py`` and the handlers, so both use it without importing
each other.
"""

BROKER_TOPIC_CONFIGS = {
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "unclean.leader.election.enable": "false",
    # replication throttles (Kafka LogConfig; applied by litemq.cluster.throttle)
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    # KIP-390: the level the broker recompresses with when compression.type names a codec
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    # KIP-405 tiered storage, which LiteMQ does not have (as a Kafka broker with
    # remote.log.storage.system.enable=false): accepted with their defaults, see check_topic_config
    "remote.storage.enable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
}
"""Topic configs the broker (not the log) interprets, with their defaults."""

COMPRESSION_LEVEL_CONFIGS = {"gzip": "compression.gzip.level", "lz4": "compression.lz4.level",
                             "zstd": "compression.zstd.level"}
"""``compression.type`` -> the topic config of its level (KIP-390)."""

_LEVEL_BOUNDS = {"compression.gzip.level": (1, 9), "compression.lz4.level": (1, 17),
                 "compression.zstd.level": (-131072, 22)}
_BOOLEANS = ("remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable")


def check_topic_config(name: str, value: str) -> str | None:
    """The reason a value of one of the compression-level or tiered-storage configs above is
    refused (Kafka 4's ``LogConfig`` validators and messages), or None if it is accepted (also for
    every other name).

    - ``compression.gzip.level``: 1..9, or -1 (zlib's default); ``compression.lz4.level``
      1..17; ``compression.zstd.level`` -131072..22 (Kafka ``CompressionType`` level validators).
    - ``remote.storage.enable=true``: refused as by a Kafka broker without tiered storage; the
      other two booleans take true or false; ``local.retention.*``: an integer >= -2.
    """
    text = value.strip()
    if name in _LEVEL_BOUNDS:
        lo, hi = _LEVEL_BOUNDS[name]
        try:
            level = int(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if not (lo <= level <= hi or (name == "compression.gzip.level" and level == -1)):
            allowed = "[1,...,9] or -1" if name == "compression.gzip.level" else f"[{lo},...,{hi}]"
            return f"Invalid value {value} for configuration {name}: Value must be one of {allowed}"
    elif name in _BOOLEANS:
        if text.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
        if name == "remote.storage.enable" and text.lower() == "true":
            return ("Tiered Storage functionality is disabled in the broker. "
                    "Topic cannot be configured with remote log storage.")
    elif name in ("local.retention.ms", "local.retention.bytes"):
        try:
            ok = int(text) >= -2
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type LONG"
        if not ok:
            return f"Invalid value {value} for configuration {name}: Value must be at least -2"
    return None

REMOVED_TOPIC_CONFIGS = frozenset({"message.timestamp.difference.max.ms"})
"""Topic configs Kafka 4 removed (``message.timestamp.difference.max.ms``: KIP-937 replaced it with
``message.timestamp.before.max.ms`` and ``.after.max.ms``). A new CreateTopics or AlterConfigs
naming one is refused (INVALID_CONFIG) as Kafka 4 refuses it; a value stored by an earlier
LiteMQ is ignored."""
