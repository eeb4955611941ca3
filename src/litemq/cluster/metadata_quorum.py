"""The metadata quorum's membership: observers and a dynamic voter set (KIP-853).

- **Observers.** Every registered broker that is not a metadata voter is a *learner* of the
  ``__cluster_metadata`` Raft group (KRaft's observer: it receives the log, never votes). A
  broker joins a running cluster with ``--join`` (:mod:`litemq.cluster.join`): the ``join`` RPC
  registers it with its RPC address, every broker learns that address from the
  ``register_broker`` record (:meth:`MetadataQuorum._sync_peers`), and the metadata leader adds
  it as a learner (:meth:`MetadataQuorum._reconcile_observers`, once a second, one change at a
  time); an unregistered observer is removed again.
- **AddRaftVoter / RemoveRaftVoter** (KIP-853, API keys 80 and 81): on the metadata leader
  (:meth:`ClusterAdmin.admin` forwards them there), one voter change at a time, each a Raft
  single-server change (thesis §4.1): a new voter is a learner first and is promoted once its
  log reaches the leader's commit index (thesis §4.2.1); removing the leader commits the change,
  then the leader steps down (thesis §4.2.2) and the answer comes from the committed
  configuration. A removed voter that is still a registered broker stays an observer.

The configuration in effect is the Raft group's (``self.meta.node.voters``/``learners``), kept in
the metadata group's state file, so a restarted broker keeps it whatever ``--peers`` says.
Mixed into :class:`~litemq.cluster.manager.ClusterManager`. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging

from litemq import limits
from litemq.cluster.image import endpoints_to_json
from litemq.cluster.quorum import directory_uuid
from litemq.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("litemq.cluster.manager")

__all__ = ["MetadataQuorum"]

_ANY_ADDRESS = ("", "0.0.0.0", "::")


class MetadataQuorum:
    """Observers and AddRaftVoter/RemoveRaftVoter of the metadata group (see the module docstring)."""

    # ------------------------------------------------------------ registration and peers
    def rpc_address(self) -> tuple[str, int]:
        """(host, port) other brokers reach this broker's RPC listener at (its ``--rpc-listen``;
        a wildcard host is replaced by the advertised host of the default listener)."""
        host = self.config.rpc_listen_host
        if host in _ANY_ADDRESS:
            host = self.host.advertised()[0]
        port = self.transport.listen_port if self.transport is not None else self.config.rpc_listen_port
        return host, port

    def _registration(self) -> dict:
        """This broker's registration, as heartbeats and ``join`` carry it."""
        host, port = self.host.advertised()
        return {"node_id": self.node_id, "host": host, "port": port,
                "endpoints": endpoints_to_json(self.host.advertised_endpoints()),
                "directory_id": self.host.identity.directory_id, "rack": self.config.broker_rack,
                "rpc": list(self.rpc_address()), "roles": self.config.process_roles,
                "incarnation": self.incarnation, "cluster_id": self.local_cluster_id()}

    def _peer_addresses(self) -> dict[str, list]:
        """Node id (text) -> [host, RPC port] of every broker this broker knows, itself included."""
        out = {str(n): list(a) for n, a in self.transport.peers.items()} if self.transport is not None else {}
        for n, a in self.voters.items():
            out[str(n)] = list(a)
        for b in self.image.brokers.values():
            if b.rpc is not None and b.node_id not in self.voters:
                out[str(b.node_id)] = list(b.rpc)
        out[str(self.node_id)] = list(self.rpc_address())
        return out

    def _sync_peers(self) -> None:
        """Dial (or expect) every registered broker at the RPC address it registered; the static
        ``--peers`` addresses win for their nodes."""
        for b in self.image.brokers.values():
            if b.rpc is not None and b.node_id != self.node_id and b.node_id not in self.voters:
                self.transport.add_peer(b.node_id, b.rpc)

    async def _rpc_join(self, req: dict) -> dict:
        """RPC ``join`` (:mod:`litemq.cluster.join`): register the new broker through the metadata
        leader and tell it the cluster id, the metadata voters and every broker's RPC address.
        An error answer with ``fatal`` stops the joining broker (another cluster, a bad request)."""
        if self.meta is None:
            return {"error": int(ErrorCode.NOT_CONTROLLER), "message": "this broker is still starting"}
        try:
            node_id, host, port = int(req["node_id"]), str(req["host"]), int(req["port"])
            rpc = (str(req["rpc"][0]), int(req["rpc"][1]))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return {"error": int(ErrorCode.INVALID_REQUEST), "message": f"bad join request: {exc!r}", "fatal": True}
        theirs, ours = str(req.get("cluster_id") or ""), self.local_cluster_id()
        if theirs and ours and theirs != ours:
            return {"error": int(ErrorCode.INCONSISTENT_CLUSTER_ID), "fatal": True,
                    "message": f"this is cluster {ours}; the joining broker's data dir belongs to cluster {theirs}"}
        known = self.image.brokers.get(node_id)
        directory_id = req.get("directory_id")
        if (known is not None and node_id in self.live_brokers and node_id != self.node_id
                and known.directory_id and directory_id and known.directory_id != directory_id):
            return {"error": int(ErrorCode.DUPLICATE_BROKER_REGISTRATION),
                    "message": f"node id {node_id} is registered by a live broker with another directory.id"}
        try:
            await self.admin("register_broker", timeout_s=limits.JOIN_REGISTER_TIMEOUT_MS / 1000,
                             node_id=node_id, host=host, port=port, endpoints=req.get("endpoints"),
                             directory_id=directory_id, rack=req.get("rack"), rpc=list(rpc),
                             roles=str(req.get("roles") or "broker,controller"),
                             incarnation=req.get("incarnation"))
        except KafkaError as exc:
            return {"error": int(exc.code), "message": str(exc)}
        self.transport.add_peer(node_id, rpc)
        log.info("broker %d joined through this broker (rpc %s:%d)", node_id, *rpc)
        return {"cluster_id": self.image.cluster_id, "voters": sorted(self.meta.node.voters),
                "peers": self._peer_addresses(), "leader_id": self.meta.node.leader_id}

    # ------------------------------------------------------------ observers
    def _reconcile_observers(self) -> None:
        """Metadata leader: add one registered broker that is no member as a learner, or
        remove one learner that is no longer registered (one change at a time; called every
        second and resumed by any new leader)."""
        meta = self.meta
        node = meta.node
        if not node.is_leader or self._quorum_changing or not node.config_change_allowed():
            return
        members = node.voters | node.learners
        for n, b in sorted(self.image.brokers.items()):
            if n not in members and b.rpc is not None:  # it learns the leader from its appends
                self._propose_meta_conf(node.voters, node.learners | {n}, f"observer {n} added")
                return
        for n in sorted(node.learners):
            if n not in self.image.brokers:
                self._propose_meta_conf(node.voters, node.learners - {n}, f"unregistered observer {n} removed")
                return

    def _propose_meta_conf(self, voters, learners, why: str) -> bool:
        """Propose a metadata group configuration (leader); False when it cannot be now."""
        try:
            self.meta.node.propose_config(voters, learners)
        except Exception as exc:  # NotLeader, a change pending, ...: the caller looks again later
            log.debug("metadata configuration change (%s) deferred: %s", why, exc)
            return False
        log.info("metadata quorum: %s (voters %s, learners %s)", why, sorted(voters), sorted(learners))
        self.mark_dirty(self.meta)
        return True

    # ------------------------------------------------------------ AddRaftVoter / RemoveRaftVoter
    async def add_voter(self, node_id: int, directory_id: str | None, timeout_s: float) -> None:
        """AddRaftVoter (KIP-853): make broker ``node_id`` a metadata voter, through the metadata
        leader, within ``timeout_s`` seconds. ``directory_id``: its ``directory.id`` (Kafka's
        base64 text or UUID text; None: any).

        Raises:
            KafkaError: DUPLICATE_VOTER (already a voter), INVALID_REQUEST (not a registered
                broker, its ``process.roles`` lacks controller, another directory id),
                REQUEST_TIMED_OUT (it did not catch up, or another change did not finish, in time).
        """
        await self.admin("add_voter", timeout_s=timeout_s, node_id=int(node_id), directory_id=directory_id)

    async def remove_voter(self, node_id: int, directory_id: str | None, timeout_s: float) -> None:
        """RemoveRaftVoter (KIP-853): remove ``node_id`` from the metadata voters, through the
        metadata leader, within ``timeout_s`` seconds.

        Raises:
            KafkaError: VOTER_NOT_FOUND (not a voter, or another directory id), INVALID_REQUEST
                (the last voter), REQUEST_TIMED_OUT.
        """
        await self.admin("remove_voter", timeout_s=timeout_s, node_id=int(node_id), directory_id=directory_id)

    async def _quorum_change_local(self, action: str, args: dict, timeout_s: float) -> dict:
        """Metadata leader: run ``add_voter``/``remove_voter`` (an admin answer dict)."""
        try:
            node_id = int(args["node_id"])
        except (KeyError, TypeError, ValueError):
            return {"error": int(ErrorCode.INVALID_REQUEST), "message": "bad voter id"}
        directory_id = args.get("directory_id") or None
        deadline = self.loop.time() + timeout_s
        while self._quorum_changing:  # one voter change at a time
            if self.loop.time() >= deadline:
                return {"error": int(ErrorCode.REQUEST_TIMED_OUT), "message": "another voter change is in progress"}
            await asyncio.sleep(limits.QUORUM_CHANGE_POLL_MS / 1000)
        self._quorum_changing = True
        try:
            if action == "add_voter":
                return await self._add_voter_local(node_id, directory_id, deadline)
            return await self._remove_voter_local(node_id, directory_id, deadline)
        except KafkaError as exc:
            return {"error": int(exc.code), "message": str(exc)}
        finally:
            self._quorum_changing = False

    def _check_directory(self, node_id: int, directory_id: str | None, code: ErrorCode) -> None:
        known = self.image.directory_id_of(node_id)
        if directory_id and known and directory_uuid(directory_id) != directory_uuid(known):
            raise KafkaError(f"broker {node_id} has directory.id {known}, not {directory_id}", code)

    async def _add_voter_local(self, node_id: int, directory_id: str | None, deadline: float) -> dict:
        node = self.meta.node
        if node_id in node.voters:
            raise KafkaError(f"broker {node_id} is already a metadata voter", ErrorCode.DUPLICATE_VOTER)
        b = self.image.brokers.get(node_id)
        if b is None:
            raise KafkaError(f"broker {node_id} is not registered (start it with --join first)",
                             ErrorCode.INVALID_REQUEST)
        if "controller" not in {r.strip() for r in b.roles.split(",")}:
            raise KafkaError(f"broker {node_id} has process.roles={b.roles}: it cannot be a controller",
                             ErrorCode.INVALID_REQUEST)
        self._check_directory(node_id, directory_id, ErrorCode.INVALID_REQUEST)
        while True:
            node = self.meta.node
            if node_id in node.committed_conf_state[1].voters:
                log.info("metadata quorum: broker %d is a voter (AddRaftVoter)", node_id)
                return {"error": 0, "message": None}
            if not node.is_leader:
                return {"retry": True}
            if node.config_change_allowed() and node_id not in node.voters:
                if node_id not in node.learners:
                    self._propose_meta_conf(node.voters, node.learners | {node_id}, f"learner {node_id} (AddRaftVoter)")
                else:
                    match = node.match_offset(node_id)
                    if match is not None and match >= node.commit_index:
                        self._propose_meta_conf(node.voters | {node_id}, node.learners - {node_id},
                                                f"learner {node_id} promoted (AddRaftVoter)")
            if self.loop.time() >= deadline:
                raise KafkaError(f"broker {node_id} did not become a voter in time (not caught up, or not reachable)",
                                 ErrorCode.REQUEST_TIMED_OUT)
            await asyncio.sleep(limits.QUORUM_CHANGE_POLL_MS / 1000)

    async def _remove_voter_local(self, node_id: int, directory_id: str | None, deadline: float) -> dict:
        node = self.meta.node
        if node_id not in node.voters:
            raise KafkaError(f"broker {node_id} is not a metadata voter", ErrorCode.VOTER_NOT_FOUND)
        if node.voters == {node_id}:
            raise KafkaError(f"broker {node_id} is the only metadata voter", ErrorCode.INVALID_REQUEST)
        self._check_directory(node_id, directory_id, ErrorCode.VOTER_NOT_FOUND)
        while True:
            node = self.meta.node
            if node_id not in node.committed_conf_state[1].voters:
                log.info("metadata quorum: broker %d is no longer a voter (RemoveRaftVoter)", node_id)
                return {"error": 0, "message": None}
            if not node.is_leader:
                return {"retry": True}
            if node.config_change_allowed() and node_id in node.voters:
                self._propose_meta_conf(node.voters - {node_id}, node.learners, f"voter {node_id} removed")
            if self.loop.time() >= deadline:
                raise KafkaError(f"removing voter {node_id} did not commit in time", ErrorCode.REQUEST_TIMED_OUT)
            await asyncio.sleep(limits.QUORUM_CHANGE_POLL_MS / 1000)
