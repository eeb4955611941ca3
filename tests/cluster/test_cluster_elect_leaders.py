"""ElectLeaders (KIP-460, API 43), part of issue 20, on 3 real brokers and on one.

With the automatic preferred-leader hand-back off (``auto.leader.rebalance.enable=false``), a
partition whose preferred replica was SIGKILLed and restarted stays led by another replica;
``AdminClient.elect_leaders(PREFERRED)`` - sent to any broker, forwarded to the partition's
leader - hands leadership back by Raft leadership transfer, and answers once the preferred
replica leads. A second call answers ELECTION_NOT_NEEDED; an UNCLEAN election is never needed
while a leader exists (Raft elects only replicas with every committed record); a single broker
answers ELECTION_NOT_NEEDED for every partition; a caller without ALTER on the cluster is
refused (the ACL matrix in tests/security covers that).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for

pytestmark = pytest.mark.timeout(300)

OFFSETS = "__consumer_offsets"


def _elect(admin: AdminClient, election: ElectionType, tps) -> dict:
    res = admin.elect_leaders(election, tps).result(60)  # confluent-kafka 2.16 refuses its timeout kwargs here
    return {(tp.topic, tp.partition): (None if err is None else _code(err)) for tp, err in res.items()}


def _code(err) -> int:
    """A result's error code (a KafkaError, or a KafkaException holding one)."""
    return err.code() if hasattr(err, "code") else err.args[0].code()


def test_preferred_election_moves_leadership_back(tmp_path):
    topic = "elect"
    with LocalCluster(tmp_path, 3, {"auto.leader.rebalance.enable": "false"}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=15)[topic].result(30)
        cluster.wait_leaders(topic, 3)
        preferred = cluster.leaders()[(topic, 0)]["replicas"][0]
        wait_for(lambda: cluster.leader_of(topic, 0) == preferred, 20, "the preferred replica leads at first")
        # a committed offset creates __consumer_offsets (8 partitions, 3 replicas)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "elect-g"})
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        finally:
            consumer.close()
        cluster.wait_leaders(OFFSETS, 8)
        wait_for(lambda: any(e["leader_id"] == preferred for tp, e in cluster.leaders().items() if tp[0] == OFFSETS),
                 20, "the broker to kill leads no __consumer_offsets partition")
        cluster.kill(preferred)
        cluster.wait_leaders(topic, 3, exclude={preferred})
        cluster.wait_leaders(OFFSETS, 8, exclude={preferred})
        cluster.restart(preferred)
        other = cluster.leader_of(topic, 0)
        assert other != preferred
        # sent through a broker that is neither the leader nor the preferred replica when there is one
        via = next((n for n in cluster.node_ids if n not in (preferred, other)), other)
        via_admin = AdminClient({"bootstrap.servers": cluster.node(via).bootstrap_servers})

        def elect_back() -> bool:
            # Until the leader sees the restarted broker live and connected, the answer is
            # PREFERRED_LEADER_NOT_AVAILABLE (Kafka's too while the preferred replica is out of
            # the ISR); nothing else may come back.
            result = _elect(via_admin, ElectionType.PREFERRED, [TopicPartition(topic, 0)])
            assert result[(topic, 0)] in (None, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE), result
            return result[(topic, 0)] is None
        wait_for(elect_back, 30, "the preferred election never succeeded")
        assert cluster.leader_of(topic, 0) == preferred
        assert _elect(admin, ElectionType.PREFERRED, [TopicPartition(topic, 0)]) == \
            {(topic, 0): KafkaError.ELECTION_NOT_NEEDED}
        assert _elect(admin, ElectionType.UNCLEAN, [TopicPartition(topic, 1)]) == \
            {(topic, 1): KafkaError.ELECTION_NOT_NEEDED}
        # every partition of every topic at once, __consumer_offsets included (the partitions the
        # killed broker led stay led by others): each ends led by its preferred replica, and the
        # answer leaves out those that needed no election, as Kafka's does
        def moved() -> set:
            leaders = cluster.leaders()
            return {tp for tp, e in leaders.items() if tp[0] in (topic, OFFSETS) and e["leader_id"] != e["replicas"][0]}
        assert {tp for tp in moved() if tp[0] == OFFSETS}, "the kill moved no __consumer_offsets leader"

        def elect_all() -> bool:
            result = _elect(admin, ElectionType.PREFERRED, None)
            assert KafkaError.ELECTION_NOT_NEEDED not in result.values(), result
            assert all(code in (None, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE) for code in result.values()), result
            return not moved()
        wait_for(elect_all, 30, lambda: f"still not led by their preferred replicas: {sorted(moved())}")
        assert _elect(admin, ElectionType.PREFERRED, None) == {}
        assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("no-such-topic", 0)]) == \
            {("no-such-topic", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_single_broker_never_needs_an_election(litemq_broker):
    admin = AdminClient({"bootstrap.servers": litemq_broker.bootstrap_servers})
    admin.create_topics([NewTopic("one", 2, 1)])["one"].result(30)
    assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("one", 0), TopicPartition("one", 1)]) == \
        {("one", 0): KafkaError.ELECTION_NOT_NEEDED, ("one", 1): KafkaError.ELECTION_NOT_NEEDED}
