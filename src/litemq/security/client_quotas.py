"""Client quotas as cluster metadata (KIP-13 byte rates, KIP-55 user quotas, KIP-124 request
quotas, KIP-599 controller mutations, KIP-612 IP connection rates; API: KIP-546).

A quota *entity* is a set of (entity type, entity name) pairs, each type at most once: ``user``
(a principal's name), ``client-id``, both together, or ``ip`` alone. A name of None is the
type's default (``--entity-default``: every user / client id / IP without a quota of its own).
Each entity holds quota values by key:

========================== ============================ =====================================
key                        entities                     value
========================== ============================ =====================================
producer_byte_rate         user, client-id, both        bytes/s of Produce requests (whole)
consumer_byte_rate         user, client-id, both        bytes/s of Fetch responses
request_percentage         user, client-id, both        % of one request thread per window
controller_mutation_rate   user, client-id, both        partitions created/deleted per second
connection_creation_rate   ip                           connections accepted per second
========================== ============================ =====================================

Which quota applies to a request of user U with client id C (Kafka ``ClientQuotaManager``, the
first one set wins): (U, C), (U, default client), U, (default user, C), (default user, default
client), default user, C, default client. :meth:`ClientQuotaStore.quota` also gives the *sensor
key* Kafka's metric tags name: clients share one rate when the quota that applies names them
together (a quota on user U alone: all of U's clients share U's rate; a default quota: each user
or client id has a rate of its own).

The same code serves both metadata stores, as :mod:`litemq.security.records` does for ACLs: the
single broker's ``metadata.json`` and the replicated metadata image (record
``alter_client_quotas``). Pure: no I/O, no clock.

Sources: Kafka 4.x ``ClientQuotaControlManager`` (alterations and their errors),
``ClientQuotasImage.describe`` (DescribeClientQuotas filters), ``ClientQuotaManager``
(precedence and metric tags), ``QuotaConfig`` (keys and their types).
"""

from __future__ import annotations

import ipaddress
import json
import math

from litemq import limits
from litemq.protocol.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

_LONG, _DOUBLE = "long", "double"
CLIENT_QUOTA_KEYS = {PRODUCER_BYTE_RATE: _LONG, CONSUMER_BYTE_RATE: _LONG, REQUEST_PERCENTAGE: _DOUBLE,
                     CONTROLLER_MUTATION_RATE: _DOUBLE}
"""Keys of user / client-id entities and their Kafka config types (``QuotaConfig``)."""
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: _LONG}
"""Keys of ip entities (Kafka's type is INT; LiteMQ checks it as a whole number)."""

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
"""DescribeClientQuotas ``MatchType``: the name given, the default (null name), any name."""

Entity = tuple[tuple[str, "str | None"], ...]
"""Sorted (entity type, name or None) pairs."""

_OK = ErrorCode.NONE


def entity_of(pairs) -> Entity:
    """(type, name) pairs (in any order; None = the default) -> an :data:`Entity`.

    Raises:
        TypeError, ValueError: not pairs of a string and a string or None.
    """
    out = []
    for entity_type, name in pairs:
        if not isinstance(entity_type, str) or not (name is None or isinstance(name, str)):
            raise TypeError(f"bad quota entity component {(entity_type, name)!r}")
        out.append((entity_type, name))
    return tuple(sorted(out, key=lambda p: (p[0], p[1] is not None, p[1] or "")))


def entity_text(entity: Entity) -> str:
    """Kafka's ``ClientQuotaEntity.toString()``: ``ClientQuotaEntity(entries={user=alice})``."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


def _entity_error(entity: Entity) -> str | None:
    """Kafka's ``validateEntity`` and ``configKeysForEntityType`` message, or None when valid."""
    if not entity:
        return "Invalid empty client quota entity"
    seen: set[str] = set()
    for entity_type, name in entity:
        if entity_type in seen:
            return f"Invalid empty client quota entity, duplicate entity entry {entity_type}"
        seen.add(entity_type)
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
        if name is not None and len(name) > limits.MAX_CLIENT_QUOTA_ENTITY_NAME_CHARS:
            return f"{entity_type} name longer than {limits.MAX_CLIENT_QUOTA_ENTITY_NAME_CHARS} characters"
    if IP in seen and len(seen) > 1:
        return "Invalid empty client quota entity"
    if IP in seen:
        name = dict(entity)[IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return f"{name} is not a valid IP or resolvable host."
    return None


def _keys_of(entity: Entity) -> dict[str, str]:
    return IP_QUOTA_KEYS if entity and entity[0][0] == IP and len(entity) == 1 else CLIENT_QUOTA_KEYS


def _value_error(keys: dict[str, str], key: str, value) -> str | None:
    """Kafka's ``validateQuotaKeyValue`` message (plus: a value must be a finite number >= 0)."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        return f"Configuration {key} must be a non-negative number, not {value}"
    if kind == _LONG and abs(float(int(value + 1e-6)) - value) > 1e-6:
        return f"Configuration {key} must be a Long value"
    return None


class ClientQuotaStore:
    """The cluster's client quotas: :data:`Entity` -> key -> value."""

    def __init__(self) -> None:
        self.entities: dict[Entity, dict[str, float]] = {}

    def __len__(self) -> int:
        return len(self.entities)

    def __bool__(self) -> bool:
        return bool(self.entities)

    # ------------------------------------------------------------ lookups (enforcement)
    def quota(self, user: str, client_id: str, key: str) -> tuple[float, tuple[str, str]] | None:
        """The quota ``key`` that applies to a request of principal name ``user`` with client id
        ``client_id`` and its sensor key ``(user tag, client-id tag)`` ("" = not part of it),
        or None when no quota applies (Kafka ``ClientQuotaManager``'s precedence)."""
        get = self.entities.get
        for entity, tags in (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        ):
            values = get(entity)
            if values is not None and key in values:
                return values[key], tags
        return None

    def ip_quota(self, ip: str, key: str = CONNECTION_CREATION_RATE) -> float | None:
        """Quota ``key`` of address ``ip``: its own, else the default IP's, else None."""
        for entity in (((IP, ip),), ((IP, None),)):
            values = self.entities.get(entity)
            if values is not None and key in values:
                return values[key]
        return None

    # ------------------------------------------------------------ DescribeClientQuotas
    def describe(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict]]:
        """The entities matching every filter component ``(entity type, match type, match)``;
        with ``strict``, only entities with no other entity type (Kafka
        ``ClientQuotasImage.describe``).

        Raises:
            KafkaError: INVALID_REQUEST (an empty or repeated type, a match string that does not
                fit its match type, an unknown match type, ip combined with user or client-id),
                UNSUPPORTED_VERSION (an entity type other than user, client-id, ip).
        """
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise KafkaError("Invalid empty entity type.", ErrorCode.INVALID_REQUEST)
            if entity_type in exact or entity_type in specified:
                raise KafkaError(f"Entity type {entity_type} cannot appear more than once in the filter.",
                                 ErrorCode.INVALID_REQUEST)
            if entity_type not in ENTITY_TYPES:
                raise KafkaError(f"Unsupported entity type {entity_type}", ErrorCode.UNSUPPORTED_VERSION)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise KafkaError("Request specified MATCH_TYPE_EXACT, but set match string to null.",
                                     ErrorCode.INVALID_REQUEST)
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise KafkaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                                     ErrorCode.INVALID_REQUEST)
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise KafkaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                                     ErrorCode.INVALID_REQUEST)
                specified.add(entity_type)
            else:
                raise KafkaError(f"Unknown match type {match_type}", ErrorCode.INVALID_REQUEST)
        named = set(exact) | specified
        if IP in named and (USER in named or CLIENT_ID in named):
            raise KafkaError("Invalid entity filter component combination. IP filter component should not be "
                             "used with user or clientId filter component.", ErrorCode.INVALID_REQUEST)
        out = []
        for entity, values in self.entities.items():
            as_dict = dict(entity)
            if any(t not in as_dict or as_dict[t] != name for t, name in exact.items()):
                continue
            if any(t not in as_dict for t in specified):
                continue
            if strict and len(as_dict) != len(named):
                continue
            if not named and strict:
                continue
            out.append((entity, dict(values)))
        return out

    # ------------------------------------------------------------ persistence
    def to_json(self) -> list:
        return [[[list(p) for p in entity], values] for entity, values in self.entities.items()]

    @classmethod
    def from_json(cls, doc) -> "ClientQuotaStore":
        store = cls()
        for pairs, values in doc or ():
            store.entities[entity_of(tuple(p) for p in pairs)] = {str(k): float(v) for k, v in dict(values).items()}
        return store


# ================================================================== AlterClientQuotas
def plan(state, args: dict) -> tuple[dict | None, dict]:
    """Validate an AlterClientQuotas request against ``state.client_quotas``: (the
    ``alter_client_quotas`` record to apply, or None when nothing changes or ``validate_only``;
    ``{"results": [[error, message], ...]}``, one per request entry).

    ``args``: ``entries``: ``[[[entity type, name or None], ...], [[key, value, remove], ...]]``
    per entry (as on the wire), ``validate_only``. An entry with any invalid key or value
    changes nothing (Kafka would still apply its valid keys); an entity named twice in one
    request gets INVALID_REQUEST ``Ignoring duplicate entity`` the second time.

    Raises:
        KeyError, TypeError, ValueError: malformed ``args``.
    """
    store: ClientQuotaStore = state.client_quotas
    results: list = []
    changes: list = []
    seen: set[Entity] = set()
    new_entities = 0
    for pairs, ops in args["entries"]:
        entity = entity_of(tuple(p) for p in pairs)
        error = _entity_error(entity)
        if error is None and entity in seen:
            error = f"Ignoring duplicate entity {entity_text(entity)}"
        seen.add(entity)
        if error is not None:
            results.append([int(ErrorCode.INVALID_REQUEST), error])
            continue
        keys = _keys_of(entity)
        current = store.entities.get(entity, {})
        sets: dict[str, float] = {}
        removes: list[str] = []
        named: set[str] = set()
        for key, value, remove in ops:
            key = str(key)
            if key in named:
                error = f"Duplicate quota key {key} not updating quota for this entity {entity_text(entity)}"
                break
            named.add(key)
            if remove:
                if key in current:
                    removes.append(key)
                continue
            error = _value_error(keys, key, value)
            if error is not None:
                break
            if current.get(key) != float(value):
                sets[key] = float(value)
        if error is not None:
            results.append([int(ErrorCode.INVALID_REQUEST), error])
            continue
        results.append([int(_OK), None])
        if sets or removes:
            if entity not in store.entities:
                new_entities += 1
            changes.append([[list(p) for p in entity], sets, removes])
    reply = {"results": results}
    if not changes or args.get("validate_only"):
        return None, reply
    if len(store) + new_entities > limits.MAX_CLIENT_QUOTA_ENTITIES:
        msg = f"the cluster stores at most {limits.MAX_CLIENT_QUOTA_ENTITIES} client quota entities"
        return None, {"results": [[int(ErrorCode.INVALID_REQUEST), msg] if code == _OK else [code, m]
                                  for code, m in results]}
    rec = {"type": "alter_client_quotas", "changes": changes}
    if len(json.dumps(rec, separators=(",", ":"))) > limits.MAX_SECURITY_RECORD_BYTES:
        msg = (f"the request's metadata record would exceed {limits.MAX_SECURITY_RECORD_BYTES} bytes; "
               "send fewer entries per request")
        return None, {"results": [[int(ErrorCode.INVALID_REQUEST), msg]] * len(results)}
    return rec, reply


def apply(state, rec: dict) -> None:
    """Apply a committed ``alter_client_quotas`` record to ``state.client_quotas``: per change,
    set its values and remove its removed keys; an entity left with no value is gone.

    Raises:
        KafkaError(INVALID_REQUEST): more than ``MAX_CLIENT_QUOTA_ENTITIES`` entities.
        KeyError, TypeError, ValueError: a malformed record (nothing applied).
    """
    store: ClientQuotaStore = state.client_quotas
    parsed = [(entity_of(tuple(p) for p in pairs), {str(k): float(v) for k, v in dict(sets).items()},
               [str(k) for k in removes]) for pairs, sets, removes in rec["changes"]]
    new = {e for e, sets, _ in parsed if sets and e not in store.entities}
    if len(store) + len(new) > limits.MAX_CLIENT_QUOTA_ENTITIES:
        raise KafkaError(f"the cluster stores at most {limits.MAX_CLIENT_QUOTA_ENTITIES} client quota entities",
                         ErrorCode.INVALID_REQUEST)
    for entity, sets, removes in parsed:
        values = store.entities.setdefault(entity, {})
        values.update(sets)
        for key in removes:
            values.pop(key, None)
        if not values:
            del store.entities[entity]
