"""Every hard bound LiteMQ enforces, in one place, with its unit in its name.

Anything read from the wire (a length, a count) is checked against these before memory is
allocated for it. Configurable *defaults* (retention, segment size, ...) live in
:mod:`litemq.config`; these are the ceilings that protect the process.
"""

# --- framing (Kafka wire protocol: 4-byte big-endian size prefix) ---
MAX_REQUEST_FRAME_BYTES = 100 * 1024 * 1024
"""Largest request frame accepted (Kafka's socket.request.max.bytes default: 100 MiB)."""

MAX_CLIENT_ID_BYTES = 32 * 1024
"""Largest client id string in a request header."""

MAX_ARRAY_ELEMENTS = 1_000_000
"""Largest element count accepted for any array field in a request (also bounded by bytes left)."""

MAX_STRING_BYTES = 32 * 1024 * 1024
"""Largest string/bytes field accepted in a request (also bounded by the bytes left in the frame)."""

MAX_TAGGED_FIELDS = 1024
"""Largest number of tagged fields accepted in one struct."""

MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION = 1000
"""Requests decoded but not yet answered on one connection before reading pauses."""

MAX_CONNECTION_WRITE_BUFFER_BYTES = 64 * 1024 * 1024
"""Bytes queued for one connection before the broker stops reading from it (backpressure)."""

MAX_CONNECTIONS = 10_000
"""Concurrent client connections per broker."""

# --- records ---
RECORD_BATCH_HEADER_BYTES = 61
"""Size of the magic-2 record batch header (baseOffset .. recordsCount)."""

MAX_RECORDS_PER_BATCH = 1_000_000
"""Largest recordsCount accepted in one batch when records are decoded."""

MAX_DECOMPRESSED_BATCH_BYTES = 256 * 1024 * 1024
"""Largest decompressed size of one batch when records are decoded (compaction, tools)."""

# --- fetch ---
MAX_FETCH_WAIT_MS = 30_000
"""Longest long-poll wait honoured for a Fetch request."""

MAX_FETCH_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest fetch response assembled, whatever the client asks (first batch always whole)."""

FETCH_SESSION_EVICTION_MS = 120_000
"""A fetch session (KIP-227) unused for this long, or created this long ago, may give its cache
slot to a new session (Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``). How many sessions
a broker keeps is the setting ``max.incremental.fetch.session.cache.slots``."""

FETCH_SESSION_CACHE_MAX_PARTITIONS = 1_000_000
"""Partitions held in all of a broker's fetch sessions together (about 200 B each). A full Fetch
that would pass it gets no session (it is answered in full, session id 0); an incremental one that
would is answered FETCH_SESSION_ID_NOT_FOUND and its session closed, so the client goes back to
full fetches. Kafka bounds sessions by count only; this bounds their memory too."""

SHUTDOWN_TASKS_TIMEOUT_MS = 5_000
"""At shutdown a broker cancels its request tasks (long-poll fetches, acks=all produces,
connection writers) and waits this long at most for them to end."""

LOG_RETENTION_INITIAL_DELAY_MS = 30_000
"""A broker's first retention check comes this long after it starts (Kafka's LogManager
``InitialTaskDelayMs``), or after ``log.retention.check.interval.ms`` if that is shorter; then
one every ``log.retention.check.interval.ms``."""

# --- topics ---
MAX_PARTITIONS_PER_TOPIC = 10_000
MAX_TOPIC_NAME_CHARS = 249
"""Kafka's limit on topic name length."""

DESCRIBE_TOPIC_PARTITIONS_MAX_PARTITIONS = 2000
"""Most partitions one DescribeTopicPartitions response (KIP-966) describes, whatever its
``ResponsePartitionLimit`` asks; the rest is left to the next page (``NextCursor``). Kafka's broker
setting ``max.request.partition.size.limit`` and its default."""

# --- raft (litemq.raft) ---
RAFT_MAX_VOTERS = 64
"""Largest voter set of one Raft group (also bounds a decoded config entry)."""

RAFT_MAX_APPEND_BYTES = 1024 * 1024
"""Largest sum of entry payload bytes in one Append message (the first entry always goes whole)."""

RAFT_MAX_INFLIGHT_APPENDS = 256
"""Append messages with entries in flight to one follower before the leader pauses it."""

REPLICATION_THROTTLE_MAX_HELD_BYTES = 8 * 1024 * 1024
"""Record bytes of Appends a replication throttle holds back per (partition, replica); one more
is dropped (Raft resends it). Bounds the memory a slow throttled replica costs (cluster/throttle.py)."""

RAFT_MAX_APPLY_BYTES = 16 * 1024 * 1024
"""Largest sum of payload bytes of committed entries handed out in one Ready."""

RAFT_MAX_ELECTION_TIMEOUT_TICKS = 10_000
"""Upper bound on the configured election timeout, in ticks."""

RAFT_PROMOTE_MAX_LAG_OFFSETS = 1_000
"""A learner joining a partition's Raft group (reassignment) is promoted to voter once its
match offset is within this many offsets of the leader's last offset (Kafka's ISR join: caught
up to the leader; a little slack so a steady produce load does not hold the promotion back)."""

# --- consumer groups (litemq.coordinator) ---
MAX_GROUPS = 100_000
"""Groups one coordinator keeps in memory; JoinGroup/OffsetCommit of a new group beyond it get
COORDINATOR_NOT_AVAILABLE."""

MAX_GROUP_MEMBERS = 10_000
"""Members (and, separately, KIP-394 pending member ids) of one group: GROUP_MAX_SIZE_REACHED."""

COORDINATOR_LEASE_RECHECK_MS = 100
"""A session timer that fires while the coordinator's leadership of its offsets partition is not
current (the leader lease, ``Partition.leadership_current``: after a stall, right after an
election) does not expire the member: it fires again after this many ms, until the lease is back
or the partition is unloaded (litemq.coordinator)."""

LEADER_LEASE_POLL_MS = 10
"""``ReplicatedPartition.confirm_leadership`` checks the leader lease this often (ms) while it
waits for its followers' answers (at most one election timeout)."""

# --- broker-to-broker transport (litemq.cluster) ---
MAX_RPC_FRAME_BYTES = 128 * 1024 * 1024
"""Largest broker-to-broker frame (kind byte + body), sent or accepted (litemq.cluster.codec)."""

MAX_RAFT_MESSAGES_PER_FRAME = 100_000
"""Largest number of Raft messages (all groups together) in one FRAME_RAFT."""

MAX_RAFT_ENTRIES_PER_FRAME = 1_000_000
"""Largest number of log entries (all Append messages together) in one FRAME_RAFT."""

MAX_GROUP_ID_BYTES = 512
"""Largest Raft group id (UTF-8 bytes) on the broker-to-broker wire."""

MAX_CLUSTER_ID_BYTES = 256
"""Largest cluster id (UTF-8 bytes) in a FRAME_HELLO."""

MAX_RPC_JSON_BYTES = 64 * 1024 * 1024
"""Largest JSON document (UTF-8 bytes) in one broker RPC request or response."""

MAX_PEER_WRITE_BUFFER_BYTES = 64 * 1024 * 1024
"""Bytes queued on one broker-to-broker connection before Raft messages for that peer are
dropped (a paused or slow peer; Raft retransmits)."""

ADMIN_RETRY_BACKOFF_MS = 100
"""A metadata change forwarded to a metadata leader that is not connected yet, or that just lost
its leadership, is asked again after this long (or as soon as the known leader changes)."""

METADATA_LEADER_REFRESH_WAIT_MS = 500
"""A Metadata (or DescribeTopicPartitions) request that would report a partition without a
leader, or names a topic this broker does not know, first asks the metadata leader for the
current leaders and its commit index (an out-of-turn heartbeat) and catches up to it, waiting
this long at most (a partition whose leader is really down is then reported LEADER_NOT_AVAILABLE,
or with leader -1 by DescribeTopicPartitions)."""
CREATE_TOPIC_PROPAGATION_WAIT_MS = 2000
"""The metadata leader answers a topic creation (or new partitions) once every live broker
reported, in its heartbeat, that it applied the record - at most this long after the commit -
so a client that goes on through any broker finds the topic (brokers heartbeat at once after
applying one)."""
SYNC_THREAD_IDLE_EXIT_MS = 5000
"""A broker's fsync thread (litemq.replica.sync_queue) exits after this long without work."""

CLUSTER_JOIN_TIMEOUT_MS = 60_000
"""A broker starting with ``--join`` (controller.quorum.bootstrap.servers) keeps asking its
bootstrap brokers to register it this long before it gives up and exits (cluster/join.py)."""
JOIN_RPC_TIMEOUT_MS = 12_000
"""Bound on one ``join`` RPC answer (it waits for the registration's commit, below)."""
JOIN_REGISTER_TIMEOUT_MS = 10_000
"""How long a broker asked to ``join`` waits for the metadata leader to commit the registration."""
QUORUM_CHANGE_POLL_MS = 100
"""AddRaftVoter/RemoveRaftVoter on the metadata leader: how often it looks again at a learner
catching up or a configuration change committing."""
DESCRIBE_QUORUM_FORWARD_MS = 5_000
"""A broker that is not the metadata leader forwards DescribeQuorum to it (as Kafka's brokers
forward it to the active controller) and waits at most this long for the leader's view, then
answers NOT_LEADER_OR_FOLLOWER."""

VOTER_CHANGE_TIMEOUT_MS = 30_000
"""How long a metadata voter change waits to be done when the request names no time: RemoveRaftVoter
(which has no TimeoutMs field; Kafka bounds it by ``controller.quorum.request.timeout.ms``, 2 s, too
short for a busy Python broker) and an AddRaftVoter whose TimeoutMs is not positive."""
VOTER_CHANGE_MAX_TIMEOUT_MS = 300_000
"""The longest an AddRaftVoter waits for its new voter to catch up and be promoted, whatever its
TimeoutMs asks (KIP-853; the request is then answered REQUEST_TIMED_OUT)."""

PRODUCER_ID_BLOCK_WAIT_MS = 2_000
"""InitProducerId waits at most this long for a new producer-id block from the metadata leader
(a cluster still electing one), then answers COORDINATOR_LOAD_IN_PROGRESS and the client retries."""

MAX_TRANSACTIONAL_IDS = 100_000
"""Transactional ids one transaction coordinator keeps in memory; InitProducerId of a new id
beyond this answers COORDINATOR_NOT_AVAILABLE."""

MAX_PARTITIONS_PER_TRANSACTION = 100_000
"""Partitions one transaction may span (AddPartitionsToTxn beyond this: INVALID_REQUEST)."""

# ---------------------------------------------------------------- security
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
"""SCRAM iteration bounds (Kafka ``ScramMechanism`` min/max iterations, KIP-554)."""
TLS_HANDSHAKE_TIMEOUT_MS = 10_000
"""A TLS listener (or the TLS RPC port) closes a connection whose handshake takes longer."""
MAX_LISTENERS_PER_BROKER = 32
"""Listeners one broker may configure and register (``listeners``)."""
MAX_RACK_ID_CHARS = 255
"""Longest ``broker.rack`` a broker may register (it is repeated in every Metadata answer; Kafka
sets no bound). A longer client ``rack_id`` in a Fetch simply matches no broker."""
MAX_SASL_TOKEN_BYTES = 64 * 1024
"""Largest SaslAuthenticate auth_bytes accepted (a PLAIN or SCRAM message is < 1 KiB)."""
MAX_SASL_RECEIVE_BYTES = 512 * 1024
"""Largest request frame a connection on a SASL listener may send before it is authenticated
(or while it re-authenticates); larger closes it (Kafka ``sasl.server.max.receive.size`` default)."""
OAUTHBEARER_JWKS_FETCH_TIMEOUT_MS = 10_000
"""A fetch of an OAuth provider's JWKS (``sasl.oauthbearer.jwks.endpoint.url``) gives up after
this long; the keys already known stay in use."""
OAUTHBEARER_JWKS_MAX_BYTES = 1024 * 1024
"""Largest JWKS document read (a provider's key set is a few kB)."""
OAUTHBEARER_MAX_CLAIM_TIME_S = 253_402_300_799
"""Largest ``exp``/``iat`` (seconds since the epoch) an OAUTHBEARER token may carry: the end of
year 9999; a larger or non-finite one is refused rather than overflowing a conversion."""
OAUTHBEARER_JWKS_WAIT_MS = 2_000
"""A token whose key is not known yet waits this long at most for the fetch of the key set
(which runs on its own thread), so a slow provider cannot hold the broker's I/O threads."""
OAUTHBEARER_JWKS_MISSING_KEY_REFRESH_MS = 10_000
"""A token naming a key id the JWKS does not hold fetches the set again at most this often, so
clients sending made-up key ids cannot make the broker hammer the provider (Kafka's refreshing
resolver keeps such ids in flight for 60 s)."""
SASL_FAILED_AUTHENTICATION_LINGER_MS = 500
"""A connection whose authentication failed is closed this long after its error response is
written, so a client reading the response and the close in one go (kafka-python) still sees the
SASL error; nothing is read from it meanwhile."""
MAX_ACLS = 100_000
"""ACL bindings a cluster stores."""
MAX_SCRAM_USERS = 100_000
"""Users with SCRAM credentials a cluster stores."""
MAX_SECURITY_RECORD_BYTES = 512 * 1024
"""Largest metadata record (JSON bytes) one CreateAcls, DeleteAcls or AlterUserScramCredentials
request may turn into: the metadata log takes batches up to ``message.max.bytes`` (~1 MiB by
default). A larger request gets INVALID_REQUEST for each of its entries."""

MAX_CLIENT_QUOTA_ENTITIES = 100_000
"""Client quota entities (user, client-id, user and client-id, ip) a cluster stores (KIP-546)."""
MAX_CLIENT_QUOTA_ENTITY_NAME_CHARS = 1024
"""Longest user, client id or IP name a client quota entity may have (Kafka sets no bound)."""
CLIENT_QUOTA_WINDOW_SAMPLES = 11
"""Samples a client quota's rate is measured over (Kafka ``quota.window.num``)."""
CLIENT_QUOTA_WINDOW_MS = 1000
"""Length of one such sample (Kafka ``quota.window.size.seconds`` = 1)."""
MAX_CLIENT_QUOTA_SENSORS = 100_000
"""Rates (one per user / client id the quotas in force tell apart) a broker keeps per quota type;
beyond it the ones idle longest are dropped (Kafka drops a sensor idle for an hour)."""
CLIENT_QUOTA_SENSOR_IDLE_MS = 3_600_000
"""A rate nobody recorded into for this long is dropped (Kafka: 1 hour)."""
MAX_CLIENT_QUOTA_THROTTLE_MS = 2**31 - 1
"""Largest throttle time a response carries (its field is an int32; a quota of 0 throttles this
long, as Kafka)."""
MAX_CLIENT_METRICS_SUBSCRIPTIONS = 10_000
"""Client metrics subscriptions (KIP-714 CLIENT_METRICS config resources) a cluster stores."""
MAX_CLIENT_METRICS_NAME_CHARS = 1024
"""Longest client metrics subscription name (Kafka sets no bound)."""
MAX_CLIENT_TELEMETRY_INSTANCES = 16_384
"""Client instances (KIP-714) a broker keeps the subscription state and pushed metrics of; beyond
it the least recently heard from is dropped (Kafka's ``ClientMetricsManager`` cache size)."""
CLIENT_TELEMETRY_INSTANCE_EXPIRY_MS = 60_000
"""A client instance not heard from for the longer of this and three push intervals is dropped
with its metrics (Kafka ``ClientMetricsManager.DEFAULT_CACHE_EXPIRY_MS``)."""
MAX_CLIENT_TELEMETRY_SERIES_PER_INSTANCE = 2_000
"""Metric series (name and attributes) one client instance's pushes may hold on /metrics; the
rest of a push is dropped (a librdkafka client pushes a few dozen per broker it talks to)."""
MAX_CLIENT_TELEMETRY_LABEL_CHARS = 256
"""Longest label value a pushed metric carries onto /metrics (longer ones are cut)."""
MAX_SCHEMA_BYTES = 256 * 1024
"""Largest schema text the schema registry takes (UTF-8 bytes; 422 42201 beyond)."""
MAX_SCHEMA_REGISTRY_BYTES = 64 * 1024 * 1024
"""Schema text the schema registry holds in all (it lives in the cluster metadata)."""
MAX_SCHEMA_VERSIONS = 100_000
"""Subject versions (soft-deleted ones too) the schema registry holds."""
MAX_SCHEMA_SUBJECT_CHARS = 1024
"""Longest subject name."""
MAX_SCHEMA_REFERENCE_DEPTH = 16
"""How deep schema references may nest."""
SPARK_SCHEMA_REGISTRY_TIMEOUT_S = 30
"""How long the Spark source waits for one answer of the schema registry (value.format=avro)."""
MAX_REQUEST_QUOTA_THROTTLE_MS = CLIENT_QUOTA_WINDOW_MS
"""Longest throttle a ``request_percentage`` quota imposes at once (Kafka
``ClientRequestQuotaManager.maxThrottleTimeMs``: one quota window)."""

# ---------------------------------------------------------------- observability (metrics, HTTP)
METRICS_LATENCY_WINDOW_SAMPLES = 1028
"""Latency quantiles (p50/p99/p999 of a request API, of log flushes) are computed over the last
this many observations of that series (Kafka's Yammer histograms keep a 1028-sample reservoir)."""
METRICS_ISR_SAMPLE_INTERVAL_MS = 1000
"""How often a broker compares the ISR size of each partition it leads with the previous sample
to count ISR shrinks and expands (LiteMQ's ISR is derived from Raft progress, not stored)."""
METRICS_MAX_TOPIC_SERIES = 10_000
"""Topics with bytes/messages counters kept per broker; counters of deleted topics are dropped."""
HTTP_MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024
"""Largest HTTP request body (REST produce) the broker's HTTP port reads; larger answers 413."""
HTTP_MAX_RECORDS_PER_PRODUCE = 10_000
"""Records one REST produce request (concatenated JSON objects) may carry; more answers 400."""
HTTP_MAX_CONSUME_RECORDS = 10_000
"""Largest ``max_count`` of one HTTP consume request."""
HTTP_MAX_CONSUME_BYTES = 8 * 1024 * 1024
"""Fetch ``max_bytes`` of one HTTP consume request (the first batch is returned even if larger)."""
HTTP_LEADER_WAIT_MS = 3_000
"""An HTTP produce or read of a partition whose leader this broker does not know yet (a new topic,
an election in progress) waits this long for one (checked every 50 ms), then answers 503."""
HTTP_PEER_TIMEOUT_MS = 5_000
"""An HTTP request that needs another broker (the partition leader, a group coordinator, a peer's
counters) waits this long for its answer over the broker RPC port, then reports it unavailable."""
ELECT_LEADERS_MAX_TIMEOUT_MS = 60_000
"""ElectLeaders waits at most this long for a preferred replica to take leadership, whatever the
request's ``timeout_ms`` asks."""
DELETE_RECORDS_MAX_TIMEOUT_MS = 300_000
"""DeleteRecords waits at most this long for the followers' log start offsets to reach the deleted
offset (Kafka's ``DelayedDeleteRecords``), whatever the request's ``timeout_ms`` asks; it then
answers REQUEST_TIMED_OUT."""

# ---------------------------------------------------------------- log pipeline (litemq.pipeline)
YEARLESS_TIMESTAMP_FUTURE_TOLERANCE_MS = 86_400_000
"""A log line whose timestamp has no year (syslog's ``Jun 14 15:16:01``, Android, Proxifier) is
dated in the latest year that puts it at most this far after now: a December line read in January
is last year's, and a source up to a day ahead of UTC (zone-less times are read as UTC) keeps this
year's date."""

MIN_SEGMENT_BYTES = 1024 * 1024
"""Kafka 4's lower bound of ``segment.bytes`` and ``log.segment.bytes`` (KIP-1030), checked where a
value is set (CreateTopics, AlterConfigs, broker settings); the internal topic config
``internal.segment.bytes`` goes lower (tests), and a smaller value an earlier LiteMQ stored keeps
working."""
PAGE_CACHE_FOLIO_MAX_BYTES = 2 * 1024 * 1024
"""The largest page-cache folio Linux makes (a PMD: 2 MiB with 4 KiB pages). A page-cache drop
(``log.page.cache.retain.bytes``, ``LogSegment.drop_cache_before``) starts at this boundary below
where the previous one ended: the kernel drops only folios wholly inside the range."""

# ---------------------------------------------------------------- broker process memory (litemq serve)
MALLOC_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""``litemq serve`` asks glibc malloc to serve blocks below this from its heap, not from a mmap of
their own (glibc's maximum; its default starts at 128 KiB): a batch-sized buffer freed and allocated
again reuses memory instead of faulting fresh pages in (:mod:`litemq.broker.malloc`)."""
MALLOC_TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
"""... and to give memory freed at the top of its heap back to the OS only beyond this much (glibc's
default moves between 128 KiB and 64 MiB), so memory freed after one burst serves the next one."""

ACCEPT_ERROR_LOG_INTERVAL_MS = 10_000
"""At most one log line per this many ms for listeners that cannot accept (out of file
descriptors or memory; litemq.broker.loop_errors)."""

CONSOLE_RATE_WINDOW_MS = 10_000
"""The web console's throughput rates are taken over the oldest sample within this window (like
Prometheus' rate() over a range; litemq.broker.http.console)."""
CONSOLE_RATE_SAMPLES = 64
"""Throughput samples the console endpoint keeps to take its rates from."""
