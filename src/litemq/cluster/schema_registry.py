"""A Confluent-compatible schema registry as cluster metadata: subjects, their schema versions,
global schema ids and compatibility levels (the state; the HTTP API is
:mod:`litemq.broker.http.schema_registry_api`).

State (:class:`SchemaRegistryStore`): schema id -> (schema type, schema text, references);
subject -> version -> (schema id, soft-deleted?); compatibility level per subject and global
(default ``BACKWARD``, as Confluent's). A schema is stored once: the same type, text (compact JSON
for AVRO and JSON) and references under any subject have one id.

Changes are planned (validated) against the current state, then applied as metadata records,
the same on every broker, in the order the metadata log commits them (the single broker's
``metadata.json``, the cluster's metadata image and snapshots):

=================== ===================================================================
record              fields
=================== ===================================================================
register_schema     ``subject``, ``schema_type``, ``schema``, ``references``: the id and
                    version are decided when applied (the same schema again: nothing)
delete_versions     ``subject``, ``versions`` (None: all), ``permanent``
set_compatibility   ``subject`` (None: global), ``level`` (None: the subject's is removed)
=================== ===================================================================

Compatibility (checked when a version is registered, and by the compatibility endpoint) is
Avro's schema resolution, checked by the Apache ``avro`` library
(``ReaderWriterCompatibilityChecker``): BACKWARD means the new schema reads data written with
the latest version (``_TRANSITIVE``: with every version), FORWARD that the latest reads data
written with the new one, FULL both, NONE nothing. JSON Schema and Protobuf schemas are stored,
served and checked for syntax (JSON) only: they are always compatible here.

Errors are Confluent's (HTTP status, error code, message), raised as :class:`RegistryError`.
Pure: no I/O, no clock.

Sources: Confluent Schema Registry API reference (v1 endpoints, error codes 40401-42205),
Avro 1.12 specification ("Schema Resolution").
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import avro.errors
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from litemq import limits
from litemq.protocol.errors import ErrorCode, KafkaError

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"
ACTIONS = frozenset({"register_schema", "delete_versions", "set_compatibility"})
"""Metadata actions (and record types) this module plans and applies."""


class RegistryError(Exception):
    """A Confluent schema registry error: ``status`` (HTTP), ``error_code``, message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code

    def to_json(self) -> dict:
        return {"error_code": self.error_code, "message": str(self)}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


@dataclass(frozen=True)
class Schema:
    """One stored schema: its type, text and references (``[{name, subject, version}]``)."""

    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()

    def to_json(self) -> dict:
        """The fields of a schema in API answers (``schemaType`` only when not AVRO)."""
        out: dict = {"schema": self.text}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in self.references]
        return out


@dataclass
class Version:
    schema_id: int
    deleted: bool = False


class SchemaRegistryStore:
    """Schemas, subjects and compatibility levels (see the module docstring)."""

    def __init__(self) -> None:
        self.schemas: dict[int, Schema] = {}
        self.subjects: dict[str, dict[int, Version]] = {}
        self.levels: dict[str, str] = {}
        """Subject -> its compatibility level; ``""`` -> the global one."""
        self._ids: dict[Schema, int] = {}
        self.bytes = 0

    # ------------------------------------------------------------ reads
    def schema_id(self, schema: Schema) -> int | None:
        return self._ids.get(schema)

    def live_versions(self, subject: str, deleted: bool = False) -> list[int]:
        """The versions of ``subject`` not soft-deleted (``deleted``: those too), ascending."""
        return sorted(v for v, e in self.subjects.get(subject, {}).items() if deleted or not e.deleted)

    def referencing(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas of live versions that reference ``version`` of ``subject``, ascending."""
        return sorted({e.schema_id for vs in self.subjects.values() for e in vs.values() if not e.deleted and
                       any(r[1] == subject and r[2] == version for r in self.schemas[e.schema_id].references)})

    def reference_schemas(self, schema: Schema) -> list[Schema]:
        """The schemas ``schema`` references, theirs first (each once): the order their named
        types must be defined in before ``schema`` is parsed.

        Raises:
            RegistryError(42201): a reference to no version, or nesting deeper than
                ``MAX_SCHEMA_REFERENCE_DEPTH``.
        """
        out: list[Schema] = []
        done: set[tuple[str, int]] = set()

        def add(refs, depth: int) -> None:
            if refs and depth >= limits.MAX_SCHEMA_REFERENCE_DEPTH:
                raise RegistryError(422, 42201, f"Invalid schema: references nest deeper than "
                                                f"{limits.MAX_SCHEMA_REFERENCE_DEPTH}")
            for _, subject, version in refs:
                if (subject, version) in done:
                    continue
                done.add((subject, version))
                try:
                    ref = self.schemas[self.version(subject, version, deleted=True)[1]]
                except RegistryError as exc:
                    raise RegistryError(422, 42201, f"Invalid schema: reference {subject} version {version}: "
                                                    f"{exc}") from None
                add(ref.references, depth + 1)
                out.append(ref)

        add(schema.references, 0)
        return out

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.subjects.items()
                      if versions and (deleted or any(not e.deleted for e in versions.values())))

    def version(self, subject: str, version: str | int, deleted: bool = False) -> tuple[int, int]:
        """(version, schema id) of ``version`` (a number, ``latest`` or -1) of ``subject``.

        Raises:
            RegistryError: 40401 no such subject, 40402 no such version, 42202 a bad version.
        """
        if subject not in self.subject_names(deleted=True):
            raise subject_not_found(subject)
        versions = self.subjects[subject]
        visible = self.live_versions(subject, deleted)
        if str(version) in ("latest", "-1"):
            if not visible:
                raise subject_not_found(subject)
            n = visible[-1]
        else:
            try:
                n = int(version)
            except (TypeError, ValueError):
                n = 0
            if n < 1:
                raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                                "Allowed values are between [1, 2^31-1] and the string \"latest\"")
            if n not in visible:
                raise RegistryError(404, 40402, f"Version {version} not found.")
        return n, versions[n].schema_id

    def versions_of_id(self, schema_id: int) -> list[tuple[str, int]]:
        return sorted((s, v) for s, versions in self.subjects.items() for v, e in versions.items()
                      if e.schema_id == schema_id and not e.deleted)

    def level(self, subject: str | None) -> str:
        """The compatibility level in force for ``subject`` (its own, else the global one)."""
        return self.levels.get(subject or "") or self.levels.get("") or DEFAULT_LEVEL

    # ------------------------------------------------------------ persistence
    def to_json(self) -> dict:
        return {"schemas": [[i, s.schema_type, s.text, [list(r) for r in s.references]] for i, s in self.schemas.items()],
                "subjects": {n: [[v, e.schema_id, e.deleted] for v, e in vs.items()] for n, vs in self.subjects.items()},
                "levels": dict(self.levels)}

    @classmethod
    def from_json(cls, doc) -> "SchemaRegistryStore":
        store = cls()
        doc = doc or {}
        for i, schema_type, text, refs in doc.get("schemas") or ():
            store._add_schema(int(i), Schema(str(schema_type), str(text), tuple((str(n), str(s), int(v))
                                                                                 for n, s, v in refs)))
        store.subjects = {str(n): {int(v): Version(int(i), bool(d)) for v, i, d in vs}
                          for n, vs in dict(doc.get("subjects") or {}).items()}
        store.levels = {str(k): str(v) for k, v in dict(doc.get("levels") or {}).items()}
        return store

    def _add_schema(self, schema_id: int, schema: Schema) -> None:
        self.schemas[schema_id] = schema
        self._ids[schema] = schema_id
        self.bytes += len(schema.text)


# ================================================================== schemas
def _avro(store: SchemaRegistryStore, schema: Schema) -> avro.schema.Schema:
    """The parsed Avro schema, the named types of its references (and theirs) defined first.

    Raises:
        RegistryError(42201): not a valid Avro schema, or a reference that is not one.
    """
    names = avro.schema.Names()
    try:
        for ref in store.reference_schemas(schema):
            avro.schema.make_avsc_object(json.loads(ref.text), names)
        return avro.schema.make_avsc_object(json.loads(schema.text), names)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError, RecursionError) as exc:
        raise RegistryError(422, 42201, f"Invalid schema {schema.text[:200]}: {exc}") from None


def parse(store: SchemaRegistryStore, body: dict) -> Schema:
    """The schema a request body gives (``schema``, ``schemaType``, ``references``), normalized
    (AVRO and JSON texts as compact JSON) and checked for syntax.

    Raises:
        RegistryError: 42201 (invalid schema), 42202 (a bad reference), 422 42201 for a body
            without a schema string or a schema over ``MAX_SCHEMA_BYTES``.
    """
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise RegistryError(422, 42201, "Invalid schema: the body needs a \"schema\" string")
    schema_type = str(body.get("schemaType") or AVRO).upper()
    if schema_type not in SCHEMA_TYPES:
        raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
    text = body["schema"]
    if len(text.encode()) > limits.MAX_SCHEMA_BYTES:
        raise RegistryError(422, 42201, f"Invalid schema: larger than {limits.MAX_SCHEMA_BYTES} bytes")
    refs = []
    given_refs = body.get("references") or []
    if not isinstance(given_refs, list):
        raise RegistryError(422, 42201, "Invalid schema: references must be a list")
    for r in given_refs:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("subject"), str):
            raise RegistryError(422, 42201, f"Invalid reference {r!r}: it needs name, subject and version")
        try:
            refs.append((r["name"], r["subject"], int(r.get("version", -1))))
        except (TypeError, ValueError):
            raise RegistryError(422, 42201, f"Invalid reference {r!r}: a bad version") from None
    for _, subject, version in refs:  # resolve "latest" (-1) now: the stored reference names a version
        try:
            store.version(subject, version)
        except RegistryError as exc:
            raise RegistryError(422, 42201, f"Invalid schema: reference {subject} version {version}: {exc}") from None
    refs = [(n, s, store.version(s, v)[0]) for n, s, v in refs]
    if schema_type in (AVRO, JSON):
        try:
            text = json.dumps(json.loads(text), separators=(",", ":"))
        except (ValueError, RecursionError) as exc:
            raise RegistryError(422, 42201, f"Invalid schema {text[:200]}: {exc}") from None
    schema = Schema(schema_type, text, tuple(refs))
    if schema_type == AVRO:
        _avro(store, schema)
    return schema


def incompatibilities(store: SchemaRegistryStore, subject: str, schema: Schema, level: str | None = None,
                      against: list[int] | None = None) -> list[str]:
    """Why ``schema`` may not follow the versions of ``subject`` under its compatibility level
    (``level`` when given); ``[]`` when it may. ``against``: the versions to check (default: as
    the level says, the latest or every live one)."""
    level = level or store.level(subject)
    live = store.live_versions(subject)
    if level == "NONE" or not live or schema.schema_type != AVRO:
        return []
    if against is None:
        against = live if level.endswith("_TRANSITIVE") else live[-1:]
    new = _avro(store, schema)
    checker = ReaderWriterCompatibilityChecker()
    out = []
    for v in against:
        old_schema = store.schemas[store.subjects[subject][v].schema_id]
        if old_schema.schema_type != AVRO:
            continue
        old = _avro(store, old_schema)
        pairs = []
        if level.startswith(("BACKWARD", "FULL")):
            pairs.append(("read data written with", new, old))
        if level.startswith(("FORWARD", "FULL")):
            pairs.append(("be read by", old, new))
        for what, reader, writer in pairs:
            result = checker.get_compatibility(reader, writer)
            if result.compatibility != SchemaCompatibilityType.compatible:
                why = "; ".join(sorted(str(m) for m in result.messages)) or "incompatible"
                out.append(f"the new schema cannot {what} version {v} ({level}): {why}")
    return out


# ================================================================== planning (metadata leader / single broker)
def plan(store: SchemaRegistryStore, action: str, args: dict) -> tuple[dict | None, dict]:
    """Validate ``action`` against ``store``: (record to apply or None, reply). A refusal is the
    reply ``{"registry_error": [status, error code, message]}`` with no record.

    Raises:
        KafkaError(INVALID_REQUEST): malformed ``args`` (not what a broker sends).
    """
    try:
        if action == "register_schema":
            return _plan_register(store, args)
        if action == "delete_versions":
            return _plan_delete(store, args)
        if action == "set_compatibility":
            level = args.get("level")
            if level is not None and level not in LEVELS:
                raise RegistryError(422, 42203, f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}")
            return {"type": "set_compatibility", "subject": args.get("subject"), "level": level}, {}
    except RegistryError as exc:
        return None, {"registry_error": [exc.status, exc.error_code, str(exc)]}
    except (KeyError, TypeError, ValueError) as exc:
        raise KafkaError(f"malformed {action} request: {exc}", ErrorCode.INVALID_REQUEST) from None
    raise KafkaError(f"unknown schema registry action {action!r}", ErrorCode.INVALID_REQUEST)


def _plan_register(store: SchemaRegistryStore, args: dict) -> tuple[dict | None, dict]:
    subject = str(args["subject"])
    if not subject or len(subject) > limits.MAX_SCHEMA_SUBJECT_CHARS:
        raise RegistryError(422, 42208, f"The subject name must be 1 to {limits.MAX_SCHEMA_SUBJECT_CHARS} characters")
    schema = parse(store, args["body"])
    known = store.schema_id(schema)
    if known is not None and any(store.subjects[subject][v].schema_id == known for v in store.live_versions(subject)):
        return None, {"id": known}  # registered already: its id is the answer
    why = incompatibilities(store, subject, schema)
    if why:
        raise RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema for subject "
                                      f"\"{subject}\", details: [{'; '.join(why)}]")
    return {"type": "register_schema", "subject": subject, "schema_type": schema.schema_type, "schema": schema.text,
            "references": [list(r) for r in schema.references]}, {}


def _plan_delete(store: SchemaRegistryStore, args: dict) -> tuple[dict | None, dict]:
    subject, version, permanent = str(args["subject"]), args.get("version"), bool(args.get("permanent"))
    if subject not in store.subject_names(deleted=True):
        raise subject_not_found(subject)
    if version is None:
        live = store.live_versions(subject)
        if permanent:
            if live:
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                                "permanently deleted")
            versions = sorted(store.subjects[subject])
        else:
            if not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to "
                                                "delete permanently")
            versions = live
    else:
        n, _ = store.version(subject, version, deleted=permanent)
        if permanent and not store.subjects[subject][n].deleted:
            raise RegistryError(404, 40407, f"Subject '{subject}' Version {n} was not deleted first before being "
                                            "permanently deleted")
        versions = [n]
    for n in versions:
        if store.referencing(subject, n):
            raise RegistryError(422, 42206, f"One or more references exist to the schema {{subject={subject}, "
                                            f"version={n}}}")
    return {"type": "delete_versions", "subject": subject, "versions": versions, "permanent": permanent}, \
        {"versions": versions}


# ================================================================== applying (every broker)
def apply(store: SchemaRegistryStore, rec: dict) -> None:
    """Apply a committed schema registry record to ``store`` (idempotent where it can be: a
    schema registered again, a version deleted again, change nothing).

    Raises:
        KafkaError(INVALID_REQUEST): a bound (``MAX_SCHEMA_VERSIONS``, ``MAX_SCHEMA_REGISTRY_BYTES``).
        KeyError, TypeError, ValueError: a malformed record (nothing applied).
    """
    kind = rec["type"]
    if kind == "register_schema":
        subject = str(rec["subject"])
        schema = Schema(str(rec["schema_type"]), str(rec["schema"]),
                        tuple((str(n), str(s), int(v)) for n, s, v in rec.get("references") or ()))
        versions = store.subjects.get(subject, {})
        schema_id = store.schema_id(schema)
        if schema_id is not None and any(not e.deleted and e.schema_id == schema_id for e in versions.values()):
            return
        if sum(len(vs) for vs in store.subjects.values()) >= limits.MAX_SCHEMA_VERSIONS:
            raise KafkaError(f"the schema registry holds at most {limits.MAX_SCHEMA_VERSIONS} versions",
                             ErrorCode.INVALID_REQUEST)
        if schema_id is None:
            if store.bytes + len(schema.text) > limits.MAX_SCHEMA_REGISTRY_BYTES:
                raise KafkaError(f"the schema registry holds at most {limits.MAX_SCHEMA_REGISTRY_BYTES} bytes "
                                 "of schemas", ErrorCode.INVALID_REQUEST)
            schema_id = max(store.schemas, default=0) + 1
            store._add_schema(schema_id, schema)
        versions[max(versions, default=0) + 1] = Version(schema_id)
        store.subjects[subject] = versions
    elif kind == "delete_versions":
        versions = store.subjects.get(str(rec["subject"]), {})
        for n in rec["versions"]:
            if n not in versions:
                continue
            if rec.get("permanent"):
                del versions[n]
            else:
                versions[n].deleted = True
        if not versions:
            store.subjects.pop(str(rec["subject"]), None)
            store.levels.pop(str(rec["subject"]), None)
    elif kind == "set_compatibility":
        key = rec.get("subject") or ""
        if rec.get("level") is None:
            store.levels.pop(key, None)
        else:
            store.levels[key] = str(rec["level"])
    else:
        raise ValueError(f"not a schema registry record: {kind!r}")
