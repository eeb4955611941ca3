"""Per-group configs (Kafka 4.1 ``GroupConfig``; ``kafka-configs.sh --entity-type groups``):
names, defaults, validation, and the ``__consumer_offsets`` record that stores them.

A GROUP config resource (DescribeConfigs / IncrementalAlterConfigs / AlterConfigs, resource
type 32) overrides, for one group id, a broker-wide group setting:

================================  =========================================  ==========
group config                      broker setting it overrides (its default)  type
================================  =========================================  ==========
consumer.session.timeout.ms       group.consumer.session.timeout.ms          int
consumer.heartbeat.interval.ms    group.consumer.heartbeat.interval.ms       int
share.session.timeout.ms          group.share.session.timeout.ms             int
share.heartbeat.interval.ms       group.share.heartbeat.interval.ms          int
share.record.lock.duration.ms     group.share.record.lock.duration.ms        int
share.auto.offset.reset           share.auto.offset.reset                    string
                                  (``latest``, ``earliest``, ``by_duration:<ISO-8601 duration>``)
share.isolation.level             share.isolation.level                      string
================================  =========================================  ==========

Validation is Kafka's (``GroupConfig.validate``): an unknown name is ``Unknown group config
name: X``; a value that does not parse or breaks its ``ConfigDef`` validator, or falls outside
the broker-level bounds (Kafka's ``group.consumer.min/max.*``, ``group.share.min/max.*``
settings at their Kafka defaults, which LiteMQ does not make settable), or a session timeout
not above its heartbeat interval, is INVALID_CONFIG with Kafka's message. Values are checked
together with the defaults of the names not set.

Storage: Kafka keeps group configs in the KRaft metadata log (``ConfigRecord``). LiteMQ keeps
them with the group, in its ``__consumer_offsets`` partition (replicated and compacted like the
group's other records): key ``int16 1000, group`` (a LiteMQ record type, outside Kafka's
0..15), value ``int16 version 0, compact array of (name, value) compact strings, tagged
fields``; a tombstone when no override is left. The group's coordinator answers for them.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from litemq.protocol import primitives as P
from litemq.protocol.errors import DecodeError, ErrorCode, KafkaError

GROUP_CONFIG_RECORD = 1000
"""The key type of a group-config record in ``__consumer_offsets`` (LiteMQ's own)."""
CONFIG_TYPE_STRING, CONFIG_TYPE_INT = 2, 3
"""Kafka ``DescribeConfigsResponse.ConfigType`` ids."""

_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: the :class:`~litemq.config.BrokerConfig` attribute giving its default,
    its Kafka ``ConfigType`` id, the values it allows (strings) or its least value (ints), and
    Kafka's documentation line."""

    attr: str
    config_type: int
    doc: str
    choices: tuple[str, ...] = ()
    at_least: int = 1


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(
        "group_consumer_session_timeout_ms", CONFIG_TYPE_INT,
        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": GroupConfigDef(
        "group_consumer_heartbeat_interval_ms", CONFIG_TYPE_INT,
        "The heartbeat interval given to the members of a consumer group."),
    "share.session.timeout.ms": GroupConfigDef(
        "group_share_session_timeout_ms", CONFIG_TYPE_INT,
        "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": GroupConfigDef(
        "group_share_heartbeat_interval_ms", CONFIG_TYPE_INT,
        "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": GroupConfigDef(
        "group_share_record_lock_duration_ms", CONFIG_TYPE_INT,
        "The record acquisition lock duration in milliseconds for share groups.", at_least=1000),
    "share.auto.offset.reset": GroupConfigDef(
        "share_auto_offset_reset", CONFIG_TYPE_STRING,
        "The strategy to initialize the share-partition start offset.", choices=("latest", "earliest")),
    "share.isolation.level": GroupConfigDef(
        "share_isolation_level", CONFIG_TYPE_STRING,
        "Controls how to read records written transactionally.", choices=("read_committed", "read_uncommitted")),
}
"""Kafka 4.1 ``GroupConfig`` names LiteMQ serves (the ``streams.*`` ones are for streams groups,
which LiteMQ does not have)."""

GROUP_CONFIG_BOUNDS: dict[str, tuple[str, int, str, int]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms", 5000,
                                       "group.consumer.max.heartbeat.interval.ms", 15000),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", 45000,
                                    "group.consumer.max.session.timeout.ms", 60000),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", 5000,
                                    "group.share.max.heartbeat.interval.ms", 15000),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", 45000,
                                 "group.share.max.session.timeout.ms", 60000),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms", 15000,
                                      "group.share.max.record.lock.duration.ms", 60000),
}
"""Kafka's broker-level bounds of a group config: (min setting, its default, max setting, its
default), in the order Kafka checks them."""


BY_DURATION = "by_duration:"
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int | None:
    """Milliseconds of a Java ``Duration.parse`` text (``PnDTnHnMn.nS``, e.g. ``PT1H``,
    ``P1DT30M``); None when it does not parse. (Kafka's ``by_duration:`` reset strategy.)"""
    m = _DURATION.fullmatch(text.strip())
    if m is None or text.strip().upper().endswith("T") or text.strip().upper() in ("P", "-P", "+P"):
        return None
    sign, days, hours, minutes, seconds, frac = m.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    if frac:
        ms += int((frac + "000")[:3]) * (-1 if (seconds or "").startswith("-") else 1)
    return -ms if sign == "-" else ms


def by_duration_ms(reset: str) -> int | None:
    """The duration of a ``by_duration:<duration>`` reset strategy in ms, else None."""
    if not reset.lower().startswith(BY_DURATION):
        return None
    return duration_ms(reset[len(BY_DURATION):])


def default_value(name: str, broker_config) -> str:
    """The broker-wide value a group config falls back to (``broker_config``: a BrokerConfig)."""
    return str(getattr(broker_config, GROUP_CONFIG_DEFS[name].attr))


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.INVALID_CONFIG)


def validate_group_configs(configs: dict[str, str], broker_config) -> None:
    """Kafka ``GroupConfig.validate`` of a group's whole new override set.

    Raises:
        KafkaError(INVALID_CONFIG): an unknown name, a bad value, a value outside its bounds, a
            session timeout not greater than its heartbeat interval (Kafka's messages).
    """
    for name in configs:
        if name not in GROUP_CONFIG_DEFS:
            raise _invalid(f"Unknown group config name: {name}")
    values: dict[str, int | str] = {}
    for name, d in GROUP_CONFIG_DEFS.items():
        raw = configs.get(name)
        if raw is None:
            raw = default_value(name, broker_config)
        elif d.config_type == CONFIG_TYPE_INT:
            text = raw.strip()
            if not text.lstrip("-").isdigit() or not -2**31 <= int(text) < 2**31:
                raise _invalid(f"Invalid value {raw} for configuration {name}: Not a number of type INT")
            if int(text) < d.at_least:
                raise _invalid(f"Invalid value {raw} for configuration {name}: Value must be at least {d.at_least}")
        elif raw.strip().lower() not in d.choices:
            if name == "share.auto.offset.reset" and raw.strip().lower().startswith(BY_DURATION):
                ms = by_duration_ms(raw.strip())
                if ms is None or ms < 0:
                    raise _invalid(f"Invalid value {raw} for configuration {name}: the duration of "
                                   f"by_duration must be an ISO-8601 duration (PnDTnHnMn.nS), not negative")
            else:
                raise _invalid(f"Invalid value {raw} for configuration {name}: String must be one of: "
                               f"{', '.join(d.choices)} or by_duration:<PnDTnHnMn.nS>"
                               if name == "share.auto.offset.reset" else
                               f"Invalid value {raw} for configuration {name}: String must be one of: "
                               f"{', '.join(d.choices)}")
        values[name] = int(raw.strip()) if d.config_type == CONFIG_TYPE_INT else raw.strip().lower()
    for name, (lo_name, lo, hi_name, hi) in GROUP_CONFIG_BOUNDS.items():
        if name not in configs:
            continue  # a broker default outside the group bounds is the operator's choice
        if values[name] < lo:
            raise _invalid(f"{name} must be greater than or equal to {lo_name}")
        if values[name] > hi:
            raise _invalid(f"{name} must be less than or equal to {hi_name}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise _invalid(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


def normalized(configs: dict[str, str]) -> dict[str, str]:
    """The stored form of validated overrides (ints without blanks, strings lower case)."""
    return {k: v.strip().lower() for k, v in configs.items()}


# ------------------------------------------------------------------ the __consumer_offsets record
def encode_group_config_key(group_id: str) -> bytes:
    raw = group_id.encode()
    return _I16.pack(GROUP_CONFIG_RECORD) + _I16.pack(len(raw)) + raw


def is_group_config_key(key: bytes) -> bool:
    return len(key) >= 2 and _I16.unpack_from(key)[0] == GROUP_CONFIG_RECORD


def decode_group_config_key(key: bytes) -> str:
    """The group id. Raises ValueError for a malformed key."""
    if len(key) < 4:
        raise ValueError("group config key too short")
    n = _I16.unpack_from(key, 2)[0]
    if n < 0 or 4 + n != len(key):
        raise ValueError("bad group config key length")
    return key[4:].decode()


def encode_group_config_value(configs: dict[str, str]) -> bytes:
    out = bytearray(_I16.pack(0))
    P.write_uvarint(out, len(configs) + 1)
    for name in sorted(configs):
        P.write_cstr(out, name)
        P.write_cstr(out, configs[name])
    out.append(0)
    return bytes(out)


def decode_group_config_value(value: bytes) -> dict[str, str]:
    """Raises ValueError for an undecodable value."""
    buf = memoryview(value)
    if len(buf) < 3 or _I16.unpack_from(buf)[0] != 0:
        raise ValueError("unknown group config record version")
    try:
        n, pos = P.read_ccount(buf, 2, len(buf), 2, False)
        out = {}
        for _ in range(max(n, 0)):
            name, pos = P.read_cstr(buf, pos, len(buf))
            val, pos = P.read_cstr(buf, pos, len(buf))
            out[str(name)] = str(val)
    except (DecodeError, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None
    return out
