"""The cluster metadata image and its records: the state machine of the metadata Raft group.

In a replicated cluster every broker holds a :class:`MetadataImage` built by applying, in log
order, the committed records of the metadata group (KRaft's ``__cluster_metadata`` log, which
replaces ZooKeeper). Records are JSON objects, one per Kafka record in a record batch of the
metadata log; applying is deterministic and pure (no I/O, no clock, no randomness), so every
broker reaches the same image. Side effects (creating partition logs and Raft groups) are the
caller's business: :meth:`MetadataImage.apply` returns what changed.

Records (``"type"``):

======================= ===================================================================
init                    ``cluster_id`` (first leader, once)
register_broker         ``node_id``, ``host``, ``port`` (default listener), ``endpoints``
                        (listener name -> [host, port] of every advertised listener),
                        ``directory_id`` (optional: the ``directory.id`` of the broker's data
                        dir, from its ``meta.properties``; a new one means a new disk),
                        ``rack`` (optional: its ``broker.rack``, KIP-392 follower fetching),
                        ``rpc`` (optional: [host, port] of its RPC listener, how the other
                        brokers reach a broker that joined with ``--join``), ``roles``
                        (optional: its ``process.roles``, e.g. ``"broker,controller"``),
                        ``incarnation`` (optional: an id of the broker process, new at each start)
unregister_broker       ``node_id`` (UnregisterBroker, KIP-631: the registration is removed;
                        a broker that heartbeats again registers again, unless it is the same
                        process incarnation: a decommissioned broker still running stays out)
create_topic            ``name``, ``topic_id``, ``configs``, ``internal``, ``assignments``
delete_topic            ``name``
create_partitions       ``name``, ``assignments`` (of the new partitions)
set_configs             ``name``, ``configs`` (the whole new set)
set_broker_configs      ``broker`` (a node id as a string, or "" for the cluster-wide
                        default), ``configs`` (its whole new set of dynamic broker configs,
                        Kafka names -> values; ``kafka-configs.sh --entity-type brokers``)
producer_ids            ``node_id``, ``start``, ``count`` (a block, KIP-730 style)
create_acls             ``acls`` (binding rows; see :mod:`litemq.security.records`)
delete_acls             ``filters`` (every binding matching one is removed)
alter_scram_credentials ``deletions``, ``upsertions`` (KIP-554)
alter_client_quotas     ``changes`` (KIP-546; see :mod:`litemq.security.client_quotas`)
alter_client_metrics    ``name``, ``configs`` (KIP-714; see :mod:`litemq.security.client_metrics`)
register_schema, delete_versions, set_compatibility
                        the schema registry (see :mod:`litemq.cluster.schema_registry`)
change_partition        ``name``, ``partition``, ``replicas`` (every broker that hosts a replica,
                        target first: Kafka's PartitionChangeRecord ``Replicas``), ``target``
                        and ``original`` (the reassignment in progress, KIP-455; both null when
                        none: the move finished or never started). Brokers in ``replicas``
                        host the partition; one that drops out closes and deletes its replica.
======================= ===================================================================

Broker liveness (fencing) is soft state of the metadata leader, not records.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from litemq import limits
from litemq.cluster.metadata import TopicInfo, validate_partition_count, validate_topic_name
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security import records as security_records
from litemq.security.acls import AclStore
from litemq.cluster import schema_registry
from litemq.security.client_metrics import ClientMetricsStore
from litemq.security.client_quotas import ClientQuotaStore

__all__ = ["ApplyResult", "BrokerInfo", "MetadataImage", "Reassignment", "assign_replicas", "check_replica_list", "encode_record", "decode_record",
           "endpoints_from_json", "endpoints_to_json",
           "manual_partition_assignments", "manual_topic_assignments"]


def _rpc_address(value) -> tuple[str, int] | None:
    """A record's ``rpc`` field ([host, port]) as a tuple; None when absent or malformed."""
    try:
        host, port = value
        return str(host), int(port)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker: ``host``/``port`` of its default (first advertised) listener and
    ``endpoints``, listener name -> (host, port) of every advertised listener. Records written
    before listeners existed have no endpoints; then host/port serve every listener."""

    node_id: int
    host: str
    port: int
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict, hash=False)
    directory_id: str | None = None
    """The ``directory.id`` of the broker's data dir when it registered (None from brokers
    older than ``meta.properties``)."""
    rack: str | None = None
    """The broker's ``broker.rack`` (None: no rack, or a broker older than racks)."""
    rpc: tuple[str, int] | None = None
    """(host, port) of its RPC listener (None from brokers older than observers)."""
    roles: str = "broker,controller"
    """Its ``process.roles`` (``broker``: an observer that may not become a metadata voter)."""
    incarnation: str | None = None
    """An id of the registered broker process (new at each start; None from older brokers)."""

    def endpoint(self, listener_name: str | None = None) -> tuple[str, int] | None:
        """(host, port) on ``listener_name`` (the default listener when None); None when the
        broker advertises endpoints but not that listener."""
        if listener_name is None or not self.endpoints:
            return self.host, self.port
        return self.endpoints.get(listener_name)


def endpoints_from_json(doc) -> dict[str, tuple[str, int]]:
    """``{"SSL": ["host", 9093], ...}`` (or None) -> {"SSL": ("host", 9093)}.

    Raises:
        ValueError / TypeError: malformed, or more than ``limits.MAX_LISTENERS_PER_BROKER``.
    """
    if not doc:
        return {}
    if len(doc) > limits.MAX_LISTENERS_PER_BROKER:
        raise ValueError(f"{len(doc)} endpoints, at most {limits.MAX_LISTENERS_PER_BROKER}")
    return {str(name): (str(ep[0]), int(ep[1])) for name, ep in dict(doc).items()}


def endpoints_to_json(endpoints: dict[str, tuple[str, int]]) -> dict[str, list]:
    return {name: [host, port] for name, (host, port) in endpoints.items()}


@dataclass
class ApplyResult:
    """What one applied record did: ``error`` (a Kafka error code, 0 = none) and ``message``,
    and which (topic, partition) replicas appeared or disappeared (for the caller's logs)."""

    error: int = 0
    message: str | None = None
    created: list[tuple[str, int]] = field(default_factory=list)
    deleted: list[tuple[str, int]] = field(default_factory=list)
    changed_topics: list[str] = field(default_factory=list)
    broker_configs_changed: bool = False
    changed_partitions: list[tuple[str, int]] = field(default_factory=list)
    """Partitions whose replica set or reassignment changed (``change_partition``)."""

    def to_json(self) -> dict:
        return {"error": self.error, "message": self.message}


def encode_record(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode_record(value: bytes) -> dict:
    """Raises ValueError on anything that is not a JSON object with a string ``type``."""
    rec = json.loads(bytes(value))
    if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
        raise ValueError("metadata record is not an object with a type")
    return rec


def assign_replicas(broker_ids: list[int], num_partitions: int, replication_factor: int,
                    start: int) -> list[list[int]]:
    """Kafka-style round-robin assignment: partition ``i`` gets ``replication_factor`` brokers
    starting at ``broker_ids[(start + i) % n]``. The first replica is the preferred leader,
    so leaders spread evenly; ``start`` (e.g. the number of partitions already in the
    cluster) spreads them across topics too.

    Raises:
        KafkaError(INVALID_REPLICATION_FACTOR): more replicas than brokers, or fewer than 1.
    """
    ids = sorted(broker_ids)
    n = len(ids)
    if not 1 <= replication_factor <= n:
        raise KafkaError(f"replication factor {replication_factor} is larger than the {n} available broker(s)",
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    return [[ids[(start + i + j) % n] for j in range(replication_factor)] for i in range(num_partitions)]


def _check_replica_list(broker_ids: list[int], registered: set[int], live: set[int], partition: int,
                        replication_factor: int | None) -> list[int]:
    """Kafka ``ReplicationControlManager.validateManualPartitionAssignment`` for one partition."""
    def bad(msg: str) -> KafkaError:
        return KafkaError(msg, ErrorCode.INVALID_REPLICA_ASSIGNMENT)

    if not broker_ids:
        raise bad("The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for b in sorted(broker_ids):
        if b not in registered:
            raise bad(f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if b in seen:
            raise bad(f"The manual partition assignment includes the broker {b} more than once.")
        seen.add(b)
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise bad(f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but "
                  f"this is not consistent with previous partitions, which have {replication_factor} replica(s).")
    if not seen & live:
        raise bad(f"All brokers specified in the manual partition assignment for partition {partition} are "
                  "fenced or in controlled shutdown.")
    return list(broker_ids)


def check_replica_list(broker_ids, registered, live, partition: int) -> list[int]:
    """Kafka's checks of one requested replica list (a reassignment's target, KIP-455): non-empty,
    registered brokers, none twice, not all fenced. Returns it as a list.

    Raises:
        KafkaError(INVALID_REPLICA_ASSIGNMENT): with Kafka's message.
    """
    return _check_replica_list(list(broker_ids), set(registered), set(live), partition, None)


def manual_topic_assignments(assignments, registered, live) -> list[list[int]]:
    """Validate CreateTopics' manual assignments (CreateTopicsRequest v0+ ``Assignments``,
    KIP-4) and return the replica lists of partitions 0..n-1 (first = preferred leader).

    Args:
        assignments: ``[(partition_index, [broker_id, ...]), ...]`` as requested.
        registered: broker ids known to the cluster; live: those not fenced.

    Raises:
        KafkaError(INVALID_REPLICA_ASSIGNMENT): a partition listed twice, an empty replica list,
            an unknown or repeated broker, replica counts that differ between partitions, only
            fenced brokers, or partition indexes that are not 0..n-1 (Kafka 3.9
            ``ReplicationControlManager.createTopic``).
        KafkaError(INVALID_PARTITIONS): more than ``limits.MAX_PARTITIONS_PER_TOPIC`` partitions.
    """
    registered, live = set(registered), set(live)
    if assignments:  # none at all is INVALID_REPLICA_ASSIGNMENT below
        validate_partition_count(len(assignments))
    by_index: dict[int, list[int]] = {}
    rf: int | None = None
    for index, broker_ids in assignments:
        if index in by_index:
            raise KafkaError(f"Found multiple manual partition assignments for partition {index}",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        by_index[index] = _check_replica_list(list(broker_ids), registered, live, index, rf)
        rf = len(broker_ids)
    if sorted(by_index) != list(range(len(by_index))):
        raise KafkaError("partitions should be a consecutive 0-based integer sequence",
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return [by_index[i] for i in range(len(by_index))]


def manual_partition_assignments(assignments, first: int, count: int, replication_factor: int,
                                 registered, live) -> list[list[int]]:
    """Validate CreatePartitions' manual assignments (CreatePartitionsRequest v0+
    ``Assignments``, KIP-195): one replica list per new partition ``first..count-1``, each of
    the topic's ``replication_factor`` replicas. Returns them as lists.

    Raises:
        KafkaError(INVALID_REPLICA_ASSIGNMENT): wrong number of lists, or a list failing the
            per-partition checks of :func:`manual_topic_assignments`.
    """
    registered, live = set(registered), set(live)
    additional = count - first
    if len(assignments) != additional:
        raise KafkaError(f"Attempted to add {additional} additional partition(s), but only "
                         f"{len(assignments)} assignment(s) were specified.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return [_check_replica_list(list(ids), registered, live, first + i, replication_factor)
            for i, ids in enumerate(assignments)]


@dataclass(frozen=True)
class Reassignment:
    """A partition reassignment in progress (KIP-455): ``target`` (the replica list it moves
    to, first = preferred leader) and ``original`` (the replicas before the move began). A
    cancelled move has ``target == original``: it is walking back and is not listed."""

    target: tuple[int, ...]
    original: tuple[int, ...]

    @property
    def adding(self) -> list[int]:
        """Kafka's ``AddingReplicas``: in the target, not in the original."""
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        """Kafka's ``RemovingReplicas``: in the original, not in the target."""
        return [r for r in self.original if r not in self.target]

    @property
    def cancelled(self) -> bool:
        return self.target == self.original


class MetadataImage:
    """Brokers, topics with replica assignments and configs, producer-id blocks.

    Attributes:
        cluster_id: set by the first ``init`` record ("" before).
        brokers: node id -> :class:`BrokerInfo` (registered, live or not).
        topics: name -> :class:`TopicInfo` with ``assignments`` (replica lists per partition).
        next_producer_id: first producer id not handed out in a block yet.
        acls: the ACL bindings (:class:`~litemq.security.acls.AclStore`).
        scram_credentials: user -> SCRAM mechanism name -> ScramCredential (KIP-554).
        client_quotas: the client quotas (:class:`~litemq.security.client_quotas.ClientQuotaStore`).
        client_metrics: the client metrics subscriptions (KIP-714,
            :class:`~litemq.security.client_metrics.ClientMetricsStore`).
        schema_registry: the schema registry's schemas, subjects and compatibility levels
            (:class:`~litemq.cluster.schema_registry.SchemaRegistryStore`).
        broker_configs: dynamic broker configs: "" (cluster-wide default) or a node id as a
            string -> Kafka config name -> value.
        reassignments: (topic, partition) -> :class:`Reassignment` in progress.
        unregistered: node id -> the process incarnation that was registered when the broker
            was unregistered (that process does not register again; a restarted one does).
        unregistered_directories: node id -> the directory id it had when it was unregistered
            (a metadata voter keeps its directory id in the voter set, KIP-853, whether or not
            it is registered as a broker: see :meth:`directory_id_of`).
    """

    def __init__(self) -> None:
        self.cluster_id = ""
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.next_producer_id = 0
        self.acls = AclStore()
        self.scram_credentials: dict = {}
        self.client_quotas = ClientQuotaStore()
        self.client_metrics = ClientMetricsStore()
        self.schema_registry = schema_registry.SchemaRegistryStore()
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.reassignments: dict[tuple[str, int], Reassignment] = {}
        self.unregistered: dict[int, str] = {}
        self.unregistered_directories: dict[int, str] = {}

    # ------------------------------------------------------------ queries
    def directory_id_of(self, node_id: int) -> str | None:
        """The directory id of ``node_id``: its registration's, else the one it had when it was
        unregistered (DescribeQuorum and RemoveRaftVoter of a voter that was decommissioned
        first); None when unknown."""
        b = self.brokers.get(node_id)
        if b is not None:
            return b.directory_id
        return self.unregistered_directories.get(node_id)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def replicas(self, topic: str, index: int) -> list[int]:
        info = self.topics.get(topic)
        if info is None or not 0 <= index < len(info.assignments):
            return []
        return info.assignments[index]

    def partition_count(self) -> int:
        return sum(t.num_partitions for t in self.topics.values())

    def replication_factor(self, name: str) -> int:
        """Topic ``name``'s replication factor as Kafka reports it: partition 0's replicas minus
        the replicas a reassignment in progress is adding (so a move {1,2,3} -> {4,2,3}, whose
        replica list is [4,2,3,1] meanwhile, is RF 3); 1 for an unknown topic."""
        info = self.topics.get(name)
        if info is None or not info.assignments:
            return 1
        move = self.reassignments.get((name, 0))
        adding = set(move.adding) if move is not None else set()
        return max(1, sum(1 for r in info.assignments[0] if r not in adding))

    # ------------------------------------------------------------ apply
    def apply(self, rec: dict) -> ApplyResult:
        """Apply one committed record. Never raises for a well-formed record: a record that
        cannot apply (e.g. a topic created twice by racing proposals) yields an error result
        and leaves the image unchanged."""
        kind = rec.get("type")
        try:
            handler = getattr(self, "_apply_" + str(kind))
        except AttributeError:
            return ApplyResult(ErrorCode.INVALID_REQUEST, f"unknown metadata record type {kind!r}")
        try:
            return handler(rec)
        except KafkaError as exc:
            return ApplyResult(exc.code, str(exc))
        except (KeyError, TypeError, ValueError) as exc:
            return ApplyResult(ErrorCode.INVALID_REQUEST, f"malformed {kind} record: {exc}")

    def _apply_init(self, rec: dict) -> ApplyResult:
        if not self.cluster_id:
            self.cluster_id = str(rec["cluster_id"])
        return ApplyResult()

    def _apply_register_broker(self, rec: dict) -> ApplyResult:
        directory_id, rack = rec.get("directory_id"), rec.get("rack")
        b = BrokerInfo(int(rec["node_id"]), str(rec["host"]), int(rec["port"]),
                       endpoints_from_json(rec.get("endpoints")), str(directory_id) if directory_id else None,
                       str(rack) if rack is not None else None, _rpc_address(rec.get("rpc")),
                       str(rec.get("roles") or "broker,controller"),
                       str(rec["incarnation"]) if rec.get("incarnation") else None)
        self.brokers[b.node_id] = b
        self.unregistered.pop(b.node_id, None)
        self.unregistered_directories.pop(b.node_id, None)
        return ApplyResult()

    def _apply_unregister_broker(self, rec: dict) -> ApplyResult:
        node = int(rec["node_id"])
        b = self.brokers.pop(node, None)
        if b is None:
            return ApplyResult(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {node} is not currently registered")
        if b.incarnation:
            self.unregistered[node] = b.incarnation
        if b.directory_id:
            self.unregistered_directories[node] = b.directory_id
        return ApplyResult()

    def _apply_create_topic(self, rec: dict) -> ApplyResult:
        name = rec["name"]
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        assignments = [[int(r) for r in a] for a in rec["assignments"]]
        validate_partition_count(len(assignments))
        info = TopicInfo(name, uuid.UUID(rec["topic_id"]), len(assignments), dict(rec.get("configs") or {}),
                         bool(rec.get("internal", False)), assignments)
        self.topics[name] = info
        self._by_id[info.topic_id] = info
        return ApplyResult(created=[(name, i) for i in range(info.num_partitions)], changed_topics=[name])

    def _apply_delete_topic(self, rec: dict) -> ApplyResult:
        info = self.topics.pop(rec["name"], None)
        if info is None:
            raise KafkaError(f"unknown topic {rec['name']!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self._by_id.pop(info.topic_id, None)
        for index in range(info.num_partitions):
            self.reassignments.pop((info.name, index), None)
        return ApplyResult(deleted=[(info.name, i) for i in range(info.num_partitions)], changed_topics=[info.name])

    def _apply_create_partitions(self, rec: dict) -> ApplyResult:
        info = self.topics.get(rec["name"])
        if info is None:
            raise KafkaError(f"unknown topic {rec['name']!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        new = [[int(r) for r in a] for a in rec["assignments"]]
        if int(rec.get("first", info.num_partitions)) != info.num_partitions:
            raise KafkaError("partition count changed concurrently", ErrorCode.INVALID_PARTITIONS)
        if not new:
            raise KafkaError("no partitions to add", ErrorCode.INVALID_PARTITIONS)
        validate_partition_count(info.num_partitions + len(new))
        first = info.num_partitions
        info.assignments = info.assignments + new
        info.num_partitions = len(info.assignments)
        return ApplyResult(created=[(info.name, i) for i in range(first, info.num_partitions)],
                           changed_topics=[info.name])

    def _apply_set_configs(self, rec: dict) -> ApplyResult:
        info = self.topics.get(rec["name"])
        if info is None:
            raise KafkaError(f"unknown topic {rec['name']!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        info.configs = {str(k): str(v) for k, v in dict(rec["configs"]).items()}
        return ApplyResult(changed_topics=[info.name])

    def _apply_set_broker_configs(self, rec: dict) -> ApplyResult:
        broker = str(rec["broker"])
        if broker and not broker.isdigit():
            raise KafkaError(f"bad broker config resource {broker!r}", ErrorCode.INVALID_REQUEST)
        # the names were validated by the metadata leader (only the dynamic ones, a few dozen)
        configs = {str(k): str(v) for k, v in dict(rec["configs"]).items()}
        if configs:
            self.broker_configs[broker] = configs
        else:
            self.broker_configs.pop(broker, None)
        return ApplyResult(broker_configs_changed=True)

    def _apply_producer_ids(self, rec: dict) -> ApplyResult:
        start, count = int(rec["start"]), int(rec["count"])
        if start != self.next_producer_id or count < 1:
            raise KafkaError("producer id block raced with another", ErrorCode.UNKNOWN_SERVER_ERROR)
        self.next_producer_id = start + count
        return ApplyResult()

    def _apply_create_acls(self, rec: dict) -> ApplyResult:
        security_records.apply(self, rec)
        return ApplyResult()

    def _apply_change_partition(self, rec: dict) -> ApplyResult:
        info = self.topics.get(rec["name"])
        index = int(rec["partition"])
        if info is None or not 0 <= index < len(info.assignments):
            raise KafkaError(f"unknown partition {rec['name']}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        replicas = [int(r) for r in rec["replicas"]]
        if not replicas or len(set(replicas)) != len(replicas) or len(replicas) > 2 * limits.RAFT_MAX_VOTERS:
            raise KafkaError(f"bad replica list {replicas}", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        target, original = rec.get("target"), rec.get("original")
        if target is None:
            self.reassignments.pop((info.name, index), None)
        else:
            move = Reassignment(tuple(int(r) for r in target), tuple(int(r) for r in original))
            if not move.target or not set(move.target) <= set(replicas):
                raise KafkaError(f"target {list(move.target)} not within {replicas}", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            self.reassignments[(info.name, index)] = move
        info.assignments[index] = replicas
        return ApplyResult(changed_partitions=[(info.name, index)])

    _apply_delete_acls = _apply_create_acls
    _apply_alter_scram_credentials = _apply_create_acls
    _apply_alter_client_quotas = _apply_create_acls
    _apply_alter_client_metrics = _apply_create_acls

    def _apply_register_schema(self, rec: dict) -> ApplyResult:
        schema_registry.apply(self.schema_registry, rec)
        return ApplyResult()

    _apply_delete_versions = _apply_register_schema
    _apply_set_compatibility = _apply_register_schema

    # ------------------------------------------------------------ snapshots
    def to_json(self) -> dict:
        return {
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "brokers": [[b.node_id, b.host, b.port, endpoints_to_json(b.endpoints), b.directory_id, b.rack,
                         list(b.rpc) if b.rpc else None, b.roles, b.incarnation]
                        for b in self.brokers.values()],
            "broker_configs": self.broker_configs,
            "topics": [t.to_json() for t in self.topics.values()],
            "acls": self.acls.to_json(),
            "scram_credentials": security_records.scram_to_json(self.scram_credentials),
            "client_quotas": self.client_quotas.to_json(),
            "client_metrics": self.client_metrics.to_json(),
            "schema_registry": self.schema_registry.to_json(),
            "reassignments": [[t, i, list(m.target), list(m.original)] for (t, i), m in self.reassignments.items()],
            "unregistered": {str(n): inc for n, inc in self.unregistered.items()},
            "unregistered_directories": {str(n): d for n, d in self.unregistered_directories.items()},
        }

    @classmethod
    def from_json(cls, d: dict) -> "MetadataImage":
        img = cls()
        img.cluster_id = d.get("cluster_id", "")
        img.next_producer_id = int(d.get("next_producer_id", 0))
        img.brokers = {int(b[0]): BrokerInfo(int(b[0]), str(b[1]), int(b[2]),
                                             endpoints_from_json(b[3] if len(b) > 3 else None),
                                             str(b[4]) if len(b) > 4 and b[4] else None,
                                             str(b[5]) if len(b) > 5 and b[5] is not None else None,
                                             _rpc_address(b[6] if len(b) > 6 else None),
                                             str(b[7]) if len(b) > 7 and b[7] else "broker,controller",
                                             str(b[8]) if len(b) > 8 and b[8] else None)
                       for b in d.get("brokers", [])}
        img.broker_configs = {str(k): {str(n): str(v) for n, v in dict(c).items()}
                              for k, c in dict(d.get("broker_configs") or {}).items()}
        for t in d.get("topics", []):
            info = TopicInfo.from_json(t)
            img.topics[info.name] = info
            img._by_id[info.topic_id] = info
        img.acls = AclStore.from_json(d.get("acls", []))
        img.scram_credentials = security_records.scram_from_json(d.get("scram_credentials"))
        img.client_quotas = ClientQuotaStore.from_json(d.get("client_quotas"))
        img.client_metrics = ClientMetricsStore.from_json(d.get("client_metrics"))
        img.schema_registry = schema_registry.SchemaRegistryStore.from_json(d.get("schema_registry"))
        img.reassignments = {(str(t), int(i)): Reassignment(tuple(map(int, target)), tuple(map(int, original)))
                             for t, i, target, original in d.get("reassignments") or ()}
        img.unregistered = {int(n): str(inc) for n, inc in dict(d.get("unregistered") or {}).items()}
        img.unregistered_directories = {int(n): str(v) for n, v in
                                        dict(d.get("unregistered_directories") or {}).items()}
        return img
