"""Keys and values in Confluent's schema registry wire format for the REST API: written from
JSON (Produce with ``"type": "AVRO"`` or ``"JSONSCHEMA"``) and shown as JSON (``format=schema``
when reading records).

The wire format (what confluent-kafka's serializers write and read): byte 0 (magic), the
schema id (int32, big-endian), then the payload: Avro binary for AVRO, UTF-8 JSON for JSON
Schema. Avro data in requests and answers is in Avro's JSON encoding (a union value is
``{"string": "x"}``, ``null`` alone; bytes are ``\\u00XX`` strings), as in Confluent's REST proxy.
Avro is read and written with ``fastavro``.

Sources: Confluent REST Proxy v3 produce API (``schema_id``, ``schema_version``, ``subject``),
Confluent schema registry wire format, Avro 1.12 specification (JSON encoding).
"""

from __future__ import annotations

import io
import json
import struct

import fastavro

from litemq.cluster import schema_registry as sr

MAGIC = 0
_HEADER = struct.Struct(">bI")
WIRE_TYPES = {"AVRO": sr.AVRO, "JSONSCHEMA": sr.JSON}
"""REST type -> registry schema type of the formats Produce writes."""


class SerdeError(ValueError):
    """Data that does not fit its schema, or a schema that cannot be found."""


def _parsed_avro(store: sr.SchemaRegistryStore, schema_id: int):
    schema = store.schemas[schema_id]
    named: dict = {}
    for ref in store.reference_schemas(schema):
        fastavro.parse_schema(json.loads(ref.text), named)
    return fastavro.parse_schema(json.loads(schema.text), named)


def schema_of(store: sr.SchemaRegistryStore, topic: str, part: str, spec: dict) -> int:
    """The schema id a produce request's key or value spec names: ``schema_id``, or
    ``schema_version`` (a number or ``latest``) of ``subject`` (default ``<topic>-<key|value>``,
    Confluent's TopicNameStrategy), or the subject's latest version.

    Raises:
        SerdeError: no such schema, or one of another type than the spec's.
    """
    kind = WIRE_TYPES[str(spec.get("type")).upper()]
    if spec.get("schema_id") is not None:
        try:
            schema_id = int(spec["schema_id"])
        except (TypeError, ValueError):
            raise SerdeError(f"schema_id {spec['schema_id']!r} is not a number") from None
        if schema_id not in store.schemas:
            raise SerdeError(f"schema {schema_id} not found")
    else:
        subject = spec.get("subject") or f"{topic}-{part}"
        try:
            _, schema_id = store.version(str(subject), spec.get("schema_version", "latest"))
        except sr.RegistryError as exc:
            raise SerdeError(f"subject {subject}: {exc}") from None
    if store.schemas[schema_id].schema_type != kind:
        raise SerdeError(f"schema {schema_id} is {store.schemas[schema_id].schema_type}, not {kind}")
    return schema_id


def encode(store: sr.SchemaRegistryStore, schema_id: int, data) -> bytes:
    """``data`` (Avro's JSON encoding, or any JSON for JSON Schema) in the wire format.

    Raises:
        SerdeError: Avro data that does not fit the schema.
    """
    schema = store.schemas[schema_id]
    header = _HEADER.pack(MAGIC, schema_id)
    if schema.schema_type == sr.JSON:
        return header + json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    try:
        parsed = _parsed_avro(store, schema_id)
        records = list(fastavro.json_reader(io.StringIO(json.dumps(data)), parsed))
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, records[0])
    except Exception as exc:  # fastavro raises many kinds for data that does not fit
        raise SerdeError(f"data does not fit schema {schema_id}: {exc}") from None
    return header + out.getvalue()


def decode(store: sr.SchemaRegistryStore, data: bytes) -> dict | None:
    """``{"type", "schema_id", "data"}`` of wire-format bytes whose schema the registry has (Avro
    shown in its JSON encoding); None for bytes that are not in the wire format or do not decode."""
    if len(data) < _HEADER.size or data[0] != MAGIC:
        return None
    _, schema_id = _HEADER.unpack_from(data)
    schema = store.schemas.get(schema_id)
    if schema is None:
        return None
    payload = data[_HEADER.size:]
    try:
        if schema.schema_type == sr.JSON:
            return {"type": "JSONSCHEMA", "schema_id": schema_id, "data": json.loads(payload)}
        if schema.schema_type != sr.AVRO:
            return None
        parsed = _parsed_avro(store, schema_id)
        reader = io.BytesIO(payload)
        value = fastavro.schemaless_reader(reader, parsed)
        if reader.tell() != len(payload):
            return None
        text = io.StringIO()
        fastavro.json_writer(text, parsed, [value])
        return {"type": "AVRO", "schema_id": schema_id, "data": json.loads(text.getvalue())}
    except Exception:  # noqa: BLE001 - not this schema's data: shown as bytes by the caller
        return None
