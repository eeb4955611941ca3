"""Storage identity (issue 20): every data dir has Kafka's ``meta.properties`` (version 1,
cluster.id, node.id, directory.id), written atomically at the first start; a data dir naming
another node id or another cluster is refused at start with one line and exit status 1; a data
dir of an older LiteMQ without the file gets one (logged once). Real ``litemq serve`` processes
on real directories."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from litemq.testing.cluster import LocalCluster, cluster_args, wait_for
from litemq.testing.process import HOST, BrokerProcess, free_port

pytestmark = pytest.mark.timeout(240)

KAFKA_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def _props(data) -> dict[str, str]:
    lines = (data / "meta.properties").read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")  # Java Properties.store's header
    return dict(line.split("=", 1) for line in lines[2:])


def _serve(data, *args: str) -> subprocess.CompletedProcess:
    """``litemq serve`` expected to exit (refused)."""
    return subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(data),
                           "--listen", f"{HOST}:{free_port()}", "-o", "http.listen=off", *args],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


def _refused(r: subprocess.CompletedProcess, message: str) -> None:
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith("20")]
    assert lines == [f"error: cannot start broker: {message}"], r.stderr


def _cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    return admin.describe_cluster().result(10).cluster_id


def test_single_broker_identity(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with BrokerProcess(a) as broker:
        cluster_a = _cluster_id(broker.bootstrap_servers)
    props = _props(a)
    assert set(props) == {"cluster.id", "directory.id", "node.id", "version"}
    assert props["version"] == "1" and props["node.id"] == "1" and props["cluster.id"] == cluster_a
    assert KAFKA_UUID.match(props["directory.id"]) and not props["directory.id"].startswith("-")
    with BrokerProcess(a) as broker:  # a restart keeps the identity
        assert _cluster_id(broker.bootstrap_servers) == cluster_a
    assert _props(a) == props

    # another node id on the same data dir: refused (Kafka's KafkaRaftServer message)
    _refused(_serve(a, "--node-id", "2"),
             f"Configured node.id = 2 doesn't match stored node.id 1 in {a}/meta.properties. If you moved your "
             "data, make sure your configured node id matches. If you intend to create a new node, you should "
             "remove all data in your data directories.")

    # a data dir whose meta.properties names another cluster (its identity file from another
    # cluster's disk): refused, nothing changed
    with BrokerProcess(b):
        pass
    cluster_b = _props(b)["cluster.id"]
    assert cluster_b != cluster_a
    shutil.copy(b / "meta.properties", a / "meta.properties")
    before = (a / "__cluster_metadata" / "metadata.json").read_text()
    _refused(_serve(a), f"Invalid cluster.id in: {a}/meta.properties. Expected {cluster_a}, but read {cluster_b}")
    assert (a / "__cluster_metadata" / "metadata.json").read_text() == before


def test_data_dir_without_meta_properties_is_migrated(tmp_path):
    data = tmp_path / "old"
    with BrokerProcess(data) as broker:
        cluster_id = _cluster_id(broker.bootstrap_servers)
    (data / "meta.properties").unlink()  # as an older LiteMQ left it
    broker = BrokerProcess(data, log_path=tmp_path / "migrate.log")
    with broker:
        assert _cluster_id(broker.bootstrap_servers) == cluster_id
    props = _props(data)
    assert props["cluster.id"] == cluster_id and props["node.id"] == "1" and KAFKA_UUID.match(props["directory.id"])
    with broker:  # the next start finds it: no second migration
        pass
    log = (tmp_path / "migrate.log").read_text()
    assert log.count("had no meta.properties (written by an older LiteMQ)") == 1, log
    assert _props(data) == props


def test_cluster_identity_and_a_data_dir_of_another_cluster(tmp_path):
    other = LocalCluster(tmp_path / "other", 1).start()  # cluster Y: one broker, node 1
    try:
        other_id = other.status(1)["cluster_id"]
    finally:
        other.stop()
    with LocalCluster(tmp_path / "x", 3) as cluster:
        statuses = {n: cluster.status(n) for n in cluster.node_ids}
        x_id = statuses[1]["cluster_id"]
        assert x_id and x_id != other_id
        dirs = {}
        for n in cluster.node_ids:
            props = _props(tmp_path / "x" / f"node-{n}")
            assert props["cluster.id"] == x_id and props["node.id"] == str(n) and props["version"] == "1"
            dirs[n] = props["directory.id"]
            assert statuses[n]["directory_id"] == dirs[n]
        assert len(set(dirs.values())) == 3
        # every broker registered its directory id in the metadata image (register_broker)
        wait_for(lambda: {b["node_id"]: b.get("directory_id") for b in cluster.status(2)["brokers"]} == dirs, 15,
                 lambda: f"directory ids in the image: {cluster.status(2)['brokers']}")

        # broker 1 comes back with the data dir of cluster Y (another disk mounted): its
        # metadata voters name cluster X, so it stops with Kafka's message, exit status 1
        cluster.node(1).stop()
        node1 = tmp_path / "x" / "node-1"
        shutil.rmtree(node1)
        shutil.copytree(tmp_path / "other" / "node-1", node1)
        r = _serve(node1, *cluster_args(1, cluster.rpc_ports))
        assert r.returncode == 1, r.stdout + r.stderr
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith(
            f"error: cannot start broker: Invalid cluster.id in: {node1}/meta.properties. Expected {x_id} (the "
            "cluster of metadata voters "), r.stderr
        assert errors[0].endswith(f"but read {other_id}")
        # the other two refused its links and kept their cluster
        for n in (2, 3):
            assert cluster.status(n)["cluster_id"] == x_id
        assert _props(node1)["cluster.id"] == other_id
