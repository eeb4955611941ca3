"""``litemq consume -g`` and ``litemq group ...`` as processes, plus assign-mode commits and
static membership with real clients."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest

from groups_helpers import (admin, child_env, committed_offsets, create_topic, end_offsets, wait_until)

pytestmark = pytest.mark.timeout(90)


def cli(bs: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "litemq.cli", *args, "-b", bs], capture_output=True, text=True,
                       env=child_env(), timeout=60)
    if check:
        assert r.returncode == 0, r.stderr + r.stdout
    return r


def produce(bs: str, topic: str, values: list[str], partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


def describe(bs: str, group: str):
    a = admin(bs)
    return a.describe_consumer_groups([group])[group].result(timeout=30)


def test_cli_consume_with_group_twice_splits_partitions(shared_broker, tmp_path):
    bs = shared_broker.bootstrap_servers
    create_topic(bs, "cli-split", 4)
    outs = [open(tmp_path / f"c{i}.out", "wb") for i in range(2)]
    # Ctrl-C reaches a foreground process; a runner started in the background without job
    # control (`cmd &` in a script) ignores SIGINT and its children would inherit that.
    procs = [subprocess.Popen([sys.executable, "-m", "litemq.cli", "consume", "cli-split", "-g", "cli-g",
                               "--from-beginning", "-b", bs], stdout=outs[i], stderr=subprocess.DEVNULL,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
             for i in range(2)]
    try:
        def split():
            d = describe(bs, "cli-g")
            counts = sorted(len(m.assignment.topic_partitions) for m in d.members)
            return d.state.name == "STABLE" and counts == [2, 2]

        wait_until(split, 45, "two `litemq consume -g` processes sharing 4 partitions")
        values = [f"v{i}" for i in range(200)]
        produce(bs, "cli-split", values, 4)

        def lines():
            return [(tmp_path / f"c{i}.out").read_text().split() for i in range(2)]

        wait_until(lambda: sorted(lines()[0] + lines()[1]) == sorted(values), 30, "both processes printing")
        a, b = lines()
        assert a and b and not set(a) & set(b)
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)  # clean close: final commit and LeaveGroup
        try:
            for p in procs:
                p.wait(30)
        finally:
            for p in procs:
                if p.poll() is None:  # never leave a consumer behind, even when the test failed
                    p.kill()
                    p.wait()
    assert committed_offsets(bs, "cli-g") == end_offsets(bs, "cli-split", 4)


def test_cli_group_commands(shared_broker):
    bs = shared_broker.bootstrap_servers
    create_topic(bs, "cli-grp", 3)
    produce(bs, "cli-grp", [f"x{i}" for i in range(30)], 3)
    # A consumer that reads 30 records and commits them (auto-commit on close).
    cli(bs, "consume", "cli-grp", "-g", "tool-g", "--from-beginning", "-n", "30")
    assert committed_offsets(bs, "tool-g") == {0: 10, 1: 10, 2: 10}
    assert "tool-g" in cli(bs, "group", "list").stdout
    out = cli(bs, "group", "describe", "tool-g").stdout
    assert "Empty" in out and "cli-grp" in out
    produce(bs, "cli-grp", ["y0", "y1", "y2"], 3)  # lag 1 per partition
    rows = [[c.strip() for c in line.split("│") if c.strip()]
            for line in cli(bs, "group", "describe", "tool-g").stdout.splitlines() if "cli-grp" in line]
    assert [r[:5] for r in rows] == [["cli-grp", str(p), "10", "11", "1"] for p in range(3)], rows
    # reset-offsets: dry run changes nothing; then earliest, a clamped offset, a date.
    out = cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-earliest", "--dry-run").stdout
    assert "dry run" in out and committed_offsets(bs, "tool-g") == {0: 10, 1: 10, 2: 10}
    cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-earliest")
    assert committed_offsets(bs, "tool-g") == {0: 0, 1: 0, 2: 0}
    cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-offset", "5")
    assert committed_offsets(bs, "tool-g") == {0: 5, 1: 5, 2: 5}
    cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-offset", "500")
    assert committed_offsets(bs, "tool-g") == {0: 11, 1: 11, 2: 11}
    cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-datetime", "2000-01-01T00:00:00Z")
    assert committed_offsets(bs, "tool-g") == {0: 0, 1: 0, 2: 0}
    cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", "--to-datetime", "2999-01-01T00:00:00")
    assert committed_offsets(bs, "tool-g") == {0: 11, 1: 11, 2: 11}
    bad = cli(bs, "group", "reset-offsets", "tool-g", "--topic", "cli-grp", check=False)
    assert bad.returncode == 2
    cli(bs, "group", "delete", "tool-g")
    assert "tool-g" not in cli(bs, "group", "list").stdout
    r = cli(bs, "group", "describe", "tool-g", check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = cli(bs, "group", "delete", "tool-g", check=False)
    assert r.returncode == 1 and "error" in r.stderr


def test_cli_refuses_to_reset_an_active_group(shared_broker):
    from confluent_kafka import Consumer

    bs = shared_broker.bootstrap_servers
    create_topic(bs, "cli-active", 1)
    c = Consumer({"bootstrap.servers": bs, "group.id": "active-g", "session.timeout.ms": 6000})
    c.subscribe(["cli-active"])
    try:
        wait_until(lambda: c.poll(0.2) is None and c.assignment(), 30, "an assignment")
        r = cli(bs, "group", "reset-offsets", "active-g", "--topic", "cli-active", "--to-earliest", check=False)
        assert r.returncode == 1 and "active member" in r.stderr
        r = cli(bs, "group", "delete", "active-g", check=False)
        assert r.returncode == 1
        out = cli(bs, "group", "describe", "active-g").stdout
        assert "Stable" in out and "rdkafka" in out
    finally:
        c.close()


def test_assign_mode_commits_without_membership(shared_broker):
    """assign() + seek + commit (generation -1, empty member id) with confluent-kafka and kafka-python."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    bs = shared_broker.bootstrap_servers
    create_topic(bs, "manual", 2)
    produce(bs, "manual", [f"m{i}" for i in range(20)], 2)
    c = Consumer({"bootstrap.servers": bs, "group.id": "manual-g", "enable.auto.commit": False})
    c.assign([TopicPartition("manual", 0, 3), TopicPartition("manual", 1, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 17 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
    assert len(got) == 17 and (0, 3) in got and (0, 2) not in got
    c.commit(offsets=[TopicPartition("manual", 0, 10, "meta"), TopicPartition("manual", 1, 4)], asynchronous=False)
    committed = c.committed([TopicPartition("manual", 0), TopicPartition("manual", 1)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in committed] == [(10, "meta"), (4, None)]
    c.close()
    k = KafkaConsumer(bootstrap_servers=bs, group_id="manual-g", enable_auto_commit=False)
    k.assign([KTP("manual", 1)])
    assert k.committed(KTP("manual", 1)) == 4
    k.commit({KTP("manual", 1): OffsetAndMetadata(7, "", -1)})
    k.close()
    assert committed_offsets(bs, "manual-g") == {0: 10, 1: 7}
    assert describe(bs, "manual-g").state.name == "EMPTY"


def test_static_member_restart_keeps_assignment(shared_broker):
    """KIP-345 with confluent-kafka: a static member that comes back within the session timeout
    gets its partitions again without a rebalance (same generation)."""
    from confluent_kafka import Consumer

    bs = shared_broker.bootstrap_servers
    create_topic(bs, "static-t", 4)
    conf = {"bootstrap.servers": bs, "group.id": "static-g", "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500}
    consumers = [Consumer({**conf, "group.instance.id": f"inst-{i}"}) for i in range(2)]
    for c in consumers:
        c.subscribe(["static-t"])

    def assigned():
        for c in consumers:
            c.poll(0.1)
        return all(len(c.assignment()) == 2 for c in consumers)

    wait_until(assigned, 30, "2 static members with 2 partitions each")
    before = {m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
              for m in describe(bs, "static-g").members}
    gen_before = shared_broker_generation(bs, "static-g")
    consumers[0].close()  # static members do not send LeaveGroup on close
    consumers[0] = Consumer({**conf, "group.instance.id": "inst-0"})
    consumers[0].subscribe(["static-t"])
    wait_until(assigned, 30, "the static member's partitions back")
    after = {m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
             for m in describe(bs, "static-g").members}
    assert after == before
    assert shared_broker_generation(bs, "static-g") == gen_before
    for c in consumers:
        c.close()


def shared_broker_generation(bs: str, group: str) -> int:
    """The group's current generation (DescribeGroups does not carry it): the one a member's
    Heartbeat accepts."""
    from litemq.testing.wire import WireClient

    host, port = bs.split(":")
    with WireClient(host, int(port)) as w:
        d = w.request(15, 5, {"groups": [group]}).groups[0]
        member = d.members[0]
        for gen in range(1, 50):
            err = w.request(12, 3, {"group_id": group, "generation_id": gen, "member_id": member.member_id,
                                    "group_instance_id": member.group_instance_id}).error_code
            if err == 0:
                return gen
    raise AssertionError("no generation accepted")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_balanced_consumer_commits(shared_broker):
    """kcat -G (librdkafka's balanced consumer, an older librdkafka) joins, consumes, commits."""
    bs = shared_broker.bootstrap_servers
    create_topic(bs, "kcat-t", 2)
    produce(bs, "kcat-t", [str(i) for i in range(20)], 2)
    r = subprocess.run(["kcat", "-b", bs, "-G", "kcat-g", "-o", "beginning", "-e", "-q", "kcat-t"],
                       capture_output=True, text=True, timeout=60)
    assert sorted(r.stdout.split(), key=int) == [str(i) for i in range(20)], r.stderr
    assert committed_offsets(bs, "kcat-g") == {0: 10, 1: 10}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cli_describe_with_a_dead_partition_leader(tmp_path):
    """``group describe`` while a partition's only replica is down: its log end offset and lag
    show as unknown ("-", never confluent-kafka's OFFSET_INVALID -1001), and the command answers
    within its bounded ListOffsets request timeout instead of librdkafka's default minute."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from litemq.cli.client_commands import CLIENT_TIMEOUT_S
    from litemq.coordinator.records import partition_for
    from litemq.testing.cluster import LocalCluster

    overrides = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
    with LocalCluster(tmp_path, 3, overrides) as cluster:
        bs = cluster.bootstrap_servers
        a = AdminClient({"bootstrap.servers": bs})
        a.create_topics([NewTopic("dead-leader", 3, 1)], operation_timeout=30)["dead-leader"].result(timeout=60)
        cluster.wait_leaders("dead-leader", 3)
        dead = cluster.leader_of("dead-leader", 0)
        down = {p for p in range(3) if cluster.leader_of("dead-leader", p) == dead}  # 0, maybe others
        a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("probe")])["probe"].result(timeout=30)
        cluster.wait_leaders("__consumer_offsets", 8)
        group = next(g for g in (f"dl-{i}" for i in range(1000))  # coordinated by a broker that stays up
                     if cluster.leader_of("__consumer_offsets", partition_for(g, 8)) != dead)
        produce(bs, "dead-leader", [f"v{i}" for i in range(6)], 3)  # 2 records per partition
        a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition("dead-leader", p, 1) for p in range(3)])])[group].result(timeout=30)
        cluster.kill(dead)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "litemq.cli", "group", "describe", group, "-b", bs],
                           capture_output=True, text=True, env=child_env(), timeout=45)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr + r.stdout
        rows = [[c.strip() for c in line.split("│") if c.strip()] for line in r.stdout.splitlines()
                if "dead-leader" in line]
        assert [row[:5] for row in rows] == [["dead-leader", str(p), "1", "-", "-"] if p in down
                                             else ["dead-leader", str(p), "1", "2", "1"] for p in range(3)], r.stdout
        assert "-1001" not in r.stdout
        assert took < CLIENT_TIMEOUT_S * 2, f"describe took {took:.1f}s"


class _ListOffsetsAnswers:
    """Stands in for confluent-kafka's AdminClient in ``list_offsets`` only: each partition's
    future resolves as librdkafka resolved it (an offset, OFFSET_INVALID after a failed request,
    or an exception); the request timeout asked for is kept."""

    def __init__(self, answers: dict[int, object]):
        self.answers = answers
        self.request_timeout = None

    def list_offsets(self, specs, request_timeout=None):
        from concurrent.futures import Future
        from types import SimpleNamespace

        self.request_timeout = request_timeout
        out = {}
        for tp in specs:
            f = Future()
            answer = self.answers[tp.partition]
            if isinstance(answer, Exception):
                f.set_exception(answer)
            else:
                f.set_result(SimpleNamespace(offset=answer, timestamp=-1, leader_epoch=None))
            out[tp] = f
        return out


def test_list_offsets_treats_offset_invalid_as_unreadable():
    """``_list_offsets`` (behind ``group describe``, ``share-group describe`` and
    ``reset-offsets``): OFFSET_INVALID (-1001) is no log end offset - left out (shown "-") when
    unreadable partitions are skipped, a CliError otherwise (a reset never commits it); a
    timestamp's -1 (no record at or after it) is kept; requests get the CLI's bounded timeout."""
    from confluent_kafka import KafkaException, OFFSET_INVALID
    from confluent_kafka.admin import OffsetSpec

    from litemq.cli.client_commands import CLIENT_TIMEOUT_S
    from litemq.cli.common import CliError
    from litemq.cli.group_commands import _list_offsets

    parts = [("t", 0), ("t", 1), ("t", 2)]
    admin = _ListOffsetsAnswers({0: OFFSET_INVALID, 1: 42, 2: KafkaException("leader not available")})
    assert _list_offsets(admin, parts, OffsetSpec.latest(), skip_unreadable=True) == {("t", 1): 42}
    assert admin.request_timeout == CLIENT_TIMEOUT_S
    with pytest.raises(CliError, match=r"t-0: no valid offset \(-1001\)"):
        _list_offsets(_ListOffsetsAnswers({0: OFFSET_INVALID, 1: 42, 2: 7}), parts, OffsetSpec.earliest())
    by_time = _ListOffsetsAnswers({0: -1, 1: 42, 2: OFFSET_INVALID})
    assert _list_offsets(by_time, parts, OffsetSpec.for_timestamp(0), skip_unreadable=True) == {
        ("t", 0): -1, ("t", 1): 42}
