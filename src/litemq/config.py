"""Broker settings, with Kafka's names (``num.partitions``, ``message.max.bytes``, ...).

A :class:`BrokerConfig` is built from defaults, then a Java-style properties file
(``--config FILE``), then ``--override key=value`` flags, in that order. Per-topic log settings
(``retention.ms``, ``segment.bytes``, ...) live in :class:`litemq.storage.config.LogConfig`;
the broker-wide ``log.*`` defaults here feed it.

Hard bounds that protect the process are in :mod:`litemq.limits`, not here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from litemq.limits import MAX_PARTITIONS_PER_TOPIC, RAFT_MAX_VOTERS

DEFAULT_PORT = 9092
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"


@dataclass
class BrokerConfig:
    """One broker's settings. Attribute names are Kafka's with dots replaced by underscores.

    Units are in the names (``_ms``, ``_bytes``). Source: Kafka broker configs (3.9 docs).
    """

    data_dir: Path = Path("litemq-data")
    listen_host: str = "127.0.0.1"
    listen_port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 1

    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    message_max_bytes: int = 1048588
    min_insync_replicas: int = 1

    # log.* broker-wide defaults for topic configs (Kafka names: log.retention.ms, ...)
    log_segment_bytes: int = 1024**3
    log_roll_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_cleanup_policy: str = "delete"
    log_flush_interval_messages: int | None = None
    log_flush_interval_ms: int | None = None
    log_index_interval_bytes: int = 4096
    log_segment_index_bytes: int = 10 * 1024 * 1024
    log_retention_check_interval_ms: int = 5 * 60 * 1000
    log_cleaner_backoff_ms: int = 15 * 1000

    # groups (Kafka: offsets.topic.num.partitions defaults to 50; LiteMQ to 8)
    offsets_topic_num_partitions: int = 8
    offsets_retention_minutes: int = 7 * 24 * 60
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    """Kafka's default (3 s): a new group waits this long (extended by each joining member, at most
    the rebalance timeout) so its first generation forms with every member at once. Test harnesses
    (``litemq.testing``) set 0, as Kafka's own test configs and ``config/server.properties`` do."""
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096

    # replicated cluster (litemq.cluster): empty ``controller_quorum_voters`` = single node
    controller_quorum_voters: str = ""
    """``1@host:rpcport,2@host:rpcport,...`` (Kafka's name; ``--peers``): the metadata voters."""
    rpc_listen_host: str = "127.0.0.1"
    rpc_listen_port: int = 0
    broker_heartbeat_interval_ms: int = 500
    broker_session_timeout_ms: int = 3000
    raft_tick_ms: int = 100
    raft_election_timeout_ms: int = 1000
    raft_quiesce_enable: bool = True
    metadata_snapshot_interval_entries: int = 1000
    """Metadata log entries applied between two metadata snapshots (the log is cut before one)."""
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 5000

    # transactions (Kafka names; transaction.state.log.num.partitions defaults to 50 in Kafka, 8 here)
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_state_log_num_partitions: int = 8
    transaction_state_log_replication_factor: int = 3
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000

    # SASL authentication (KIP-43, KIP-152, KIP-368; litemq.security.sasl). Each may also be set per
    # listener: listener.name.<listener>.<setting>, the JAAS configs also per mechanism:
    # listener.name.<listener>.<mechanism lower case>.sasl.jaas.config (Kafka's form).
    sasl_enabled_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    """Mechanisms SASL_PLAINTEXT/SASL_SSL listeners offer. Kafka's default is GSSAPI (Kerberos),
    which LiteMQ does not implement (nor OAUTHBEARER)."""
    plain_sasl_jaas_config: str = ""
    """JAAS config whose ``user_NAME="PASSWORD"`` options are the SASL/PLAIN users of every
    listener without its own ``listener.name.<listener>.plain.sasl.jaas.config`` (LiteMQ form)."""
    sasl_jaas_config: str = ""
    """Fallback JAAS config for PLAIN users when no ``plain.sasl.jaas.config`` applies. Kafka
    brokers need the listener and mechanism prefix; LiteMQ also takes the bare key."""
    connections_max_reauth_ms: int = 0
    """KIP-368: > 0 gives SASL sessions this lifetime (SaslAuthenticate v1+ tells the client),
    after which a connection must re-authenticate or be closed at its next request; 0 = never."""
    connection_failed_authentication_delay_ms: int = 100
    """A failed authentication is answered and its connection closed this long after the failing
    request (Kafka's default 100 ms; slows password guessing)."""

    # authorization (KIP-11 ACLs; litemq.security.authorizer)
    authorizer_class_name: str = ""
    """Empty (Kafka's default): no authorizer, every request is allowed and the ACL APIs answer
    SECURITY_DISABLED. Any non-empty value (e.g. Kafka's
    ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``) enables LiteMQ's StandardAuthorizer
    with ACLs stored in the cluster metadata."""
    super_users: str = ""
    """``User:admin;User:bob``: principals allowed every operation whatever the ACLs say."""
    allow_everyone_if_no_acl_found: bool = False
    """When no ACL matches a resource at all, allow (true) or deny (false, Kafka's default)."""

    extra: dict[str, str] = field(default_factory=dict)

    @property
    def advertised_listener(self) -> tuple[str, int]:
        """(host, port) clients are told to connect to."""
        return (self.advertised_host or self.listen_host, self.advertised_port or self.listen_port)

    @property
    def clustered(self) -> bool:
        """True when this broker is one of a replicated cluster (``--peers`` given)."""
        return bool(self.controller_quorum_voters.strip())

    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """``controller.quorum.voters`` parsed: node id -> (host, rpc port).

        Raises:
            ValueError: an item is not ``ID@HOST:PORT``.
        """
        out: dict[int, tuple[str, int]] = {}
        for item in self.controller_quorum_voters.split(","):
            item = item.strip()
            if not item:
                continue
            node, sep, addr = item.partition("@")
            if not sep or not node.strip().isdigit():
                raise ValueError(f"bad peer {item!r}: expected ID@HOST:PORT")
            out[int(node)] = parse_host_port(addr)
        return out

    def log_config_defaults(self) -> dict[str, str]:
        """Broker-wide defaults of topic configs, as Kafka topic config names -> string values."""
        out = {
            "segment.bytes": str(self.log_segment_bytes),
            "segment.ms": str(self.log_roll_ms),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "cleanup.policy": self.log_cleanup_policy,
            "max.message.bytes": str(self.message_max_bytes),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "segment.index.bytes": str(self.log_segment_index_bytes),
            "min.insync.replicas": str(self.min_insync_replicas),
        }
        if self.log_flush_interval_messages is not None:
            out["flush.messages"] = str(self.log_flush_interval_messages)
        if self.log_flush_interval_ms is not None:
            out["flush.ms"] = str(self.log_flush_interval_ms)
        return out

    # ------------------------------------------------------------------ loading
    def apply(self, settings: dict[str, str]) -> None:
        """Apply Kafka-named settings (``"num.partitions": "3"``).

        Raises:
            ValueError: unknown name or a value of the wrong type, with the name in the message.
        """
        for raw_key, raw_value in settings.items():
            key = raw_key.strip()
            value = str(raw_value).strip()
            if key in _ALIASES:
                try:
                    _ALIASES[key](self, value)
                except ValueError:
                    raise ValueError(f"bad value for {key}: {value!r} (expected an integer)") from None
                for attr in _ALIAS_TARGETS.get(key, ()):
                    _check_bound(attr, getattr(self, attr), key, value)
                continue
            attr = key.replace(".", "_").replace("-", "_")
            if attr in ("extra",) or attr not in _FIELD_TYPES:
                raise ValueError(f"unknown broker setting {key!r}")
            try:
                setattr(self, attr, _convert(_FIELD_TYPES[attr], value))
            except ValueError as exc:
                raise ValueError(f"bad value for {key}: {value!r} ({exc})") from None
            _check_bound(attr, getattr(self, attr), key, value)

    @classmethod
    def from_sources(
        cls, config_file: Path | None = None, overrides: dict[str, str] | None = None, **kwargs
    ) -> "BrokerConfig":
        """Defaults, then ``config_file`` (Java properties), then ``overrides``, then kwargs."""
        cfg = cls()
        if config_file is not None:
            cfg.apply(read_properties(config_file))
        if overrides:
            cfg.apply(overrides)
        for k, v in kwargs.items():
            if v is not None:
                setattr(cfg, k, v)
        cfg.data_dir = Path(cfg.data_dir)
        check_bounds(cfg)
        return cfg


def _convert(kind: str, value: str):
    if "bool" in kind:
        low = value.lower()
        if low not in ("true", "false"):
            raise ValueError("expected true or false")
        return low == "true"
    if "int" in kind:
        if "None" in kind and value.lower() in ("", "none", "null"):
            return None
        return int(value)
    if "Path" in kind:
        return Path(value)
    return value


_FIELD_TYPES = {f.name: str(f.type) for f in dataclasses.fields(BrokerConfig)}

SETTING_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    # Kafka name: (least, most) allowed value, inclusive; None = no bound. Kafka's own ConfigDef
    # validators (KafkaConfig, ServerLogConfigs, GroupCoordinatorConfig, TransactionLogConfigs in
    # 3.9) where it has one; LiteMQ's where Kafka has none but the value would break the broker
    # (0 partitions: a produce hangs; a 0 interval spins). The log.* ones equal the matching
    # topic config's bounds in litemq.storage.config.LogConfig (a test checks they agree).
    "node.id": (0, None),
    "listen.port": (0, 65535),
    "advertised.port": (1, 65535),
    "rpc.listen.port": (0, 65535),
    "num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "default.replication.factor": (1, RAFT_MAX_VOTERS),
    "message.max.bytes": (0, None),
    "min.insync.replicas": (1, None),
    "log.segment.bytes": (14, None),  # LegacyRecord.RECORD_OVERHEAD_V0
    "log.roll.ms": (1, None),
    "log.retention.ms": (-1, None),  # -1: no time limit
    "log.retention.bytes": (-1, None),  # -1: no size limit
    "log.flush.interval.messages": (1, None),
    "log.flush.interval.ms": (0, None),
    "log.index.interval.bytes": (0, None),
    "log.segment.index.bytes": (32, None),
    "log.retention.check.interval.ms": (1, None),
    "log.cleaner.backoff.ms": (0, None),
    "offsets.topic.num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "offsets.retention.minutes": (1, None),
    "group.min.session.timeout.ms": (0, None),
    "group.max.session.timeout.ms": (0, None),
    "group.initial.rebalance.delay.ms": (0, None),
    "offsets.retention.check.interval.ms": (1, None),
    "offsets.commit.timeout.ms": (1, None),
    "offset.metadata.max.bytes": (0, None),
    "broker.heartbeat.interval.ms": (1, None),
    "broker.session.timeout.ms": (1, None),
    "raft.tick.ms": (1, None),
    "raft.election.timeout.ms": (1, None),
    "metadata.snapshot.interval.entries": (1, None),
    "leader.imbalance.check.interval.ms": (1, None),
    "transactional.id.expiration.ms": (1, None),
    "transaction.state.log.num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "transaction.state.log.replication.factor": (1, RAFT_MAX_VOTERS),
    "transaction.max.timeout.ms": (1, None),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (1, None),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (1, None),
    "request.timeout.ms": (1, None),
    "connections.max.reauth.ms": (0, None),
    "connection.failed.authentication.delay.ms": (0, None),
}
"""Allowed range of every numeric broker setting, by Kafka name."""
_BOUNDS_BY_ATTR = {name.replace(".", "_"): (name, bounds) for name, bounds in SETTING_BOUNDS.items()}
_ALIAS_TARGETS = {"log.retention.hours": ("log_retention_ms",), "log.retention.minutes": ("log_retention_ms",),
                  "log.roll.hours": ("log_roll_ms",), "broker.id": ("node_id",)}
"""Aliases whose value lands in a bounded setting (checked with the name the user typed)."""


def _check_bound(attr: str, value, typed_key: str | None = None, typed_value: str | None = None) -> None:
    """Raise ValueError (Kafka's wording, naming ``typed_key`` or the Kafka name) when ``value``
    of setting ``attr`` is outside :data:`SETTING_BOUNDS`; None (unset optional) always passes."""
    entry = _BOUNDS_BY_ATTR.get(attr)
    if entry is None or value is None or isinstance(value, bool):
        return
    name, (lo, hi) = entry
    if (lo is None or value >= lo) and (hi is None or value <= hi):
        return
    if lo is not None and hi is not None:
        rule = f"value must be between {lo} and {hi}"
    elif lo is not None:
        rule = f"value must be at least {lo}"
    else:
        rule = f"value must be at most {hi}"
    shown = typed_value if typed_value is not None else value
    raise ValueError(f"invalid value {shown} for configuration {typed_key or name}: {rule}")


def check_bounds(cfg: BrokerConfig) -> None:
    """Check every numeric setting of ``cfg`` against :data:`SETTING_BOUNDS` (for values set
    as attributes, e.g. ``litemq.Broker(num_partitions=0)`` or ``serve --num-partitions``).

    Raises:
        ValueError: ``invalid value V for configuration NAME: value must be ...`` (the first).
    """
    for attr in _BOUNDS_BY_ATTR:
        _check_bound(attr, getattr(cfg, attr))


def _set_hours(attr: str, factor: int):
    def setter(cfg: BrokerConfig, value: str) -> None:
        n = int(value)
        # Kafka (KafkaConfig.logRetentionTimeMillis): a negative retention means no limit (-1)
        setattr(cfg, attr, -1 if n < 0 and attr == "log_retention_ms" else n * factor)

    return setter


def _set_listener(host_attr: str, port_attr: str):
    def setter(cfg: BrokerConfig, value: str) -> None:
        host, port = parse_host_port(value.split("://")[-1].split(",")[0])
        setattr(cfg, host_attr, host)
        setattr(cfg, port_attr, port)

    return setter


_ALIASES = {
    "log.dirs": lambda cfg, v: setattr(cfg, "data_dir", Path(v.split(",")[0])),
    "log.dir": lambda cfg, v: setattr(cfg, "data_dir", Path(v)),
    "log.retention.hours": _set_hours("log_retention_ms", 3600 * 1000),
    "log.retention.minutes": _set_hours("log_retention_ms", 60 * 1000),
    "log.roll.hours": _set_hours("log_roll_ms", 3600 * 1000),
    "listeners": _set_listener("listen_host", "listen_port"),
    "advertised.listeners": _set_listener("advertised_host", "advertised_port"),
    "broker.id": lambda cfg, v: setattr(cfg, "node_id", int(v)),
}


def parse_host_port(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """Parse ``"host:port"`` (or ``"[::1]:port"``, or ``"host"``) into (host, port).

    Raises:
        ValueError: the port is not an integer in 0..65535.
    """
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":") or str(default_port)
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, str(default_port)
    port_num = int(port)
    if not 0 <= port_num <= 65535:
        raise ValueError(f"port out of range: {port_num}")
    return host or "127.0.0.1", port_num


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java-style ``.properties`` file (``key=value`` or ``key: value``, ``#`` comments)."""
    out: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"{path}: cannot parse line {line!r}")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out
