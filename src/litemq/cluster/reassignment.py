"""Partition reassignment (KIP-455) in a replicated cluster: moving a partition's replica set
while it serves.

A partition is one Raft group; its replica set is the group's configuration. A move runs in
three places:

1. **Metadata leader** (AlterPartitionReassignments, any broker forwards it there): validates
   the target and commits a ``change_partition`` record (:func:`plan_reassignment`): the
   partition's ``replicas`` become every broker that hosts a replica during the move (target
   first, then the others: Kafka's ``Replicas`` during a reassignment), with ``target`` and
   ``original``. Cancelling moves the target back to the original replicas.
2. **Every broker** applying that record (:meth:`PartitionReassignments._on_partition_changed`):
   a broker newly listed opens the partition's Raft group with an empty log, as a non-voter
   (its initial voter set is the original replicas, which do not include it: it never
   campaigns); the leader adds it as a learner and sends it appends or a snapshot.
3. **The partition's leader** (:meth:`PartitionReassignments._drive_reconfigurations`, every
   tick while a partition of its is not in its target configuration): one single-server Raft
   change at a time (:func:`litemq.cluster.replica_move.reassign_step` over
   :func:`litemq.raft.reconfigure.next_conf_step`: new replicas
   in as learners, promoted once caught up, old voters removed; a leader that has to leave
   hands leadership to a voter of the target first, which then removes it). It is
   stateless, so a new leader (after a crash or a transfer) resumes from the
   configuration in its log. Once the *committed* configuration is the target with no learner,
   the leader reports it in its heartbeat (``reassignments``), and the metadata leader commits
   the final ``change_partition`` (:func:`completion_record`): ``replicas`` = the target.
   Brokers no longer listed then close their replica and delete its log dir: only after the
   Raft group committed their removal, since the metadata leader writes that record only once a
   leader reported that committed configuration.

Without a reassignment in progress a leader still steers its group to the metadata's replica
set, so a configuration left behind by a leader that acted on an older image is repaired.
Event-loop thread only (a part of :class:`~litemq.cluster.manager.ClusterManager`).
"""

from __future__ import annotations

import logging

from litemq import limits
from litemq.cluster.image import MetadataImage, check_replica_list
from litemq.cluster.partition_groups import group_id_of
from litemq.cluster.replica_move import ReassignState, reassign_step
from litemq.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("litemq.cluster.manager")  # the manager's logger, as its other parts

__all__ = ["PartitionReassignments", "completion_record", "listed_reassignments",
           "plan_reassignment"]

def _partition(image: MetadataImage, topic: str, index: int) -> list[int]:
    info = image.topics.get(topic)
    if info is None or not 0 <= index < len(info.assignments):
        raise KafkaError(f"unknown topic or partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return info.assignments[index]


def plan_reassignment(image: MetadataImage, topic: str, index: int, replicas: list[int] | None,
                      live) -> dict | None:
    """The ``change_partition`` record that starts, changes or cancels (``replicas`` None) the
    reassignment of ``topic``-``index`` (Kafka ``ReplicationControlManager
    .alterPartitionReassignment``); None when nothing changes (the target is already the
    replica list). ``live``: the brokers not fenced.

    Raises:
        KafkaError: UNKNOWN_TOPIC_OR_PARTITION; NO_REASSIGNMENT_IN_PROGRESS (a cancel with no move
            in progress); INVALID_REPLICA_ASSIGNMENT (empty list, unknown or repeated broker,
            every broker fenced, more than ``limits.RAFT_MAX_VOTERS``).
    """
    hosts = _partition(image, topic, index)
    move = image.reassignments.get((topic, index))
    if replicas is None:
        if move is None or move.cancelled:
            raise KafkaError(f"No ongoing reassignment for partition {topic}-{index}.",
                             ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        target = list(move.original)
    else:
        target = check_replica_list([int(r) for r in replicas], image.brokers, live, index)
        if len(target) > limits.RAFT_MAX_VOTERS:
            raise KafkaError(f"at most {limits.RAFT_MAX_VOTERS} replicas", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if move is None:
        if target == hosts:
            return None
        if set(target) == set(hosts):  # only the order (the preferred leader) changes: no move
            return {"type": "change_partition", "name": topic, "partition": index, "replicas": target,
                    "target": None, "original": None}
        original = list(hosts)
    else:
        original = list(move.original)
    new_hosts = target + [r for r in hosts if r not in target]
    return {"type": "change_partition", "name": topic, "partition": index, "replicas": new_hosts,
            "target": target, "original": original}


def completion_record(image: MetadataImage, topic: str, index: int, target: list[int]) -> dict:
    """The ``change_partition`` record that ends the move of ``topic``-``index`` to ``target``
    (its partition leader reported the committed configuration = the target).

    Raises:
        KafkaError(UNKNOWN_TOPIC_OR_PARTITION), or NO_REASSIGNMENT_IN_PROGRESS when no move to
        that target is in progress any more (cancelled or changed meanwhile).
    """
    _partition(image, topic, index)
    move = image.reassignments.get((topic, index))
    if move is None or list(move.target) != [int(r) for r in target]:
        raise KafkaError(f"no move of {topic}-{index} to {target} in progress", ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    return {"type": "change_partition", "name": topic, "partition": index, "replicas": list(move.target),
            "target": None, "original": None}


def listed_reassignments(image: MetadataImage, wanted: list[tuple[str, list[int]]] | None) -> list[dict]:
    """ListPartitionReassignments topics: every move in progress (``wanted`` None) or those of the
    named partitions; unknown topics and partitions without a move are left out, as Kafka does.
    A cancelled move walking back is not listed (Kafka has none left after a cancel)."""
    moves = image.reassignments
    if wanted is None:
        keys = sorted(moves)
    else:
        keys = [(t, i) for t, indexes in wanted for i in indexes if (t, i) in moves]
    out: dict[str, list[dict]] = {}
    for topic, index in keys:
        move = moves[(topic, index)]
        if move.cancelled:
            continue
        out.setdefault(topic, []).append({"partition_index": index, "replicas": list(image.replicas(topic, index)),
                                          "adding_replicas": move.adding, "removing_replicas": move.removing})
    return [{"name": t, "partitions": parts} for t, parts in out.items()]


class PartitionReassignments:
    """The broker side of reassignments (see the module docstring). Uses the manager's
    ``groups``, ``image``, ``host``, ``node_id``, ``mark_dirty``, ``_heartbeat_now``, ``_spawn``,
    ``_admin_local``, ``_open_replica``, ``_drop_replica``, ``_reconf_watch`` and
    ``_completing``."""

    def _reassignment_target(self, topic: str, index: int) -> frozenset[int] | None:
        """The voter set the partition's group should have: the move's target, else the replicas."""
        move = self.image.reassignments.get((topic, index))
        if move is not None:
            return frozenset(move.target)
        replicas = self.image.replicas(topic, index)
        return frozenset(replicas) if replicas else None

    def _on_partition_changed(self, topic: str, index: int) -> None:
        """A ``change_partition`` record was applied: open a replica newly listed here, close and
        delete one no longer listed, let a leader steer its group to the new target."""
        replicas = self.image.replicas(topic, index)
        gid = group_id_of(topic, index)
        if self.node_id in replicas:
            if gid not in self.groups:
                log.info("%s: joining the replica set %s (reassignment)", gid, replicas)
                self._open_replica(self.image.topics[topic], index, replicas)
            else:
                p = self.host.replicas.get(topic, index)
                if p is not None:
                    p.replicas = list(replicas)
            self._reconf_watch.add(gid)
        elif gid in self.groups:
            # Only a completed move drops a broker from the list, and the metadata leader writes
            # that record once the partition's Raft group committed the removal.
            log.info("%s: no longer a replica (reassigned to %s): deleting the local replica", gid, replicas)
            self._reconf_watch.discard(gid)
            self._drop_replica(topic, index, delete_log=True)

    def _drive_reconfigurations(self) -> None:
        """Partition leaders: take the next single-server change of each watched group toward
        its target (:func:`~litemq.cluster.replica_move.reassign_step`); called every tick."""
        watch = self._reconf_watch
        for gid in list(watch):
            g = self.groups.get(gid)
            if g is None or g.closed or g.failed or g.tp is None or not g.node.is_leader:
                watch.discard(gid)  # watched again when it leads (see _on_partition_leader)
                continue
            target = self._reassignment_target(*g.tp)
            if target is None:
                watch.discard(gid)
                continue
            status = reassign_step(g, target, limits.RAFT_PROMOTE_MAX_LAG_OFFSETS)
            if status.state is ReassignState.DONE:  # committed, no CONFIG entry left pending
                watch.discard(gid)
                if g.tp in self.image.reassignments:
                    self._heartbeat_now.set()  # report it to the metadata leader at once
            elif status.state is ReassignState.NOT_LEADER:
                watch.discard(gid)
            elif status.state is ReassignState.PROPOSED:
                step, conf = status.step, status.conf
                log.info("%s: reassignment step %s %s -> voters %s learners %s", gid, step.kind.value, step.node,
                         sorted(conf.voters), sorted(conf.learners))

    def _reassignment_reports(self) -> list[list]:
        """Heartbeat field ``reassignments``: ``[topic, partition, voters, learners]`` of the
        committed configuration of each partition this broker leads that is being moved."""
        out = []
        for topic, index in self.image.reassignments:
            g = self.groups.get(group_id_of(topic, index))
            if g is None or not g.node.is_leader or g.node.config_change_pending():
                continue
            _, conf = g.node.committed_conf_state
            out.append([topic, index, sorted(conf.voters), sorted(conf.learners)])
        return out

    def _complete_reassignments(self, reports) -> None:
        """Metadata leader: commit the end of every move a partition leader reported done."""
        for topic, index, voters, learners in reports or ():
            move = self.image.reassignments.get((str(topic), int(index)))
            if move is None or learners or set(map(int, voters)) != set(move.target):
                continue
            key = (str(topic), int(index), move.target)
            if key in self._completing:
                continue
            self._completing.add(key)

            async def complete(key=key):
                try:
                    res = await self._admin_local("complete_reassignment", {"name": key[0], "partition": key[1],
                                                                            "target": list(key[2])})
                    if res.get("error"):
                        log.info("%s-%d: reassignment not completed: %s", key[0], key[1], res.get("message"))
                    elif not res.get("retry"):
                        log.info("%s-%d: reassignment to %s completed", key[0], key[1], list(key[2]))
                finally:
                    self._completing.discard(key)
            self._spawn(complete())
