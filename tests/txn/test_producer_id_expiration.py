"""producer.id.expiration.ms (Kafka ``ProducerStateManager.removeExpiredProducers``): the state of
an idempotent producer idle that long is forgotten, so short-lived producers do not pile up in
memory and in every producer snapshot; a producer with a transaction ongoing is kept; a forgotten
producer that writes again is accepted (KIP-360) and is idempotent again from there."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.txn.txn_helpers import create_topics, read_all


def _producers(port: int, topic: str) -> list[int]:
    with WireClient("127.0.0.1", port) as w:
        r = w.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    return sorted(s.producer_id for s in r.topics[0].partitions[0].active_producers)


def test_idle_producers_are_forgotten_and_a_transaction_keeps_its_producer(tmp_path):
    overrides = {"producer.id.expiration.ms": "3000", "producer.id.expiration.check.interval.ms": "500"}
    with BrokerProcess(tmp_path / "data", overrides=overrides) as broker:
        bs, topic = broker.bootstrap_servers, "expiring"
        create_topics(bs, [topic], partitions=1)
        for i in range(4):  # short-lived idempotent producers, one record each
            p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "log_level": 3})
            p.produce(topic, value=b"short-%d" % i, partition=0)
            assert p.flush(30) == 0
        tx = Producer({"bootstrap.servers": bs, "transactional.id": "keeps-its-state", "log_level": 3})
        tx.init_transactions(30)
        tx.begin_transaction()
        tx.produce(topic, value=b"open", partition=0)
        tx.flush(30)
        assert len(_producers(broker.port, topic)) == 5
        deadline = time.monotonic() + 15
        while len(_producers(broker.port, topic)) > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(_producers(broker.port, topic)) == 1  # only the producer with a transaction ongoing
        tx.commit_transaction(30)
        again = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "log_level": 3})
        for i in range(3):
            again.produce(topic, value=b"again-%d" % i, partition=0)
        assert again.flush(30) == 0
        values = [m.value() for m in read_all(bs, topic, 1, expect=8, idle_s=1)]
        assert values == [b"short-0", b"short-1", b"short-2", b"short-3", b"open", b"again-0", b"again-1", b"again-2"]
        assert "expired producer ids (producer.id.expiration.ms)" in broker.log_path.read_text()
