"""Admin operations of the replicated cluster (Kafka's ``QuorumController`` request side):
validate an admin change against the metadata image, propose it to the metadata log as its
leader and wait for the commit, or forward it to the metadata leader from any other broker
(KIP-590), waiting for a leader within the request's own timeout; background auto-creation of
topics; producer-id blocks.

:class:`ClusterAdmin` is one part of :class:`~litemq.cluster.manager.ClusterManager`; it uses
the manager's ``meta`` group, ``image``, ``host``, ``transport``, ``loop``, ``_propose_and_wait``,
``wait_applied``, ``wait_applied_everywhere``, ``_live_ids`` and ``_spawn``. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from litemq import limits
from litemq.cluster.image import (
    endpoints_from_json,
    endpoints_to_json,
    manual_partition_assignments,
    manual_topic_assignments,
)
from litemq.cluster.metadata import validate_partition_count, validate_topic_name
from litemq.cluster.reassignment import completion_record, plan_reassignment
from litemq.cluster.placement import assign_replicas_rack_aware
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.cluster import schema_registry
from litemq.security import records as security_records

log = logging.getLogger("litemq.cluster.manager")  # the manager's logger, as before the split

PRODUCER_ID_BLOCK_SIZE = 1000
ADMIN_TIMEOUT_MS = 15_000
"""How long a metadata change waits for the metadata leader when the request names no timeout
(AlterConfigs, ACLs, producer-id blocks, auto-creation); CreateTopics, DeleteTopics and
CreatePartitions wait their own ``timeout_ms``."""


class ClusterAdmin:
    """Admin changes through the metadata leader (see the module docstring)."""

    async def _admin_local(self, action: str, args: dict, timeout_s: float = ADMIN_TIMEOUT_MS / 1000) -> dict:
        """Metadata leader: validate ``action`` against the current image, propose, wait at most
        ``timeout_s`` seconds for the commit. ``{"retry": True}`` when not the leader; a
        deadline already passed proposes nothing (Kafka's controller expires the event)."""
        if not self.meta.node.is_leader:
            return {"retry": True}
        if timeout_s <= 0:
            return {"error": ErrorCode.REQUEST_TIMED_OUT, "message": "the request's timeout passed before it ran"}
        if action in ("add_voter", "remove_voter"):  # Raft configuration changes, not records
            return await self._quorum_change_local(action, args, timeout_s)
        img = self.image
        reply = None
        try:
            if action == "init":
                rec = {"type": "init", "cluster_id": str(args["cluster_id"])}
            elif action == "register_broker":
                rec = {"type": "register_broker", "node_id": int(args["node_id"]), "host": str(args["host"]),
                       "port": int(args["port"]), "endpoints": endpoints_to_json(
                           endpoints_from_json(args.get("endpoints")))}
                if args.get("directory_id"):
                    rec["directory_id"] = str(args["directory_id"])
                if args.get("rack") is not None:
                    rec["rack"] = str(args["rack"])
                if args.get("rpc"):
                    host, port = args["rpc"]
                    rec["rpc"] = [str(host), int(port)]
                if args.get("roles"):
                    rec["roles"] = str(args["roles"])
                if args.get("incarnation"):
                    rec["incarnation"] = str(args["incarnation"])
            elif action == "unregister_broker":  # UnregisterBroker (KIP-631), Kafka's unregisterBroker
                if int(args["node_id"]) not in img.brokers:
                    raise KafkaError(f"Broker ID {int(args['node_id'])} is not currently registered",
                                     ErrorCode.BROKER_ID_NOT_REGISTERED)
                rec = {"type": "unregister_broker", "node_id": int(args["node_id"])}
            elif action == "create_topic":
                rec = self._create_topic_record(args)
            elif action == "delete_topic":
                if args["name"] not in img.topics:
                    raise KafkaError(f"unknown topic {args['name']!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                rec = {"type": "delete_topic", "name": args["name"]}
            elif action == "create_partitions":
                info = img.topics.get(args["name"])
                if info is None:
                    raise KafkaError(f"unknown topic {args['name']!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                count = int(args["count"])
                if count <= info.num_partitions:
                    raise KafkaError(f"topic has {info.num_partitions} partitions; the count can only grow",
                                     ErrorCode.INVALID_PARTITIONS)
                validate_partition_count(count)  # before placing them
                rf = img.replication_factor(info.name)  # not counting a move's adding replicas
                if args.get("assignments") is not None:  # CreatePartitions manual assignment
                    new = manual_partition_assignments(args["assignments"], info.num_partitions, count, rf,
                                                       img.brokers, self._live_ids())
                else:
                    live = self._live_ids()
                    new = assign_replicas_rack_aware(live, self._racks(live), count - info.num_partitions, rf,
                                                     img.partition_count())
                rec = {"type": "create_partitions", "name": info.name, "first": info.num_partitions,
                       "assignments": new}
            elif action == "set_configs":
                self.host.validate_topic_configs(dict(args["configs"]))
                rec = {"type": "set_configs", "name": args["name"], "configs": dict(args["configs"])}
            elif action == "set_broker_configs":
                self.host.validate_broker_configs(str(args["broker"]), dict(args["configs"]))
                rec = {"type": "set_broker_configs", "broker": str(args["broker"]), "configs": dict(args["configs"])}
            elif action == "reassign_partition":  # AlterPartitionReassignments (KIP-455), one partition
                replicas = args.get("replicas")
                rec = plan_reassignment(img, str(args["name"]), int(args["partition"]),
                                        None if replicas is None else [int(r) for r in replicas], self._live_ids())
                if rec is None:
                    return {"error": ErrorCode.NONE, "message": None}  # already the replica list
            elif action == "complete_reassignment":  # a partition leader reported the move done
                rec = completion_record(img, str(args["name"]), int(args["partition"]), list(args["target"]))
            elif action == "producer_ids":
                rec = {"type": "producer_ids", "node_id": int(args["node_id"]), "start": img.next_producer_id,
                       "count": PRODUCER_ID_BLOCK_SIZE}
            elif action in security_records.ACTIONS:  # ACLs, SCRAM credentials: per-entry results in reply
                rec, reply = security_records.plan(img, action, args)
                if rec is None:
                    return reply
            elif action in schema_registry.ACTIONS:  # refusals are in the reply
                rec, reply = schema_registry.plan(img.schema_registry, action, args)
                if rec is None:
                    return reply
            else:
                raise KafkaError(f"unknown admin action {action!r}", ErrorCode.INVALID_REQUEST)
        except KafkaError as exc:
            return {"error": exc.code, "message": str(exc)}
        started = self.loop.time()
        res = await self._propose_and_wait(rec, timeout_s)
        if action in ("create_topic", "create_partitions") and res.get("offset") is not None and not res.get("error"):
            wait_s = min(limits.CREATE_TOPIC_PROPAGATION_WAIT_MS / 1000, timeout_s - (self.loop.time() - started))
            await self.wait_applied_everywhere(int(res["offset"]), wait_s)
        if action == "producer_ids" and not res.get("retry") and not res.get("error"):
            res["start"], res["count"] = rec["start"], rec["count"]
        if reply is not None and not res.get("retry") and not res.get("error"):
            res.update(reply)
        return res

    def _racks(self, node_ids) -> dict[int, str | None]:
        """Node id -> its registered ``broker.rack`` (None: none, or not registered yet)."""
        brokers = self.image.brokers
        return {n: brokers[n].rack if n in brokers else None for n in node_ids}

    def _create_topic_record(self, args: dict) -> dict:
        name = args["name"]
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        n = int(args["num_partitions"])
        if n == -1:
            n = self.config.num_partitions
        validate_partition_count(n)
        rf = int(args["replication_factor"])
        if rf == -1:
            rf = min(self.config.default_replication_factor, len(self._live_ids()))
        elif args.get("internal"):
            # __consumer_offsets/__transaction_state ask for their configured factor (3); fewer
            # brokers give fewer replicas. Decided here, where the live brokers are known, not by
            # the asking broker (which, while the cluster starts, may know of none but itself).
            rf = min(rf, len(self._live_ids()))
        configs = dict(args.get("configs") or {})
        self.host.validate_topic_configs(configs)
        if args.get("assignments"):  # CreateTopics manual assignment: [[partition_index, [broker ids]], ...]
            assignments = manual_topic_assignments([(int(i), ids) for i, ids in args["assignments"]],
                                                   self.image.brokers, self._live_ids())
        else:
            live = self._live_ids()
            assignments = assign_replicas_rack_aware(live, self._racks(live), n, rf, self.image.partition_count())
        return {"type": "create_topic", "name": name, "topic_id": str(uuid.uuid4()), "configs": configs,
                "internal": bool(args.get("internal", False)), "assignments": assignments}

    async def admin(self, action: str, timeout_s: float | None = None, **args) -> dict:
        """Run a metadata change through the metadata leader, wherever it is, and wait until
        this broker has applied it; every wait is bounded by ``timeout_s`` seconds in total
        (None: ``ADMIN_TIMEOUT_MS``).

        While no metadata leader is known (a cluster still starting, an election) it waits for
        one; when the leader changes or loses its leadership mid-change it asks the new one
        (KIP-590 forwarding: the broker, not the client, retries).

        Raises:
            KafkaError: the change's error (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...)
                or REQUEST_TIMED_OUT when no metadata leader committed it within ``timeout_s``
                (at once, proposing nothing, when ``timeout_s`` <= 0, as Kafka's controller
                expires a request whose deadline passed).
        """
        if timeout_s is None:
            timeout_s = ADMIN_TIMEOUT_MS / 1000
        deadline = self.loop.time() + timeout_s
        while True:
            remaining = deadline - self.loop.time()
            leader = self.meta.node.leader_id
            if remaining <= 0:
                why = "no metadata leader is known" if leader is None else f"metadata leader {leader} did not commit it"
                raise KafkaError(f"{action} timed out after {timeout_s:.1f}s: {why}", ErrorCode.REQUEST_TIMED_OUT)
            if leader is None:
                await self._wait_leader_change(remaining)
                continue
            if leader == self.node_id:
                res = await self._admin_local(action, args, remaining)
            else:
                req = {"op": "admin", "action": action, "args": args, "timeout_ms": int(remaining * 1000)}
                try:
                    res = await self.transport.rpc(leader, req, remaining)
                except (ConnectionError, asyncio.TimeoutError):
                    res = {"retry": True}
            if res.get("retry"):
                # A leader that is not connected yet or just lost its leadership: ask again
                # soon, or at once when the known leader changes.
                await self._wait_leader_change(min(limits.ADMIN_RETRY_BACKOFF_MS / 1000, remaining))
                continue
            if res.get("offset") is not None:
                await self.wait_applied(int(res["offset"]), max(0.0, deadline - self.loop.time()))
            if res.get("error"):
                raise KafkaError(res.get("message") or ErrorCode(res["error"]).name, res["error"])
            return res

    async def _wait_leader_change(self, timeout_s: float) -> None:
        """Until the metadata group's role or known leader changes, at most ``timeout_s`` s."""
        fut = self.loop.create_future()
        self._leader_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, max(timeout_s, 0.0))
        except asyncio.TimeoutError:
            pass
        finally:
            if not fut.done():
                fut.cancel()
            if fut in self._leader_waiters:
                self._leader_waiters.remove(fut)

    def auto_create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                    configs: dict | None = None, internal: bool = False) -> None:
        """Start creating ``name`` in the background (Metadata auto-create, ``__consumer_offsets``);
        at most one creation of a name runs at a time (clients retry Metadata every few ms while
        a cluster starts)."""
        if name in self._auto_creating:
            return
        self._auto_creating.add(name)

        async def run():
            try:
                await self.admin("create_topic", name=name, num_partitions=num_partitions,
                                 replication_factor=replication_factor, configs=configs or {}, internal=internal)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.info("auto-creating %s failed: %s", name, exc)
            finally:
                self._auto_creating.discard(name)
        self._spawn(run())

    async def allocate_producer_id(self) -> int:
        """A producer id from this broker's block; a new block of ``PRODUCER_ID_BLOCK_SIZE``
        comes from the metadata log, one request at a time however many callers wait for it.

        Raises:
            KafkaError(COORDINATOR_LOAD_IN_PROGRESS): no block within
                ``limits.PRODUCER_ID_BLOCK_WAIT_MS`` (no metadata leader yet); the block request
                goes on, and the client retries (Kafka 3.5+ ``RPCProducerIdManager`` answers so
                at once while its next block is on the way).
        """
        deadline = self.loop.time() + limits.PRODUCER_ID_BLOCK_WAIT_MS / 1000
        while self._pid_next >= self._pid_end:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise KafkaError("no producer id block yet (the metadata leader has not answered)",
                                 ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            if self._pid_fetch is None or self._pid_fetch.done():
                self._pid_fetch = self.loop.create_task(self._fetch_producer_id_block())
                self._pid_fetch.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved
            try:
                await asyncio.wait_for(asyncio.shield(self._pid_fetch), remaining)
            except asyncio.TimeoutError:
                pass
            except KafkaError as exc:
                log.info("producer id block request failed: %s", exc)
                await asyncio.sleep(min(limits.ADMIN_RETRY_BACKOFF_MS / 1000, max(0.0, remaining)))
        pid = self._pid_next
        self._pid_next += 1
        return pid

    async def _fetch_producer_id_block(self) -> None:
        res = await self.admin("producer_ids", node_id=self.node_id)
        self._pid_next, self._pid_end = int(res["start"]), int(res["start"]) + int(res["count"])

