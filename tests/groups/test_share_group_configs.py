"""Kafka 4.1 group configs of share groups (``kafka-configs --entity-type groups``; here
``litemq config --group G`` and confluent-kafka's AdminClient with GROUP config resources):
``share.auto.offset.reset`` (``earliest``, ``by_duration:PT1H``), ``share.record.lock.duration.ms`` and ``share.heartbeat.interval.ms``
set for one group apply to that group only, bad values are refused with Kafka's messages, and
the overrides survive a broker SIGKILL and restart (they are stored in ``__consumer_offsets``).

Real ``litemq serve`` process, the ``litemq`` CLI, confluent-kafka 2.16 ShareConsumers and raw
ShareGroupHeartbeat/ShareFetch v1 requests.
"""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                  ResourceType)

from groups_helpers import child_env, create_topic
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from test_share_groups import consumer, poll_records, produce

OVERRIDES = {"group.share.heartbeat.interval.ms": "500", "share.coordinator.state.topic.num.partitions": "1"}


def config_cli(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", "config", *args, "-b", bs],
                          capture_output=True, text=True, timeout=60, env=child_env())


def lock_timeout_ms(port: int, group: str) -> int:
    """The AcquisitionLockTimeoutMs a ShareFetch of ``group`` is answered with."""
    with WireClient("127.0.0.1", port) as w:
        res = w.request(78, 1, {"group_id": group, "member_id": "probe", "share_session_epoch": 0, "max_wait_ms": 0,
                                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                                "topics": [], "forgotten_topics_data": []})
        assert res.error_code == 0
        return res.acquisition_lock_timeout_ms


def heartbeat_interval_ms(port: int, group: str, topic: str) -> int:
    with WireClient("127.0.0.1", port) as w:
        res = w.request(76, 1, {"group_id": group, "member_id": f"probe-{group}", "member_epoch": 0, "rack_id": None,
                                "subscribed_topic_names": [topic]})
        assert res.error_code == 0
        w.request(76, 1, {"group_id": group, "member_id": f"probe-{group}", "member_epoch": -1, "rack_id": None,
                          "subscribed_topic_names": None})
        return res.heartbeat_interval_ms


def group_configs(bs: str, group: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ResourceType.GROUP, group)
    return {k: (v.value, v.source) for k, v in admin.describe_configs([res])[res].result(timeout=30).items()}


def test_share_group_configs_apply_to_their_group_and_survive_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-cfg", 1)
        produce(bs, "queue-cfg", 5, 1)  # before either group reads the partition
        r = config_cli(bs, "alter", "--group", "g-early", "--set", "share.auto.offset.reset=earliest",
                       "--set", "share.record.lock.duration.ms=15000", "--set", "share.heartbeat.interval.ms=6000")
        assert r.returncode == 0, r.stdout + r.stderr
        r = config_cli(bs, "alter", "--group", "g-early", "--set", "share.record.lock.duration.ms=1000")
        assert r.returncode != 0
        assert "share.record.lock.duration.ms must be greater than or equal to " \
               "group.share.min.record.lock.duration.ms" in " ".join((r.stdout + r.stderr).split())
        r = config_cli(bs, "describe", "--group", "g-early")
        assert r.returncode == 0 and "GROUP_CONFIG" in r.stdout and "15000" in r.stdout, r.stdout + r.stderr

        # the group's own values; another group keeps the broker's
        assert heartbeat_interval_ms(b.port, "g-early", "queue-cfg") == 6000
        assert heartbeat_interval_ms(b.port, "g-late", "queue-cfg") == 500
        assert lock_timeout_ms(b.port, "g-early") == 15000
        assert lock_timeout_ms(b.port, "g-late") == 30000
        late = consumer(bs, "g-late", "queue-cfg")
        assert poll_records(late, 3) == []  # latest: the 5 older records are not for it
        late.close()
        early = consumer(bs, "g-early", "queue-cfg")
        assert sorted(o for _, o, _, _ in poll_records(early, 15, want=5)) == [0, 1, 2, 3, 4]  # earliest
        early.close()
        # by_duration:<ISO-8601 duration>: the first record produced at or after now minus it
        admin = AdminClient({"bootstrap.servers": bs})
        for group, duration in (("g-hour", "PT1H"), ("g-now", "PT0S")):
            res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", f"by_duration:{duration}", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([res])[res].result(timeout=30)
        hour = consumer(bs, "g-hour", "queue-cfg")
        assert len(poll_records(hour, 15, want=5)) == 5  # all 5 were produced within the hour
        hour.close()
        now = consumer(bs, "g-now", "queue-cfg")
        assert poll_records(now, 3) == []  # none at or after now: the high watermark
        now.close()

        b.kill()
        b.start()
        got = group_configs(bs, "g-early")
        group = ConfigSource.GROUP_CONFIG.value
        assert got["share.auto.offset.reset"] == ("earliest", group)
        assert got["share.record.lock.duration.ms"] == ("15000", group)
        assert got["share.isolation.level"] == ("read_uncommitted", ConfigSource.DEFAULT_CONFIG.value)
        assert lock_timeout_ms(b.port, "g-early") == 15000
        r = config_cli(bs, "alter", "--group", "g-early", "--delete", "share.record.lock.duration.ms")
        assert r.returncode == 0, r.stdout + r.stderr
        assert group_configs(bs, "g-early")["share.record.lock.duration.ms"] == (
            "30000", ConfigSource.DEFAULT_CONFIG.value)
        assert lock_timeout_ms(b.port, "g-early") == 30000
    finally:
        b.stop()
