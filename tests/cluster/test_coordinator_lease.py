"""A group coordinator acts only while its leadership of the group's ``__consumer_offsets``
partition is current (the leader lease: ``Partition.leadership_current``).

The bug (hunter's repro, deterministic): a classic member is Stable; its coordinator broker is
SIGSTOPped with a Heartbeat queued on it; the member heartbeats the new coordinator for longer
than its session timeout; on SIGCONT the old broker's overdue session timer ran first (asyncio
runs due timers before the request task), expired the member and answered the queued Heartbeat
UNKNOWN_MEMBER_ID from that stale state, before it heard of the new leader, while the real
coordinator still had the member alive. A client (kafka-python) then dropped its member id,
rejoined and processed records again. Kafka 4's coordinator runtime fails the expiry's write
and holds the answer until its records commit, so it answers NOT_COORDINATOR; LiteMQ's
coordinator checks the lease instead: not current after a stall, so the expiry waits and the
request is answered NOT_COORDINATOR once the broker learns it was deposed.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.cluster.group import RaftGroup
from litemq.coordinator.records import partition_for
from litemq.protocol.errors import ErrorCode as E
from litemq.testing.cluster import LocalCluster
from litemq.testing.wire import WireClient

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
GROUP = "stale-g"
SESSION_MS = 6000


def _find_new_coordinator(cluster, exclude: int) -> int | None:
    for n in cluster.node_ids:
        if n == exclude:
            continue
        try:
            with WireClient("127.0.0.1", cluster.node(n).port, timeout_s=3) as w:
                r = w.request(10, 3, {"key": GROUP, "key_type": 0})
                if r.error_code == 0 and r.node_id != exclude:
                    return r.node_id
        except OSError:
            pass
    return None


def _heartbeat(client: WireClient, member: str, generation: int) -> str:
    return E(client.request(12, 3, {"group_id": GROUP, "generation_id": generation, "member_id": member,
                                    "group_instance_id": None}).error_code).name


@pytest.mark.timeout(120)
def test_paused_coordinator_does_not_expire_a_member_its_successor_has(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 3)])["t"].result(timeout=30)
        cluster.wait_leaders("t", 1)
        with WireClient("127.0.0.1", cluster.node(1).port) as w:  # creates __consumer_offsets
            w.request(10, 3, {"key": GROUP, "key_type": 0})
        cluster.wait_leaders("__consumer_offsets", 8)
        old = cluster.leader_of("__consumer_offsets", partition_for(GROUP, 8))
        a = WireClient("127.0.0.1", cluster.node(old).port, timeout_s=60)
        try:
            body = {"group_id": GROUP, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": SESSION_MS,
                    "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]}
            r = a.request(11, 5, body)
            if r.error_code == E.MEMBER_ID_REQUIRED:
                r = a.request(11, 5, {**body, "member_id": r.member_id})
            member, gen = r.member_id, r.generation_id
            s = a.request(14, 5, {"group_id": GROUP, "generation_id": gen, "member_id": member,
                                  "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                  "assignments": [{"member_id": member, "assignment": b""}]})
            assert (r.error_code, s.error_code) == (0, 0)

            cluster.pause(old)
            queued: dict[str, str] = {}

            def heartbeat_on_old() -> None:  # sent during the pause, answered after SIGCONT
                try:
                    queued["err"] = _heartbeat(a, member, gen)
                except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
                    queued["err"] = repr(exc)

            th = threading.Thread(target=heartbeat_on_old)
            th.start()
            # The member heartbeats the new coordinator for longer than its session timeout.
            new = None
            t_end = time.time() + SESSION_MS / 1000 + 3
            while time.time() < t_end:
                new = new or _find_new_coordinator(cluster, old)
                if new is not None:
                    with WireClient("127.0.0.1", cluster.node(new).port, timeout_s=3) as b:
                        assert _heartbeat(b, member, gen) == "NONE"
                time.sleep(1)
            assert new is not None, "no new coordinator was elected while the old one was paused"
            cluster.resume(old)
            th.join(30)
            assert not th.is_alive(), "the heartbeat queued on the resumed coordinator was never answered"
            # Retriable (the client looks the coordinator up again), never a verdict from stale state.
            assert queued.get("err") == "NOT_COORDINATOR", queued
            # The member is alive at whichever broker coordinates the group now (leadership may
            # move back to the resumed broker, its preferred replica, which reloads the group).
            answers = []
            deadline = time.time() + 10
            while time.time() < deadline and answers[-1:] != ["NONE"]:
                c = _find_new_coordinator(cluster, -1)
                if c is not None:
                    with WireClient("127.0.0.1", cluster.node(c).port, timeout_s=5) as b:
                        answers.append(_heartbeat(b, member, gen))
                time.sleep(0.3)
            assert answers[-1:] == ["NONE"] and set(answers) <= {"NONE", "NOT_COORDINATOR",
                                                                 "COORDINATOR_LOAD_IN_PROGRESS"}, answers
            old_log = (tmp_path / f"node-{old}" / "broker.log").read_text()
            assert f"member {member} expired" not in old_log
        finally:
            a.close()


def _group(voters, heard, me=1, term=3, leader=True):
    """A stand-in with what ``RaftGroup.lease_current`` reads."""
    node = SimpleNamespace(is_leader=leader, term=term, voters=frozenset(voters))
    return SimpleNamespace(node=node, failed=False, closed=False, host=SimpleNamespace(node_id=me),
                           heard_at=heard)


def test_lease_needs_a_majority_of_voters_in_the_current_term_within_the_window():
    lease = RaftGroup.lease_current
    # 3 voters: itself + one follower heard within the window is a majority.
    assert lease(_group({1, 2, 3}, {2: (3, 9.5)}), 10.0, 1.0)
    assert not lease(_group({1, 2, 3}, {2: (3, 8.9)}), 10.0, 1.0)  # too long ago
    assert not lease(_group({1, 2, 3}, {2: (2, 9.9)}), 10.0, 1.0)  # an earlier term
    assert not lease(_group({1, 2, 3}, {2: (3, 9.9)}, leader=False), 10.0, 1.0)
    # 5 voters: two followers needed.
    assert not lease(_group({1, 2, 3, 4, 5}, {2: (3, 9.9)}), 10.0, 1.0)
    assert lease(_group({1, 2, 3, 4, 5}, {2: (3, 9.9), 5: (3, 9.2)}), 10.0, 1.0)
    # A single voter leads alone.
    assert lease(_group({1}, {}), 10.0, 1.0)
