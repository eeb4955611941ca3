"""KIP-848 with real clients on a real broker process: confluent-kafka 2.16 consumers with
``group.protocol=consumer`` join, leave and are SIGKILLed; only the partitions that must move
move; committed offsets carry over; every record is consumed. At the same time a classic group
(kafka-python, JoinGroup/SyncGroup) consumes another topic on the same broker.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groups_helpers import (BackgroundProducer, Worker, assert_delivery, assert_no_double_ownership, child_env,
                            committed_offsets, consumer_group_describe, end_offsets, stable_assignment, stop_all,
                            wait_until)
from litemq.testing.process import BrokerProcess

pytestmark = [pytest.mark.timeout(240)]

OVERRIDES = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "6000"}
PARTITIONS = 6


def litemq_cli(bs: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "litemq.cli", *args, "-b", bs], capture_output=True, text=True,
                       env=child_env(), timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout


def table_rows(text: str) -> list[list[str]]:
    """The cells of every row of the rich tables in ``text``."""
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines() if "│" in line]


def test_kip848_consumers_join_leave_killed_with_classic_group_alongside(tmp_path):
    with BrokerProcess(tmp_path / "data", overrides=OVERRIDES) as broker:
        bs = broker.bootstrap_servers
        addr = lambda: ("127.0.0.1", broker.port)  # noqa: E731 - the single broker coordinates
        admin = AdminClient({"bootstrap.servers": bs})
        for t in ("kip848", "classic"):
            admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(timeout=30)
        feed = BackgroundProducer(bs, "kip848", PARTITIONS, rate_per_s=100)
        classic_feed = BackgroundProducer(bs, "classic", PARTITIONS, rate_per_s=50)
        # the classic group runs during the whole scenario
        classic = [Worker(tmp_path, f"classic{i}", "kafka-python", bs, "classic", "g-classic") for i in range(2)]
        workers: dict[str, Worker] = {}

        def start(name: str) -> None:
            workers[name] = Worker(tmp_path, name, "confluent-consumer", bs, "kip848", "g848")

        try:
            start("w1")
            s1 = stable_assignment(addr, "g848", {"w1"})
            assert s1 == {"w1": set(range(PARTITIONS))}

            start("w2")
            s2 = stable_assignment(addr, "g848", {"w1", "w2"})
            assert len(s2["w1"]) == len(s2["w2"]) == 3
            assert s2["w1"] <= s1["w1"], "w1 gained partitions when w2 joined"

            start("w3")
            s3 = stable_assignment(addr, "g848", {"w1", "w2", "w3"})
            assert sorted(len(v) for v in s3.values()) == [2, 2, 2]
            for w in ("w1", "w2"):  # each gives exactly one partition to w3 and keeps the rest
                assert s3[w] <= s2[w] and len(s2[w] - s3[w]) == 1, (w, s2, s3)

            epoch_before_kill = consumer_group_describe(*addr(), "g848").group_epoch
            workers["w2"].kill()  # SIGKILL: no leave; the session timeout (6 s) removes it
            s4 = stable_assignment(addr, "g848", {"w1", "w3"})
            assert s4["w1"] >= s3["w1"] and s4["w3"] >= s3["w3"], (s3, s4)
            assert len(s4["w1"]) == len(s4["w3"]) == 3
            assert consumer_group_describe(*addr(), "g848").group_epoch > epoch_before_kill

            workers["w1"].terminate()  # clean leave
            s5 = stable_assignment(addr, "g848", {"w3"})
            assert s5["w3"] == set(range(PARTITIONS))

            # the assignment callbacks saw the same moves: w3 never had to give anything up
            w3_moves = [e for e in workers["w3"].events() if e["ev"] in ("assign", "revoke")]
            assert all(e["ev"] == "assign" for e in w3_moves), w3_moves

            produced = feed.stop()
            assert not feed.errors
            ends = end_offsets(bs, "kip848", PARTITIONS)
            consumed = lambda: {r for w in workers.values() for r in w.records()}  # noqa: E731
            wait_until(lambda: produced <= consumed(), 60, "every kip848 record consumed")
            wait_until(lambda: committed_offsets(bs, "g848") == ends, 30, "the committed offsets reach the end")
            # committed offsets carried over: nothing committed was consumed again, every record once
            # at least, no partition had two owners at a time
            assert_delivery(list(workers.values()), produced)
            assert_no_double_ownership(list(workers.values()))

            classic_produced = classic_feed.stop()
            wait_until(lambda: classic_produced <= {r for c in classic for r in c.records()}, 60,
                       "every classic record consumed")
            assert_delivery(classic, classic_produced)
            listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=30).valid}
            assert listed["g848"].type.name == "CONSUMER" and listed["g-classic"].type.name == "CLASSIC"
            d848 = admin.describe_consumer_groups(["g848"])["g848"].result(timeout=30)
            assert d848.type.name == "CONSUMER" and [m.client_id for m in d848.members] == ["w3"]

            def classic_described():
                d = admin.describe_consumer_groups(["g-classic"])["g-classic"].result(timeout=30)
                return d if len(d.members) == 2 else None
            # a kafka-python member starved of CPU on a loaded machine may be rejoining just now
            dclassic = wait_until(classic_described, 30, "both classic members in g-classic")
            assert dclassic.type.name == "CLASSIC"
            # litemq group list / describe show the type, epochs and assignments
            listing = litemq_cli(bs, "group", "list")
            assert ["g848", "consumer", "Stable", "no"] in table_rows(listing), listing
            assert ["g-classic", "classic", "Stable", "no"] in table_rows(listing), listing
            shown = litemq_cli(bs, "group", "describe", "g848")
            d = consumer_group_describe(*addr(), "g848")
            assert "type consumer" in shown and f"group epoch {d.group_epoch}" in shown, shown
            m = d.members[0]
            assert [m.member_id, "w3", "-", str(m.member_epoch), "kip848:0,1,2,3,4,5", "kip848:0,1,2,3,4,5"] \
                in table_rows(shown), shown
            assert "type classic" in litemq_cli(bs, "group", "describe", "g-classic")
            print(f"\nassignments {s1} -> {s2} -> {s3} -> (w2 killed) {s4} -> (w1 left) {s5}; "
                  f"{len(produced)} + {len(classic_produced)} records")
        finally:
            feed.stop()
            classic_feed.stop()
            stop_all(list(workers.values()) + classic)
