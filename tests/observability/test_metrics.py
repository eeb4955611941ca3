"""``/metrics`` of a real broker after produce, consume and consumer group activity.

Kafka's metric names as the Prometheus JMX exporter renders them (bytes/messages per topic,
requests and latency quantiles per API, replica manager and controller gauges, log flush
times), kafka-exporter's consumer group lag, LiteMQ's own series; one registry per broker
runtime; the HTTP port's settings (``--http-listen``, a taken address).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import litemq
from litemq.config import DEFAULT_HTTP_LISTEN, DEFAULT_HTTP_PORT
from litemq.testing.cluster import free_base_port, wait_for
from litemq.testing.process import BrokerProcess, free_port
from tests.observability.helpers import http, scrape

TOPIC = "metrics-t"
GROUP = "metrics-g"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(15)


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, key=b"k%d" % i, value=b"value-%06d" % i, partition=part)
    assert p.flush(15) == 0


def test_metrics_after_produce_consume_and_group_activity(tmp_path):
    with BrokerProcess(tmp_path / "data", http_port=0) as broker:
        base = broker.http_url
        _create(broker.bootstrap_servers, TOPIC, 2)
        _produce(broker.bootstrap_servers, TOPIC, 50, 2)
        first = scrape(base)
        assert first.get1("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 100
        bytes_in = first.get1("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
        assert bytes_in > 100 * len(b"value-000000")

        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([TOPIC])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen += 1
        assert seen == 100
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 50), TopicPartition(TOPIC, 1, 10)], asynchronous=False)
        _produce(broker.bootstrap_servers, TOPIC, 5, 2)  # counters move; lag grows by 5 per partition

        m = scrape(base)
        # traffic per topic (kafka.server:type=BrokerTopicMetrics)
        assert m.get1("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 110
        assert m.get1("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) > bytes_in
        assert m.get1("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= 100 * len(b"value-000000")
        # requests per API and version, latency quantiles per API (kafka.network:type=RequestMetrics)
        for api in ("Produce", "FetchConsumer", "Metadata", "ApiVersions", "JoinGroup", "SyncGroup", "OffsetCommit",
                    "FindCoordinator"):
            assert m.total("kafka_network_requestmetrics_requests_total", request=api) > 0, api
        produce_count = m.total("kafka_network_requestmetrics_requests_total", request="Produce")
        p50 = m.get1("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.50")
        p99 = m.get1("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
        assert p50 is not None and p99 is not None and 0 < p50 <= p99
        assert m.get1("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_count
        assert m.get1("litemq_request_duration_seconds_bucket", request="Produce", le="+Inf") == produce_count
        assert m.get1("kafka_network_requestmetrics_totaltimems", request="FetchConsumer", quantile="0.99") >= 0
        # log flush (kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs)
        assert m.get1("kafka_log_logflushstats_logflushrateandtimems_count") > 0
        assert m.get1("kafka_log_logflushstats_logflushrateandtimems", quantile="0.99") > 0
        # the broker's fsync thread: every flush is one of its jobs, each timed in three parts
        jobs = m.get1("litemq_sync_jobs_total")
        assert jobs >= m.get1("kafka_log_logflushstats_logflushrateandtimems_count")
        assert 1 <= m.get1("litemq_sync_batches_total") <= jobs
        for part in ("wait", "run", "hand_back"):
            assert m.get1(f"litemq_sync_{part}_seconds_total") > 0, part
        # replica manager and controller gauges of a single broker
        parts = m.get1("kafka_server_replicamanager_partitioncount")
        assert parts >= 2 and m.get1("kafka_server_replicamanager_leadercount") == parts
        assert m.get1("kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert m.get1("kafka_server_replicamanager_isrshrinks_total") == 0
        assert m.get1("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert m.get1("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert m.get1("kafka_log_log_logendoffset", topic=TOPIC, partition=1) == 55
        assert m.get1("kafka_log_log_size", topic=TOPIC, partition=0) > 0
        # consumer group lag (kafka-exporter names): partition 0 at 55 committed 50, partition 1 committed 10
        assert m.get1("kafka_consumergroup_current_offset", consumergroup=GROUP, topic=TOPIC, partition=1) == 10
        assert m.get1("kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition=0) == 5
        assert m.get1("kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition=1) == 45
        assert m.get1("kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == 50
        assert m.get1("kafka_consumergroup_members", consumergroup=GROUP) == 1
        assert m.get1("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
        assert m.get1("process_resident_memory_bytes") > 0

        consumer.commit(offsets=[TopicPartition(TOPIC, 1, 55)], asynchronous=False)
        consumer.close()
        after = scrape(base)
        assert after.get1("kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition=1) == 0
        assert after.get1("litemq_http_requests_total", method="GET", path="/metrics", code=200) >= 2


def test_embedded_brokers_keep_their_own_registries():
    """Two brokers in one process: each /metrics shows only its own topics and requests."""
    with litemq.Broker(http_port=0) as a, litemq.Broker(http_port=0) as b:
        assert a.runtime.metrics.registry is not b.runtime.metrics.registry
        _produce(a.bootstrap_servers, "only-on-a", 3, 1)
        _produce(b.bootstrap_servers, "only-on-b", 7, 1)
        ma, mb = scrape(a.http_url), scrape(b.http_url)
        assert ma.get1("kafka_server_brokertopicmetrics_messagesin_total", topic="only-on-a") == 3
        assert ma.get1("kafka_server_brokertopicmetrics_messagesin_total", topic="only-on-b") is None
        assert mb.get1("kafka_server_brokertopicmetrics_messagesin_total", topic="only-on-b") == 7
        assert mb.get1("kafka_server_brokertopicmetrics_messagesin_total", topic="only-on-a") is None


def test_http_listen_flag_and_a_taken_address(tmp_path):
    """``litemq serve --http-listen HOST:PORT`` serves there; an explicitly set address that is
    taken stops the start with one line naming http.listen."""
    port = free_port()
    with BrokerProcess(tmp_path / "a", extra_args=["--http-listen", f"127.0.0.1:{port}"]) as broker:
        # BrokerProcess returns once the Kafka listener accepts; the HTTP port is bound just after
        # it (the "listening" log line follows both), so give it a moment on a busy machine.
        wait_for(lambda: _accepts(port), 10, f"nothing listening on the HTTP port {port}")
        status, _, body = http("GET", f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and b"kafka_controller_kafkacontroller_activecontrollercount" in body
        status, headers, _ = http("GET", f"http://127.0.0.1:{port}/")
        assert status == 200 and headers["Content-Type"].startswith("text/html")  # redirected to /console/
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            res = subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "b"),
                                  "--listen", f"127.0.0.1:{free_port()}", "--http-listen", f"127.0.0.1:{busy}"],
                                 capture_output=True, text=True, timeout=60)
        assert res.returncode != 0
        errors = [line for line in res.stderr.splitlines() if "http.listen" in line]
        assert errors and f"127.0.0.1:{busy}" in errors[0], res.stderr[-2000:]
        assert "Traceback" not in res.stderr
        wait_for(broker.alive, 1, "the first broker keeps running")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_a_taken_default_http_port_only_logs_a_warning(tmp_path):
    """``litemq serve`` binds 127.0.0.1:8082 by default; when that is taken (another broker on the
    machine, a REST proxy) the broker starts without its HTTP port and says so in one line."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", DEFAULT_HTTP_PORT))
        holder.listen()
    except OSError:
        pass  # something else holds it already: taken either way
    try:
        with BrokerProcess(tmp_path / "data", overrides={"http.listen": DEFAULT_HTTP_LISTEN}) as broker:
            produced = Producer({"bootstrap.servers": broker.bootstrap_servers})
            produced.produce("still-serving", b"x")
            assert produced.flush(15) == 0
            log = wait_for(lambda: "HTTP port off" in broker.log_path.read_text() and broker.log_path.read_text(),
                           10, "no warning about the taken default HTTP port")
            warning = next(line for line in log.splitlines() if "HTTP port off" in line)
            assert DEFAULT_HTTP_LISTEN in warning and "http.listen" in warning
    finally:
        holder.close()


def test_cluster_start_gives_each_node_an_http_port(tmp_path):
    """``litemq cluster start --http-base-port B``: node i serves /metrics on B+i-1."""
    base = free_base_port(2)
    http_base = free_base_port(2)
    data = str(tmp_path / "cluster")

    def litemq_cli(*args):
        return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, timeout=90)

    r = litemq_cli("cluster", "start", "-n", "2", "--base-port", str(base), "--http-base-port", str(http_base),
                   "--data-dir", data, "--timeout", "30")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"http://127.0.0.1:{http_base}/console/" in r.stdout
        for node in (1, 2):
            info = scrape(f"http://127.0.0.1:{http_base + node - 1}").matching("litemq_broker_info")
            assert [dict(labels)["node_id"] for labels in info] == [str(node)]
    finally:
        litemq_cli("cluster", "stop", "--data-dir", data)
