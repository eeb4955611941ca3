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
   change at a time as :func:`litemq.raft.reconfigure.next_conf_step` plans it (new replicas
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
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.raft import RaftError
from litemq.raft.reconfigure import ConfStepKind, next_conf_step

log = logging.getLogger("litemq.cluster.manager")  # the manager's logger, as its other parts

__all__ = ["PartitionReassignments", "completion_record", "listed_reassignments",
           "plan_reassignment"]

def _caught_up(node, member: int) -> int | None:
    """``member``'s match offset on leader ``node`` once its log reached the high watermark (the
    commit index: Kafka's condition to join the ISR), else None (not promotable yet; a bound in
    offsets alone would promote a learner holding nothing while the log is short)."""
    m = node.match_offset(member)
    return m if m is not None and m >= node.commit_index else None


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
        """Partition leaders: propose the next single-server change of each watched group toward
        its target (:func:`next_conf_step`); called every tick."""
        watch = self._reconf_watch
        for gid in list(watch):
            g = self.groups.get(gid)
            if g is None or g.closed or g.failed or g.tp is None or not g.node.is_leader:
                watch.discard(gid)  # watched again when it leads (see _on_partition_leader)
                continue
            node = g.node
            target = self._reassignment_target(*g.tp)
            if target is None:
                watch.discard(gid)
                continue
            if node.transferee is not None:
                continue
            step = next_conf_step(node.conf_state, target, self.node_id, lambda n, node=node: _caught_up(node, n),
                                  node.last_offset, limits.RAFT_PROMOTE_MAX_LAG_OFFSETS)
            if step.kind is ConfStepKind.DONE:
                if not node.config_change_pending():  # no CONFIG entry left uncommitted
                    watch.discard(gid)
                    if g.tp in self.image.reassignments:
                        self._heartbeat_now.set()  # report it to the metadata leader at once
                continue
            if step.conf is None:  # WAIT_CATCH_UP
                continue
            if step.kind is ConfStepKind.REMOVE_VOTER and step.node == self.node_id:
                self._hand_over_before_removal(g, target)
                continue
            try:
                node.propose_config(step.conf.voters, step.conf.learners)
                log.info("%s: reassignment step %s %s -> voters %s learners %s", gid, step.kind.value, step.node,
                         sorted(step.conf.voters), sorted(step.conf.learners))
            except (RaftError, ValueError) as exc:  # the previous change (or this term's first entry) pending
                log.debug("%s: reassignment step %s deferred: %s", gid, step.kind.value, exc)
            g.wake()
            self.mark_dirty(g)

    def _hand_over_before_removal(self, g, target: frozenset[int]) -> None:
        """The leader is the last voter to leave: hand leadership to the most caught-up voter of
        the target (Raft leadership transfer, thesis §3.10), which then removes it. (A leader
        removing itself steps down without a successor when none is fully caught up, and
        followers quiescent behind a live leader's broker would not start an election.)"""
        node = g.node
        candidates = [v for v in node.voters if v in target and v != self.node_id]
        if not candidates:
            return
        to = max(sorted(candidates), key=lambda v: node.match_offset(v) or -1)
        try:
            node.transfer_leadership(to)
            log.info("%s: leaving the replica set: hands leadership to %d first", g.group_id, to)
        except (RaftError, ValueError) as exc:
            log.debug("%s: leadership transfer to %d deferred: %s", g.group_id, to, exc)
        g.wake()
        self.mark_dirty(g)

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
