"""Cluster metadata of a LiteMQ broker: cluster id, brokers, topics, configs, producer ids.

This is the state the metadata Raft group will replicate (issue 7). Until then one broker keeps
it in ``DATA_DIR/__cluster_metadata/metadata.json``, rewritten atomically (temp file, fsync,
rename) on every change. Mutations are methods that validate and then persist; readers use the
attributes. No asyncio and no sockets here.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from litemq import limits
from litemq.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from litemq.security import records as security_records
from litemq.security.acls import AclStore
from litemq.cluster import schema_registry
from litemq.security.client_metrics import ClientMetricsStore
from litemq.security.client_quotas import ClientQuotaStore
from litemq.storage.manager import METADATA_DIR_NAME

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")

PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids are reserved from the persisted counter in blocks of this many."""


@dataclass
class TopicInfo:
    """One topic: its id (``uuid.UUID``), partition count and dynamic topic configs."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    assignments: list[list[int]] = field(default_factory=list)
    """Replica node ids per partition (first = preferred leader); empty on a single node."""

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "num_partitions": self.num_partitions,
            "configs": self.configs,
            "internal": self.internal,
        }
        if self.assignments:
            out["assignments"] = self.assignments
        return out

    @classmethod
    def from_json(cls, d: dict) -> "TopicInfo":
        return cls(d["name"], uuid.UUID(d["topic_id"]), int(d["num_partitions"]),
                   dict(d.get("configs", {})), bool(d.get("internal", False)),
                   [list(map(int, a)) for a in d.get("assignments", [])])


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules (``Topic.validate``).

    Raises:
        KafkaError(INVALID_TOPIC_EXCEPTION): empty, ``.``/``..``, longer than 249 chars, or a
            character outside ``[a-zA-Z0-9._-]``.
    """
    if not name or name in (".", ".."):
        raise KafkaError(f"invalid topic name {name!r}", ErrorCode.INVALID_TOPIC_EXCEPTION)
    if len(name) > limits.MAX_TOPIC_NAME_CHARS:
        raise KafkaError(f"topic name longer than {limits.MAX_TOPIC_NAME_CHARS} characters",
                         ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]",
                         ErrorCode.INVALID_TOPIC_EXCEPTION)


def validate_partition_count(count: int) -> None:
    """A topic's partition count, as created or grown, is 1..``limits.MAX_PARTITIONS_PER_TOPIC``.

    Checked before any placement: a count from the wire (CreateTopics, CreatePartitions) such as
    2**31 - 1 would otherwise have the metadata leader place two billion partitions.

    Raises:
        KafkaError(INVALID_PARTITIONS): ``count`` outside that range.
    """
    if not 1 <= count <= limits.MAX_PARTITIONS_PER_TOPIC:
        raise KafkaError(f"number of partitions must be in 1..{limits.MAX_PARTITIONS_PER_TOPIC}",
                         ErrorCode.INVALID_PARTITIONS)


class ClusterMetadata:
    """The persisted metadata of a single-broker cluster.

    Attributes:
        cluster_id: 22-char base64-ish id made once (like Kafka's ``meta.properties``).
        topics: name -> :class:`TopicInfo`.
        acls: the ACL bindings (:class:`~litemq.security.acls.AclStore`).
        scram_credentials: user -> SCRAM mechanism name -> ScramCredential (KIP-554).
        client_quotas: the client quotas (:class:`~litemq.security.client_quotas.ClientQuotaStore`).
        client_metrics: the client metrics subscriptions (KIP-714,
            :class:`~litemq.security.client_metrics.ClientMetricsStore`).
        schema_registry: the schema registry's schemas, subjects and compatibility levels
            (:class:`~litemq.cluster.schema_registry.SchemaRegistryStore`).
        broker_configs: dynamic broker configs: "" (the default) or the node id as a string ->
            Kafka config name -> value (``kafka-configs.sh --entity-type brokers``).

    Args:
        data_dir: the broker's data dir (the store is ``__cluster_metadata/metadata.json`` there).
        new_cluster_id: the cluster id a new store takes (the one ``meta.properties`` names, so
            a lost ``metadata.json`` does not give the data dir a new cluster); None: a new one.
    """

    def __init__(self, data_dir: Path, new_cluster_id: str | None = None) -> None:
        self._dir = Path(data_dir) / METADATA_DIR_NAME
        self._dir.mkdir(parents=True, exist_ok=True)
        self._path = self._dir / "metadata.json"
        self.cluster_id = ""
        self.topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.acls = AclStore()
        self.scram_credentials: dict = {}
        self.client_quotas = ClientQuotaStore()
        self.client_metrics = ClientMetricsStore()
        self.schema_registry = schema_registry.SchemaRegistryStore()
        self.broker_configs: dict[str, dict[str, str]] = {}
        self._new_cluster_id = new_cluster_id
        self._next_producer_id = 0
        self._producer_id_limit = 0  # exclusive end of the reserved block
        self._load()

    # ------------------------------------------------------------ persistence
    def _load(self) -> None:
        """Load ``metadata.json`` (or make a new one).

        Raises:
            ValueError: the file is not UTF-8, not JSON or not a metadata document; the message
                names the file (the broker refuses to start on it, as Kafka on a bad
                ``meta.properties``, rather than start with no topics).
        """
        if self._path.exists():
            try:
                self._load_from(json.loads(self._path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # UnicodeDecodeError is one
                raise ValueError(f"{self._path} is not a readable metadata file: {exc!r}") from None
        else:
            self.cluster_id = self._new_cluster_id or uuid.uuid4().hex[:22]
            self._save()

    def _load_from(self, d: dict) -> None:
        self.cluster_id = d["cluster_id"]
        self.topics = {t["name"]: TopicInfo.from_json(t) for t in d.get("topics", [])}
        self._by_id = {t.topic_id: t for t in self.topics.values()}
        self.acls = AclStore.from_json(d.get("acls", []))
        self.scram_credentials = security_records.scram_from_json(d.get("scram_credentials"))
        self.client_quotas = ClientQuotaStore.from_json(d.get("client_quotas"))
        self.client_metrics = ClientMetricsStore.from_json(d.get("client_metrics"))
        self.schema_registry = schema_registry.SchemaRegistryStore.from_json(d.get("schema_registry"))
        self.broker_configs = {str(k): {str(n): str(v) for n, v in dict(c).items()}
                               for k, c in dict(d.get("broker_configs") or {}).items()}
        # Reserved blocks are not handed out again after a restart (as Kafka's
        # ProducerIdManager): start at the persisted limit.
        self._next_producer_id = self._producer_id_limit = int(d.get("producer_id_limit", 0))

    def _save_or_undo(self, undo) -> None:
        """Persist the state just changed in memory; if that fails, call ``undo`` (which puts
        memory back as it was saved), so nothing unsaved is ever served or built upon.

        Raises:
            KafkaStorageError(KAFKA_STORAGE_ERROR): ``metadata.json`` could not be written
                (disk full, no file descriptor, I/O error); memory is as before the change.
        """
        try:
            self._save()
        except OSError as exc:
            undo()
            log.error("cannot save %s: %s", self._path, exc)
            raise KafkaStorageError(f"cannot save the cluster metadata: {exc}") from None

    def _save(self) -> None:
        body = {
            "cluster_id": self.cluster_id,
            "producer_id_limit": self._producer_id_limit,
            "topics": [t.to_json() for t in self.topics.values()],
            "acls": self.acls.to_json(),
            "scram_credentials": security_records.scram_to_json(self.scram_credentials),
            "client_quotas": self.client_quotas.to_json(),
            "client_metrics": self.client_metrics.to_json(),
            "schema_registry": self.schema_registry.to_json(),
            "broker_configs": self.broker_configs,
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(body, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    # ------------------------------------------------------------ topics
    def replication_factor(self, name: str) -> int:
        """Topic ``name``'s replication factor (1 for an unknown topic); as
        :meth:`MetadataImage.replication_factor <litemq.cluster.image.MetadataImage.replication_factor>`."""
        info = self.topics.get(name)
        return len(info.assignments[0]) if info is not None and info.assignments else 1

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with this id (Fetch v13+, Metadata v10+, DeleteTopics v6), or None."""
        return self._by_id.get(topic_id)

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                     internal: bool = False) -> TopicInfo:
        """Add a topic (already validated by the caller for configs).

        Raises:
            KafkaError: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS.
            KafkaStorageError(KAFKA_STORAGE_ERROR): not saved; the topic does not exist.
        """
        self.check_new_topic(name, num_partitions)
        info = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs), internal)
        self.topics[name] = info
        self._by_id[info.topic_id] = info

        def undo() -> None:
            self.topics.pop(name, None)
            self._by_id.pop(info.topic_id, None)
        self._save_or_undo(undo)
        return info

    def check_new_topic(self, name: str, num_partitions: int) -> None:
        """Could topic ``name`` with ``num_partitions`` partitions be created? Changes nothing.

        Raises:
            KafkaError: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS.
        """
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        validate_partition_count(num_partitions)

    def delete_topic(self, name: str) -> TopicInfo:
        """Remove topic ``name`` and persist.

        Raises:
            KafkaError(UNKNOWN_TOPIC_OR_PARTITION): no such topic.
            KafkaStorageError(KAFKA_STORAGE_ERROR): not saved; the topic is still there.
        """
        info = self.topics.pop(name, None)
        if info is None:
            raise KafkaError(f"unknown topic {name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self._by_id.pop(info.topic_id, None)

        def undo() -> None:
            self.topics[name] = info
            self._by_id[info.topic_id] = info
        self._save_or_undo(undo)
        return info

    def check_new_partition_count(self, name: str, count: int) -> None:
        """Could topic ``name`` grow to ``count`` partitions? Changes nothing.

        Raises:
            KafkaError(INVALID_PARTITIONS): ``count`` is not more than now, or over the bound.
        """
        info = self.topics[name]
        if count <= info.num_partitions:
            raise KafkaError(f"topic {name!r} has {info.num_partitions} partitions; "
                             f"the count can only grow", ErrorCode.INVALID_PARTITIONS)
        validate_partition_count(count)

    def set_partitions(self, name: str, count: int) -> None:
        """Grow topic ``name`` to ``count`` partitions and persist.

        Raises:
            KafkaError(INVALID_PARTITIONS): as :meth:`check_new_partition_count`.
            KafkaStorageError(KAFKA_STORAGE_ERROR): not saved; the count stays.
        """
        self.check_new_partition_count(name, count)
        info = self.topics[name]
        old = info.num_partitions
        info.num_partitions = count
        self._save_or_undo(lambda: setattr(info, "num_partitions", old))

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace topic ``name``'s dynamic configs and persist.

        Raises:
            KafkaStorageError(KAFKA_STORAGE_ERROR): not saved; the old configs stay.
        """
        info = self.topics[name]
        old = info.configs
        info.configs = dict(configs)
        self._save_or_undo(lambda: setattr(info, "configs", old))

    def set_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of broker resource ``resource`` ("" = the default; the
        caller validated them) and persist.

        Raises:
            KafkaStorageError(KAFKA_STORAGE_ERROR): not saved; the old configs stay.
        """
        old = self.broker_configs.get(resource)
        if configs:
            self.broker_configs[resource] = dict(configs)
        else:
            self.broker_configs.pop(resource, None)

        def undo() -> None:
            if old is None:
                self.broker_configs.pop(resource, None)
            else:
                self.broker_configs[resource] = old
        self._save_or_undo(undo)

    # ------------------------------------------------------------ producer ids
    def allocate_producer_id(self) -> int:
        """A fresh producer id (KIP-98). An id comes from a block whose end is durably saved
        before any id of it is handed out (Kafka ``ProducerIdManager``: a block is written to the
        metadata log before use), so a restart never hands an id out again.

        Raises:
            KafkaError(COORDINATOR_LOAD_IN_PROGRESS): the next block could not be saved (disk
                full, ...); no id is handed out and the limit stays the saved one. Kafka 3.5+
                answers InitProducerId so while its next block is not there, and every client
                retries it.
        """
        if self._next_producer_id >= self._producer_id_limit:
            old = self._producer_id_limit
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK_SIZE
            try:
                self._save_or_undo(lambda: setattr(self, "_producer_id_limit", old))
            except KafkaStorageError as exc:
                raise KafkaError(f"no producer id block: {exc}", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    # ------------------------------------------------------------ ACLs, SCRAM credentials, client quotas
    def apply_registry_record(self, rec: dict) -> None:
        """Apply a schema registry record (:func:`litemq.cluster.schema_registry.plan`) and persist.

        Raises:
            KafkaError(INVALID_REQUEST): a bound of the registry would be exceeded.
        """
        schema_registry.apply(self.schema_registry, rec)
        self._save()

    def apply_security_record(self, rec: dict) -> None:
        """Apply a record planned by :func:`litemq.security.records.plan` and persist.

        Raises:
            KafkaError(INVALID_REQUEST): a bound (``MAX_ACLS``, ``MAX_SCRAM_USERS``) would be exceeded.
        """
        security_records.apply(self, rec)
        self._save()
