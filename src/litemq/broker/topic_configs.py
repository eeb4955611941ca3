"""Topic configs the broker interprets itself (not the partition log), with their defaults.

A module of its own, below ``broker.py`` and the handlers, so both use it without importing
each other.
"""

BROKER_TOPIC_CONFIGS = {
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "unclean.leader.election.enable": "false",
    "message.timestamp.difference.max.ms": str(2**63 - 1),
    # replication throttles (Kafka LogConfig; applied by litemq.cluster.throttle)
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
}
"""Topic configs the broker (not the log) interprets, with their defaults."""
