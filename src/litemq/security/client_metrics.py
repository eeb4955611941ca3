"""Client metrics subscriptions (KIP-714) as cluster metadata: the CLIENT_METRICS config
resources (``kafka-client-metrics.sh``, ``kafka-configs.sh --entity-type client-metrics``).

A subscription is a named set of three configs, stored as the strings they were set to:

=============== ================================================================ ==============
config          meaning                                                          default
=============== ================================================================ ==============
``metrics``     comma-separated metric name prefixes the matching clients push;  (none)
                ``*`` = every metric
``interval.ms`` how often they push, 100..3,600,000 ms                           300000
``match``       comma-separated ``attribute=regex`` selectors, all of which a    (every client)
                client must match in full: ``client_instance_id``,
                ``client_id``, ``client_software_name``,
                ``client_software_version``, ``client_source_address``,
                ``client_source_port``
=============== ================================================================ ==============

A subscription whose configs are all deleted is gone. The regexes are RE2 (Kafka compiles them
with Java's ``Pattern``; RE2 lacks back-references and look-around, and no pattern can make a
match take more than linear time).

The same code serves both metadata stores, as :mod:`litemq.security.records` does for ACLs: the
single broker's ``metadata.json`` and the replicated metadata image (record
``alter_client_metrics``). Pure: no I/O, no clock.

Sources: Kafka 4.x ``ClientMetricsConfigs`` (names, defaults, validation and its messages),
``ClientMetricsManager.updateSubscription``, ``ClientMetricsInstanceMetadata.isMatch``.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass

import re2

from litemq import limits
from litemq.protocol.errors import ErrorCode, KafkaError

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
CONFIG_NAMES = (INTERVAL_MS, MATCH, METRICS)
ALL_METRICS = "*"
"""A ``metrics`` entry subscribing a client to every metric."""
INTERVAL_MS_DEFAULT = 300_000
"""Push interval of a client no subscription matches, and of a subscription without ``interval.ms``."""
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_ATTRIBUTES = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                              CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})

_GENERATIONS = itertools.count(1)
_LIST_SPLIT = re.compile(r"\s*,\s*")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def parse_list(value: str | None) -> list[str]:
    """A Kafka LIST config value -> its items (``"a, b"`` -> ``["a", "b"]``; blank -> ``[]``)."""
    text = (value or "").strip()
    return _LIST_SPLIT.split(text) if text else []


def parse_match(patterns: list[str]) -> dict[str, object]:
    """``["client_id=app-.*", ...]`` -> attribute -> compiled RE2 pattern.

    Raises:
        KafkaError(INVALID_CONFIG): ``Illegal client matching pattern: P`` (no single ``=``, an
            unknown attribute, or a pattern RE2 cannot compile).
    """
    out = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_ATTRIBUTES:
            raise KafkaError(f"Illegal client matching pattern: {pattern}", ErrorCode.INVALID_CONFIG)
        try:
            out[parts[0].strip()] = re2.compile(parts[1].strip(), _RE2_OPTIONS)
        except re2.error:
            raise KafkaError(f"Illegal client matching pattern: {pattern}", ErrorCode.INVALID_CONFIG) from None
    return out


def validate(name: str, configs: dict[str, str]) -> None:
    """Kafka's checks of a subscription's new configs (``ClientMetricsConfigs.validate``).

    Raises:
        KafkaError: INVALID_REQUEST (an empty name, an unknown config, ``interval.ms`` outside
            100..3600000), INVALID_CONFIG (``interval.ms`` not an int32, a bad ``match`` pattern).
    """
    if not name:
        raise KafkaError("Subscription name can't be empty", ErrorCode.INVALID_REQUEST)
    if len(name) > limits.MAX_CLIENT_METRICS_NAME_CHARS:
        raise KafkaError(f"Subscription name longer than {limits.MAX_CLIENT_METRICS_NAME_CHARS} characters",
                         ErrorCode.INVALID_REQUEST)
    for key in configs:
        if key not in CONFIG_NAMES:
            raise KafkaError(f"Unknown client metrics configuration: {key}", ErrorCode.INVALID_REQUEST)
    if INTERVAL_MS in configs:
        try:
            interval_ms = int(configs[INTERVAL_MS].strip())
        except ValueError:
            raise KafkaError(f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                             "Not a number of type INT", ErrorCode.INVALID_CONFIG) from None
        if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
            raise KafkaError(f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be between 100 and "
                             "3600000 (1 hour)", ErrorCode.INVALID_REQUEST)
    if MATCH in configs:
        parse_match(parse_list(configs[MATCH]))


@dataclass(frozen=True)
class Subscription:
    """One subscription, parsed: its metric prefixes, push interval (ms) and match patterns."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, object], ...]

    def matches(self, attributes: dict[str, str | None]) -> bool:
        """True when every pattern matches its attribute of the client in full (no pattern:
        every client). An attribute the client did not give matches nothing."""
        for attribute, pattern in self.match:
            value = attributes.get(attribute)
            if value is None or pattern.fullmatch(value) is None:  # type: ignore[attr-defined]
                return False
        return True


class ClientMetricsStore:
    """The subscriptions: name -> configs as set (``{config name: value string}``).

    ``generation`` changes with every change (and differs between stores: a store loaded from a
    snapshot has a new one), so a broker knows when to re-evaluate the clients it has told their
    subscriptions (Kafka's ``subscriptionUpdateVersion``).
    """

    def __init__(self) -> None:
        self.subscriptions: dict[str, dict[str, str]] = {}
        self.generation = next(_GENERATIONS)
        self._parsed: tuple[int, list[Subscription]] = (-1, [])

    def __len__(self) -> int:
        return len(self.subscriptions)

    def parsed(self) -> list[Subscription]:
        """Every subscription, parsed (cached until the next change)."""
        if self._parsed[0] != self.generation:
            out = []
            for name, configs in sorted(self.subscriptions.items()):
                interval = configs.get(INTERVAL_MS)
                out.append(Subscription(name, tuple(parse_list(configs.get(METRICS))),
                                        INTERVAL_MS_DEFAULT if interval is None else int(interval),
                                        tuple(sorted(parse_match(parse_list(configs.get(MATCH))).items()))))
            self._parsed = (self.generation, out)
        return self._parsed[1]

    def set(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self.subscriptions[name] = dict(configs)
        else:
            self.subscriptions.pop(name, None)
        self.generation = next(_GENERATIONS)

    # ------------------------------------------------------------ persistence
    def to_json(self) -> dict:
        return {name: dict(configs) for name, configs in self.subscriptions.items()}

    @classmethod
    def from_json(cls, doc) -> "ClientMetricsStore":
        store = cls()
        store.subscriptions = {str(n): {str(k): str(v) for k, v in dict(c).items()} for n, c in dict(doc or {}).items()}
        return store


# ================================================================== IncrementalAlterConfigs
def plan(state, args: dict) -> tuple[dict | None, dict]:
    """Validate a change of one subscription against ``state.client_metrics``: (the
    ``alter_client_metrics`` record, or None when ``validate_only`` or nothing changes; ``{}``).

    ``args``: ``name``, ``configs`` (the subscription's whole new config set; empty deletes it),
    ``validate_only``.

    Raises:
        KafkaError: as :func:`validate`; INVALID_REQUEST beyond ``MAX_CLIENT_METRICS_SUBSCRIPTIONS``.
        KeyError, TypeError, ValueError: malformed ``args``.
    """
    store: ClientMetricsStore = state.client_metrics
    name = str(args["name"])
    configs = {str(k): str(v) for k, v in dict(args["configs"]).items()}
    validate(name, configs)
    if name not in store.subscriptions and configs and len(store) >= limits.MAX_CLIENT_METRICS_SUBSCRIPTIONS:
        raise KafkaError(f"the cluster stores at most {limits.MAX_CLIENT_METRICS_SUBSCRIPTIONS} client metrics "
                         "subscriptions", ErrorCode.INVALID_REQUEST)
    rec = {"type": "alter_client_metrics", "name": name, "configs": configs}
    if len(json.dumps(rec, separators=(",", ":"))) > limits.MAX_SECURITY_RECORD_BYTES:
        raise KafkaError(f"the subscription's configs exceed {limits.MAX_SECURITY_RECORD_BYTES} bytes",
                         ErrorCode.INVALID_REQUEST)
    if args.get("validate_only") or store.subscriptions.get(name, {}) == configs:
        return None, {}
    return rec, {}


def apply(state, rec: dict) -> None:
    """Apply a committed ``alter_client_metrics`` record to ``state.client_metrics``.

    Raises:
        KafkaError(INVALID_REQUEST): beyond ``MAX_CLIENT_METRICS_SUBSCRIPTIONS``.
        KeyError, TypeError, ValueError: a malformed record (nothing applied).
    """
    store: ClientMetricsStore = state.client_metrics
    name = str(rec["name"])
    configs = {str(k): str(v) for k, v in dict(rec["configs"]).items()}
    if name not in store.subscriptions and configs and len(store) >= limits.MAX_CLIENT_METRICS_SUBSCRIPTIONS:
        raise KafkaError(f"the cluster stores at most {limits.MAX_CLIENT_METRICS_SUBSCRIPTIONS} client metrics "
                         "subscriptions", ErrorCode.INVALID_REQUEST)
    store.set(name, configs)
