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
}
"""Topic configs the broker (not the log) interprets, with their defaults."""

REMOVED_TOPIC_CONFIGS = frozenset({"message.timestamp.difference.max.ms"})
"""Topic configs Kafka 4 removed (``message.timestamp.difference.max.ms``: KIP-937 replaced it with
``message.timestamp.before.max.ms`` and ``.after.max.ms``). A new CreateTopics or AlterConfigs
naming one is refused (INVALID_CONFIG) as Kafka 4 refuses it; a value stored by an earlier
LiteMQ is ignored."""
