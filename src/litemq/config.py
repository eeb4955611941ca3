"""Broker settings, with Kafka's names (``num.partitions``, ``message.max.bytes``, ...).

A :class:`BrokerConfig` is built from defaults, then a Java-style properties file
(``--config FILE``), then ``--override key=value`` flags, in that order. Per-topic log settings
(``retention.ms``, ``segment.bytes``, ...) live in :class:`litemq.storage.config.LogConfig`;
the broker-wide ``log.*`` defaults here feed it.

Hard bounds that protect the process are in :mod:`litemq.limits`, not here.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from litemq.limits import (
    MAX_LISTENERS_PER_BROKER,
    MAX_PARTITIONS_PER_TOPIC,
    MAX_RACK_ID_CHARS,
    MIN_SEGMENT_BYTES,
    RAFT_MAX_VOTERS,
)

DEFAULT_PORT = 9092
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
DEFAULT_HTTP_PORT = 8082
"""The HTTP port's default (Confluent REST Proxy's and Redpanda's HTTP proxy port)."""
DEFAULT_HTTP_LISTEN = f"127.0.0.1:{DEFAULT_HTTP_PORT}"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's security protocols (``org.apache.kafka.common.security.auth.SecurityProtocol``)."""
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
"""Security protocols whose connections are TLS."""
DEFAULT_SECURITY_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SSL_CLIENT_AUTH_VALUES = ("none", "requested", "required")
LISTENER_PREFIX = "listener.name."
"""Per-listener settings: ``listener.name.<listener name, lower case>.<setting>`` (Kafka)."""

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""The one ``replica.selector.class`` LiteMQ implements (Kafka's class name, KIP-392)."""

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
"""Kafka's ``EndPoint`` URI pattern: ``NAME://host:port`` (``[v6addr]`` allowed, empty host = all)."""


@dataclass(frozen=True)
class ListenerSpec:
    """One ``listeners`` (or ``advertised.listeners``) entry, Kafka's ``EndPoint``.

    ``name`` is upper case (Kafka normalises listener names), ``host`` may be ``""`` (bind every
    interface), ``port`` 0 means an ephemeral port picked at bind time, ``security_protocol`` is
    one of :data:`SECURITY_PROTOCOLS` (from ``listener.security.protocol.map``).
    """

    name: str
    host: str
    port: int
    security_protocol: str


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
    log_page_cache_retain_bytes: int = -1
    """LiteMQ setting, not Kafka's. -1 (the default, Kafka's behaviour): the OS keeps written log
    bytes in its page cache as it sees fit. N >= 0: each fsync of a partition log drops what it
    made durable from the page cache except the log's last N bytes (``posix_fadvise(DONTNEED)``),
    so the logs' memory footprint stays bounded. For virtual machines where growing the page cache
    is costly (free memory returned to the host, first touches slow: docs/architecture.md); reads of
    older bytes (lagging consumers, catching-up replicas) then come from the disk. Read at start."""

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
    # KIP-848 consumer groups (Kafka 4.x GroupCoordinatorConfig defaults)
    group_consumer_session_timeout_ms: int = 45_000
    """A consumer-protocol member that sends no ConsumerGroupHeartbeat for this long is removed."""
    group_consumer_heartbeat_interval_ms: int = 5000
    """The heartbeat interval the coordinator tells consumer-protocol members to use."""
    group_consumer_max_size: int = 2_147_483_647
    """Members of one consumer-protocol group (GROUP_MAX_SIZE_REACHED beyond; also capped by
    ``limits.MAX_GROUP_MEMBERS``)."""
    group_consumer_assignors: str = "uniform,range"
    """Server-side assignors, comma separated; the first is the default (Kafka: uniform, range)."""
    # KIP-932 share groups (Kafka 4.1 GroupConfig / ShareGroupConfig defaults)
    group_share_session_timeout_ms: int = 45_000
    """A share-group member that sends no ShareGroupHeartbeat for this long is removed."""
    group_share_heartbeat_interval_ms: int = 5000
    """The heartbeat interval the coordinator tells share-group members to use."""
    group_share_max_size: int = 200
    """Members of one share group (GROUP_MAX_SIZE_REACHED beyond)."""
    group_share_record_lock_duration_ms: int = 30_000
    """How long a record delivered to a share-group member stays locked to it (then it is
    delivered again)."""
    group_share_delivery_count_limit: int = 5
    """Deliveries of one record to a share group before it is archived (never delivered again)."""
    group_share_partition_max_record_locks: int = 2000
    """In-flight records (SPSO..SPEO) of one share-partition."""
    group_share_max_share_sessions: int = 2000
    """Share sessions one broker keeps (a new one beyond: SHARE_SESSION_LIMIT_REACHED)."""
    client_telemetry_enable: bool = False
    """KIP-714: advertise GetTelemetrySubscriptions and PushTelemetry, so Kafka clients push the
    metrics the ``client-metrics`` subscriptions ask for, and serve them on ``/metrics`` (Kafka
    needs a metrics reporter plugin with a ``ClientTelemetry`` receiver for this)."""
    telemetry_max_bytes: int = 1_048_576
    """Largest metrics payload one PushTelemetry may carry, compressed or not (Kafka
    ``telemetry.max.bytes``)."""
    share_coordinator_state_topic_num_partitions: int = 50
    """Partitions of ``__share_group_state`` (created on first use)."""
    share_coordinator_state_topic_replication_factor: int = 3
    """Replicas of ``__share_group_state`` (at most the live brokers)."""
    share_auto_offset_reset: str = "latest"
    """Where a share group starts reading a partition it has no state for: ``latest``,
    ``earliest`` or ``by_duration:<PnDTnHnMn.nS>``; the default of Kafka's group config of that
    name (a group's own value wins, ``litemq config --group``)."""
    share_isolation_level: str = "read_uncommitted"
    """``read_committed`` delivers only committed transactional records; the default of Kafka's
    group config of that name (a group's own value wins)."""
    offset_metadata_max_bytes: int = 4096

    # replicated cluster (litemq.cluster): empty ``controller_quorum_voters`` = single node
    controller_quorum_voters: str = ""
    """``1@host:rpcport,2@host:rpcport,...`` (Kafka's name; ``--peers``): the metadata voters."""
    controller_quorum_bootstrap_servers: str = ""
    """``host:rpcport,...`` (Kafka's name, KIP-853; ``--join``): RPC addresses of brokers of a
    running cluster that this broker joins as an observer (a metadata learner) when it is not
    one of ``controller.quorum.voters``; ``litemq cluster add-controller`` then makes it a voter."""
    process_roles: str = "broker,controller"
    """Kafka's ``process.roles``: ``broker,controller`` (may be a metadata voter) or ``broker``
    (an observer only: AddRaftVoter refuses it). A controller-only node is not supported."""
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
    leader_imbalance_check_interval_ms: int = 300_000
    """How often a leader checks whether to hand leadership back to its preferred replica:
    Kafka's default, 5 minutes (the test harness uses 5 s, ``HARNESS_OVERRIDES``)."""
    # follower fetching (KIP-392): racks and the replica selector (Kafka names, read-only)
    broker_rack: str | None = None
    """The rack (availability zone) of this broker, registered with the cluster metadata and
    shown in Metadata/DescribeCluster answers; None (Kafka's default): no rack."""
    replica_lag_time_max_ms: int = 30_000
    """A follower whose log has not reached its leader's high watermark for this long is not
    offered to consumers as a preferred read replica (Kafka's setting, which also bounds its ISR;
    LiteMQ's ISR is the Raft leader's live quorum)."""
    replica_selector_class: str | None = None
    """None (Kafka's default): consumers fetch from leaders. :data:`RACK_AWARE_REPLICA_SELECTOR`:
    a leader names an in-sync follower in the consumer's rack (FetchRequest v11+ ``rack_id``,
    the client's ``client.rack``) as its ``preferred_read_replica``. Followers serve consumer
    fetches v11+ (up to their high watermark) whatever this says, as Kafka's do."""

    # transactions (Kafka names; transaction.state.log.num.partitions defaults to 50 in Kafka, 8 here)
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    producer_id_expiration_ms: int = 24 * 3600 * 1000
    """Kafka's ``producer.id.expiration.ms``: a producer's state (its last sequences and epoch) is
    forgotten once its last batch is this old and it has no transaction ongoing."""
    producer_id_expiration_check_interval_ms: int = 10 * 60 * 1000
    """Kafka's ``producer.id.expiration.check.interval.ms``: how often expired producers are removed."""
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
    """Mechanisms SASL_PLAINTEXT/SASL_SSL listeners offer (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
    OAUTHBEARER). Kafka's default is GSSAPI (Kerberos), which LiteMQ does not implement."""
    oauthbearer_sasl_jaas_config: str = ""
    """JAAS config of OAUTHBEARER on listeners without their own
    ``listener.name.<listener>.oauthbearer.sasl.jaas.config`` (Kafka's form; this bare key is
    LiteMQ's): ``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
    [unsecuredValidatorRequiredScope="..."] ...;``. Empty: the login module without options."""
    sasl_server_callback_handler_class: str = ""
    """How OAUTHBEARER tokens are checked (Kafka sets it per listener and mechanism:
    ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``). Empty or
    ``...internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler``: unsigned tokens,
    for development only (Kafka's default); ``org.apache.kafka.common.security.oauthbearer.
    OAuthBearerValidatorCallbackHandler``: signed JWTs checked against
    ``sasl.oauthbearer.jwks.endpoint.url`` (KIP-768)."""
    sasl_oauthbearer_jwks_endpoint_url: str = ""
    """The OAuth/OIDC provider's JSON Web Key Set: an https, http or file URL (KIP-768)."""
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = 3_600_000
    """Keys fetched longer ago than this are fetched again before use (Kafka's default: 1 hour)."""
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = 100
    """After a failed JWKS fetch, the next attempt waits at least this long."""
    sasl_oauthbearer_expected_audience: str = ""
    """Comma-separated audiences; a token's ``aud`` must hold one of them. Empty: not checked."""
    sasl_oauthbearer_expected_issuer: str = ""
    """A token's ``iss`` must equal this. Empty: not checked."""
    sasl_oauthbearer_sub_claim_name: str = "sub"
    """The claim holding a signed token's principal name."""
    sasl_oauthbearer_scope_claim_name: str = "scope"
    """The claim holding a signed token's scope."""
    sasl_oauthbearer_clock_skew_seconds: int = 30
    """Clock difference tolerated between the provider and the broker for ``exp``/``iat``/``nbf``."""
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
    max_incremental_fetch_session_cache_slots: int = 1000
    """Incremental fetch sessions (KIP-227) this broker keeps at once (Kafka's default 1000; 0:
    every Fetch is a full one). :mod:`litemq.broker.fetch_sessions`."""
    max_connections: int = 2**31 - 1
    """Client connections this broker serves at once, over all listeners (Kafka's default: no
    bound; LiteMQ never serves more than ``limits.MAX_CONNECTIONS``). Dynamic."""
    max_connections_per_ip: int = 2**31 - 1
    """Client connections one IP address may have open at once. Dynamic."""
    max_connections_per_ip_overrides: str = ""
    """Per-IP exceptions, ``IP:count[,IP:count...]`` (``127.0.0.1:200``). Dynamic."""

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

    # listeners and TLS (Kafka names; docs/security.md). Empty ``listeners``: one PLAINTEXT
    # listener on listen_host:listen_port (``--listen``), advertised as advertised_host/port.
    listeners: str = ""
    """``NAME://host:port,...`` (port 0 = ephemeral, empty host = every interface)."""
    advertised_listeners: str = ""
    """Same format; what clients are told (per listener). Empty = ``listeners``."""
    listener_security_protocol_map: str = DEFAULT_SECURITY_PROTOCOL_MAP
    """``NAME:PROTOCOL,...``: the security protocol of each listener name."""
    inter_broker_listener_name: str = ""
    """The listener whose security settings broker-to-broker traffic uses (exclusive with
    ``security.inter.broker.protocol``; both empty = PLAINTEXT)."""
    security_inter_broker_protocol: str = ""
    """Kafka's default is PLAINTEXT; SSL or SASL_SSL make the RPC port mutual TLS."""
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""
    """PEM file with this broker's certificate chain and private key."""
    ssl_key_password: str = ""
    """Password of an encrypted private key in the keystore (empty: not encrypted)."""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    """PEM CA bundle that verifies peers (empty: the system's CAs)."""
    ssl_client_auth: str = "none"
    """none | requested | required: does an SSL listener ask clients for a certificate."""
    ssl_endpoint_identification_algorithm: str = "https"
    """``https``: a broker dialling a peer over TLS checks the peer's certificate matches its
    host; empty: no hostname check (Kafka's default is https)."""
    listener_overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    """``listener.name.<name>.<setting>`` values: upper-case listener name -> setting -> value."""

    # observability (litemq.broker.http, docs/operations.md): /metrics, the web console and the
    # REST API (Confluent REST Proxy v3 paths) on one HTTP port. LiteMQ setting, not Kafka's.
    http_listen: str = DEFAULT_HTTP_LISTEN
    """``HOST:PORT`` of the HTTP port (port 0 = ephemeral), or ``off``/empty for none. On by default
    on loopback, like Redpanda's admin port; if the default address is taken the broker logs a
    warning and runs without it, while an address set explicitly must be free."""
    http_ssl_enabled: bool = False
    """Serve the HTTP port as HTTPS with the broker-wide ``ssl.keystore.location`` (and
    ``ssl.key.password``): Basic passwords and Bearer tokens then cross the network encrypted."""

    extra: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ listeners
    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` parsed: upper-case listener name -> protocol.

        Raises:
            ValueError: an item is not ``NAME:PROTOCOL`` or names an unknown protocol.
        """
        out: dict[str, str] = {}
        for item in self.listener_security_protocol_map.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, proto = item.partition(":")
            proto = proto.strip().upper()
            if not sep or not name.strip():
                raise ValueError(f"listener.security.protocol.map: bad item {item!r}: expected NAME:PROTOCOL")
            if proto not in SECURITY_PROTOCOLS:
                raise ValueError(f"listener.security.protocol.map: unknown security protocol {proto!r} for "
                                 f"listener {name.strip()} (expected one of {', '.join(SECURITY_PROTOCOLS)})")
            out[name.strip().upper()] = proto
        return out

    def listener_specs(self) -> list[ListenerSpec]:
        """The listeners to bind, in configuration order (the first is the default one).

        Without ``listeners`` this is one PLAINTEXT listener on ``listen_host:listen_port``.

        Raises:
            ValueError (naming ``listeners`` or ``listener.security.protocol.map``): unparsable
                entry, a listener name without a security protocol, two listeners with one name
                or one (non-zero) port.
        """
        protocols = self.security_protocol_map()
        if not self.listeners.strip():
            return [ListenerSpec("PLAINTEXT", self.listen_host, self.listen_port,
                                 _protocol_of("listeners", "PLAINTEXT", protocols))]
        specs = _parse_endpoints("listeners", self.listeners, protocols)
        if len(specs) > MAX_LISTENERS_PER_BROKER:
            raise ValueError(f"listeners: {len(specs)} listeners, at most {MAX_LISTENERS_PER_BROKER}")
        ports = [s.port for s in specs if s.port != 0]
        if len(set(ports)) != len(ports):
            raise ValueError(f"listeners: each listener must have a different port, listeners: {self.listeners}")
        return specs

    def advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """What clients are told per listener: upper-case name -> (host, port); port 0 means
        "the port that listener is bound to" (the broker fills it in).

        ``advertised.listeners`` when given (a subset of ``listeners``), else every listener
        with its own host (an empty host advertises this machine's name); ``advertised_host``/
        ``advertised_port`` (``--advertise``) replace the first listener's when
        ``advertised.listeners`` is not given.

        Raises:
            ValueError: naming ``advertised.listeners`` (or ``listeners``).
        """
        specs = self.listener_specs()
        legacy = not self.listeners.strip()
        if self.advertised_listeners.strip():
            names = [s.name for s in specs]
            adv = _parse_endpoints("advertised.listeners", self.advertised_listeners, self.security_protocol_map())
            out = {}
            for a in adv:
                if a.name not in names:
                    raise ValueError(f"advertised.listeners: listener {a.name} is not one of listeners "
                                     f"({', '.join(names)}); advertised listener names must be a subset")
                out[a.name] = (_advertisable("advertised.listeners", a.host), a.port)
            return out
        out = {}
        for i, s in enumerate(specs):
            host, port = s.host, s.port
            if i == 0 and (self.advertised_host or self.advertised_port):
                host, port = self.advertised_host or host, self.advertised_port or port
            elif not legacy:
                host = _advertisable("listeners", host)
            out[s.name] = (host, port)
        return out

    def inter_broker_listener(self) -> tuple[str, str]:
        """(listener name, security protocol) of broker-to-broker traffic (the RPC port).

        Raises:
            ValueError: both ``inter.broker.listener.name`` and ``security.inter.broker.protocol``
                set, an unknown protocol, or a listener name without a protocol.
        """
        protocols = self.security_protocol_map()
        name = self.inter_broker_listener_name.strip().upper()
        proto = self.security_inter_broker_protocol.strip().upper()
        if name and proto:
            raise ValueError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
        if name:
            return name, _protocol_of("inter.broker.listener.name", name, protocols)
        proto = proto or "PLAINTEXT"
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.inter.broker.protocol: unknown security protocol {proto!r} "
                             f"(expected one of {', '.join(SECURITY_PROTOCOLS)})")
        return proto, proto

    @property
    def inter_broker_tls(self) -> bool:
        """True when the RPC port runs mutual TLS (inter-broker protocol SSL or SASL_SSL)."""
        return self.inter_broker_listener()[1] in TLS_PROTOCOLS

    def listener_setting(self, listener_name: str | None, key: str) -> str:
        """The value of Kafka setting ``key`` (``"ssl.keystore.location"``) for a listener:
        ``listener.name.<listener>.<key>`` when set, else the broker-wide value, as a string
        (``""`` for an unset optional one).

        Raises:
            ValueError: ``key`` is not a broker setting.
        """
        if listener_name is not None:
            own = self.listener_overrides.get(listener_name.upper(), {})
            if key in own:
                return own[key]
        attr = key.replace(".", "_").replace("-", "_")
        if attr not in _FIELD_TYPES or attr in _NOT_SETTINGS:
            raise ValueError(f"unknown broker setting {key!r}")
        value = getattr(self, attr)
        return "" if value is None else str(value)

    def validate(self) -> None:
        """Check listeners, advertised listeners, the inter-broker listener and each TLS
        listener's ``ssl.*`` settings (without reading the files; the broker does at start).

        Raises:
            ValueError: the first problem found, naming its setting.
        """
        specs = self.listener_specs()
        advertised = self.advertised_endpoints()
        for s in specs:
            if s.security_protocol in TLS_PROTOCOLS:
                self._validate_ssl(s.name, f"{s.security_protocol} listener {s.name}")
        name, proto = self.inter_broker_listener()
        # Kafka also demands the default (PLAINTEXT) inter-broker listener; LiteMQ's broker-to-broker
        # traffic uses its own RPC port, so only an explicitly chosen one must exist.
        explicit = self.security_inter_broker_protocol.strip() or self.inter_broker_listener_name.strip()
        if explicit and name not in advertised:
            where = "security.inter.broker.protocol" if self.security_inter_broker_protocol.strip() \
                else "inter.broker.listener.name"
            raise ValueError(f"{where}: inter.broker.listener.name must be a listener name defined in "
                             f"advertised.listeners; {name} is not one of {', '.join(advertised)}")
        if proto in TLS_PROTOCOLS:
            self._validate_ssl(name, f"inter-broker listener {name}")
        if self.replica_selector_class and self.replica_selector_class != RACK_AWARE_REPLICA_SELECTOR:
            raise ValueError(f"replica.selector.class: unknown class {self.replica_selector_class!r} (LiteMQ "
                             f"implements {RACK_AWARE_REPLICA_SELECTOR} only)")
        if self.broker_rack is not None and len(self.broker_rack) > MAX_RACK_ID_CHARS:
            raise ValueError(f"broker.rack: at most {MAX_RACK_ID_CHARS} characters")
        roles = self.roles()
        if "broker" not in roles:
            raise ValueError(f"process.roles: {self.process_roles!r} is not supported (LiteMQ runs broker or "
                             "broker,controller: every node serves clients)")
        voters = self.quorum_voters()
        if self.node_id in voters and "controller" not in roles:
            raise ValueError(f"process.roles: node {self.node_id} is one of controller.quorum.voters, so its roles "
                             "must include controller")
        self.quorum_bootstrap_servers()  # parsable

    def roles(self) -> frozenset[str]:
        """``process.roles`` parsed (ValueError: an unknown role)."""
        roles = frozenset(r.strip() for r in self.process_roles.split(",") if r.strip())
        bad = roles - {"broker", "controller"}
        if bad or not roles:
            raise ValueError(f"process.roles: {self.process_roles!r}: roles are broker and controller")
        return roles

    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        """``controller.quorum.bootstrap.servers`` parsed: [(host, rpc port), ...].

        Raises:
            ValueError: an item is not ``HOST:PORT``.
        """
        out = []
        for item in self.controller_quorum_bootstrap_servers.split(","):
            item = item.strip()
            if item:
                if ":" not in item:
                    raise ValueError(f"controller.quorum.bootstrap.servers: bad address {item!r}: expected HOST:PORT")
                out.append(parse_host_port(item))
        return out

    def _validate_ssl(self, listener: str, what: str) -> None:
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if self.listener_setting(listener, key).upper() != "PEM":
                raise ValueError(f"{key}: only PEM is supported ({what}), not "
                                 f"{self.listener_setting(listener, key)!r}")
        if not self.listener_setting(listener, "ssl.keystore.location"):
            raise ValueError(f"ssl.keystore.location is required by the {what}: a PEM file holding the "
                             "certificate chain and the private key")
        auth = self.listener_setting(listener, "ssl.client.auth").lower()
        if auth not in SSL_CLIENT_AUTH_VALUES:
            raise ValueError(f"ssl.client.auth: {auth!r} is not one of {', '.join(SSL_CLIENT_AUTH_VALUES)}")

    @property
    def clustered(self) -> bool:
        """True when this broker is one of a replicated cluster (``--peers`` or ``--join`` given)."""
        return bool(self.controller_quorum_voters.strip() or self.controller_quorum_bootstrap_servers.strip())

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
            if key.lower().startswith(LISTENER_PREFIX):
                self._apply_listener_setting(key, value)
                continue
            attr = key.replace(".", "_").replace("-", "_")
            if attr in _NOT_SETTINGS or attr not in _FIELD_TYPES:
                raise ValueError(f"unknown broker setting {key!r}")
            try:
                setattr(self, attr, _convert(_FIELD_TYPES[attr], value))
                if attr == "max_connections_per_ip_overrides":
                    parse_ip_overrides(value)
            except ValueError as exc:
                raise ValueError(f"bad value for {key}: {value!r} ({exc})") from None
            _check_bound(attr, getattr(self, attr), key, value)

    def _apply_listener_setting(self, key: str, value: str) -> None:
        """``listener.name.<listener>.<setting>``: ``<setting>`` is a broker setting, optionally
        after a SASL mechanism (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``)."""
        listener, _, setting = key[len(LISTENER_PREFIX):].partition(".")
        if not listener or not setting:
            raise ValueError(f"bad listener setting {key!r}: expected listener.name.<listener>.<setting>")
        candidates = [setting]
        if "." in setting:
            candidates.append(setting.split(".", 1)[1])
        for cand in candidates:
            attr = cand.replace(".", "_").replace("-", "_")
            if attr in _FIELD_TYPES and attr not in _NOT_SETTINGS:
                try:
                    _convert(_FIELD_TYPES[attr], value)
                except ValueError as exc:
                    raise ValueError(f"bad value for {key}: {value!r} ({exc})") from None
                self.listener_overrides.setdefault(listener.upper(), {})[setting] = value
                return
        raise ValueError(f"unknown broker setting {key!r}")

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
    "log.segment.bytes": (MIN_SEGMENT_BYTES, None),  # Kafka 4 (KIP-1030)
    "log.roll.ms": (1, None),
    "log.retention.ms": (-1, None),  # -1: no time limit
    "log.retention.bytes": (-1, None),  # -1: no size limit
    "log.flush.interval.messages": (1, None),
    "log.flush.interval.ms": (0, None),
    "log.index.interval.bytes": (0, None),
    "log.segment.index.bytes": (32, None),
    "log.retention.check.interval.ms": (1, None),
    "log.cleaner.backoff.ms": (0, None),
    "log.page.cache.retain.bytes": (-1, None),  # -1: the OS decides
    "offsets.topic.num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "offsets.retention.minutes": (1, None),
    "group.min.session.timeout.ms": (0, None),
    "group.max.session.timeout.ms": (0, None),
    "group.initial.rebalance.delay.ms": (0, None),
    "offsets.retention.check.interval.ms": (1, None),
    "offsets.commit.timeout.ms": (1, None),
    "group.consumer.session.timeout.ms": (1, None),
    "group.consumer.heartbeat.interval.ms": (1, None),
    "group.consumer.max.size": (1, None),
    "group.share.session.timeout.ms": (1, None),
    "group.share.heartbeat.interval.ms": (1, None),
    "group.share.max.size": (1, 1000),
    "group.share.record.lock.duration.ms": (1000, 3_600_000),
    "group.share.delivery.count.limit": (2, 10),
    "group.share.partition.max.record.locks": (100, 10_000),
    "group.share.max.share.sessions": (1, None),
    "share.coordinator.state.topic.num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "telemetry.max.bytes": (1, 2**31 - 1),
    "share.coordinator.state.topic.replication.factor": (1, RAFT_MAX_VOTERS),
    "offset.metadata.max.bytes": (0, None),
    "broker.heartbeat.interval.ms": (1, None),
    "broker.session.timeout.ms": (1, None),
    "raft.tick.ms": (1, None),
    "raft.election.timeout.ms": (1, None),
    "metadata.snapshot.interval.entries": (1, None),
    "leader.imbalance.check.interval.ms": (1, None),
    "replica.lag.time.max.ms": (1, None),
    "transactional.id.expiration.ms": (1, None),
    "producer.id.expiration.ms": (1, None),
    "producer.id.expiration.check.interval.ms": (1, None),
    "transaction.state.log.num.partitions": (1, MAX_PARTITIONS_PER_TOPIC),
    "transaction.state.log.replication.factor": (1, RAFT_MAX_VOTERS),
    "transaction.max.timeout.ms": (1, None),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (1, None),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (1, None),
    "request.timeout.ms": (1, None),
    "connections.max.reauth.ms": (0, None),
    "max.connections": (0, 2**31 - 1),
    "max.incremental.fetch.session.cache.slots": (0, 2**31 - 1),
    "max.connections.per.ip": (0, 2**31 - 1),
    "connection.failed.authentication.delay.ms": (0, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (0, None),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (0, None),
    "sasl.oauthbearer.clock.skew.seconds": (0, None),
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


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``IP:count[,IP:count...]`` -> IP -> count (the count
    after the last ``:``, so IPv6 addresses work; blank -> ``{}``).

    Raises:
        ValueError: an item without ``:``, a count that is not an integer >= 0.
    """
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"{item!r} is not IP:count")
        n = int(count)
        if n < 0:
            raise ValueError(f"{item!r}: the count must be at least 0")
        out[host.strip().strip("[]")] = n
    return out


def check_bounds(cfg: BrokerConfig) -> None:
    """Check every numeric setting of ``cfg`` against :data:`SETTING_BOUNDS` (for values set
    as attributes, e.g. ``litemq.Broker(num_partitions=0)`` or ``serve --num-partitions``).

    Raises:
        ValueError: ``invalid value V for configuration NAME: value must be ...`` (the first).
    """
    for attr in _BOUNDS_BY_ATTR:
        _check_bound(attr, getattr(cfg, attr))
_NOT_SETTINGS = frozenset({"extra", "listener_overrides"})


def is_broker_setting(name: str) -> bool:
    """True when ``name`` (a Kafka name such as ``num.partitions`` or ``log.retention.hours``)
    is a setting of :class:`BrokerConfig` (or an alias of one)."""
    attr = name.replace(".", "_").replace("-", "_")
    return name in _ALIASES or (attr in _FIELD_TYPES and attr not in _NOT_SETTINGS)


def _protocol_of(key: str, name: str, protocols: dict[str, str]) -> str:
    proto = protocols.get(name)
    if proto is None:
        raise ValueError(f"{key}: no security protocol defined for listener {name} in "
                         f"listener.security.protocol.map ({', '.join(protocols) or 'empty'})")
    return proto


def _parse_endpoints(key: str, text: str, protocols: dict[str, str]) -> list[ListenerSpec]:
    """``NAME://host:port,...`` -> ListenerSpecs (distinct names). Raises ValueError naming ``key``."""
    out: list[ListenerSpec] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = _ENDPOINT.match(item)
        if not m:
            raise ValueError(f"{key}: cannot parse {item!r}: expected NAME://host:port")
        name, host, port = m.group(1).strip().upper(), m.group(2), int(m.group(3))
        if not name:
            raise ValueError(f"{key}: {item!r} has no listener name")
        if not 0 <= port <= 65535:
            raise ValueError(f"{key}: port out of range in {item!r}")
        if any(o.name == name for o in out):
            raise ValueError(f"{key}: each listener must have a different name, listeners: {text}")
        out.append(ListenerSpec(name, host, port, _protocol_of(key, name, protocols)))
    if not out:
        raise ValueError(f"{key}: no listener given")
    return out


def _advertisable(key: str, host: str) -> str:
    """The host clients are told for a listener bound to ``host`` (Kafka: an empty host
    advertises the canonical host name; the wildcard addresses cannot be advertised)."""
    if host in ("0.0.0.0", "::"):
        raise ValueError(f"{key}: advertised.listeners cannot use the nonroutable meta-address {host}. "
                         "Use a routable IP address (set advertised.listeners).")
    return host or socket.getfqdn()


def _set_hours(attr: str, factor: int):
    def setter(cfg: BrokerConfig, value: str) -> None:
        n = int(value)
        # Kafka (KafkaConfig.logRetentionTimeMillis): a negative retention means no limit (-1)
        setattr(cfg, attr, -1 if n < 0 and attr == "log_retention_ms" else n * factor)

    return setter


_ALIASES = {
    "log.dirs": lambda cfg, v: setattr(cfg, "data_dir", Path(v.split(",")[0])),
    "log.dir": lambda cfg, v: setattr(cfg, "data_dir", Path(v)),
    "log.retention.hours": _set_hours("log_retention_ms", 3600 * 1000),
    "log.retention.minutes": _set_hours("log_retention_ms", 60 * 1000),
    "log.roll.hours": _set_hours("log_roll_ms", 3600 * 1000),
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
    """Read a Java ``.properties`` file, as ``java.util.Properties.load`` does (the format of
    Kafka's ``server.properties`` and of its clients' ``--command-config`` files).

    Parsed by the ``javaproperties`` library: ``key=value``, ``key: value`` or ``key value``,
    ``#``/``!`` comments, a line ending in an odd number of backslashes continued on the next one
    (its leading whitespace dropped), and the ``\\t``/``\\n``/``\\uXXXX`` escapes. Values are
    stripped of surrounding whitespace. Returns key -> value; a key given twice keeps its last value.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not valid text (a bad ``\\u`` escape or undecodable bytes).
    """
    try:
        with open(path, encoding="utf-8") as fp:
            props = javaproperties.load(fp)
    except (UnicodeDecodeError, javaproperties.InvalidUEscapeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    return {key.strip(): value.strip() for key, value in props.items()}
