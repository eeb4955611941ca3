"""Avro values in the schema registry's wire format, decoded by the ``litemq`` source into a
struct ``value`` column (``value.format=avro``): what Spark's ``from_avro`` with a schema
registry does, without the spark-avro package the pyspark wheel lacks.

The reader schema is a version of a subject (``value.subject``, default ``<topic>-value``;
``value.schema.version``, default the latest), fetched from the registry
(``schema.registry.url``: a LiteMQ broker's HTTP port, or any Confluent-compatible registry) when
Spark plans the query; the column's type is its Spark equivalent. Each value is read with the
schema of its own id (fetched once per worker process) resolved to the reader schema (Avro's
schema resolution: a field added with a default is filled in), by ``fastavro``. A value that is
not in the wire format, names an unknown id or does not decode fails the task
(``value.decode.mode=FAILFAST``, Spark's default) or is null (``PERMISSIVE``).

Types (Spark ``SchemaConverters``): boolean, int, long, float, double, string, bytes and fixed
(binary), enum (string), record (struct), array, map (string keys), a union of one type with
null (that type, nullable), logical types date, timestamp-millis/-micros (timestamp),
local-timestamp-millis/-micros (timestamp_ntz), decimal, uuid (string), time-millis/-micros
(their int/long). Other unions are refused when the query is planned.

Sources: Confluent schema registry wire format and REST API; Spark ``from_avro`` /
``SchemaConverters``; Avro 1.12 specification (schema resolution).
"""

from __future__ import annotations

import base64
import io
import json
import ssl
import struct
import urllib.error
import urllib.request
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from litemq import limits

_HEADER = struct.Struct(">bI")
_PRIMITIVES: dict[str, DataType] = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
                                    "float": FloatType(), "double": DoubleType(), "string": StringType(),
                                    "bytes": BinaryType()}
_LOGICAL: dict[str, DataType] = {"date": DateType(), "timestamp-millis": TimestampType(),
                                 "timestamp-micros": TimestampType(), "local-timestamp-millis": TimestampNTZType(),
                                 "local-timestamp-micros": TimestampNTZType(), "uuid": StringType()}


class RegistryClient:
    """GETs of a schema registry's REST API. Picklable.

    Args:
        url: ``http(s)://host:port`` of the registry.
        user_info: ``user:password`` for Basic auth.
        bearer_token: an OAuth token for ``Authorization: Bearer`` (a LiteMQ broker accepts what
            its OAUTHBEARER listeners accept).
        ssl_ca_location: PEM CA bundle that verifies an https registry (None: the system's CAs).
    """

    def __init__(self, url: str, user_info: str | None = None, bearer_token: str | None = None,
                 ssl_ca_location: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.user_info = user_info
        self.bearer_token = bearer_token
        self.ssl_ca_location = ssl_ca_location

    def get(self, path: str) -> Any:
        """The JSON answer of ``GET path``.

        Raises:
            ValueError: the registry answered an error (its message), or could not be reached.
        """
        req = urllib.request.Request(self.url + path, headers={"Accept": "application/vnd.schemaregistry.v1+json"})
        if self.bearer_token:
            req.add_header("Authorization", "Bearer " + self.bearer_token)
        elif self.user_info:
            req.add_header("Authorization", "Basic " + base64.b64encode(self.user_info.encode()).decode())
        context = None
        if self.url.startswith("https://"):
            context = ssl.create_default_context(cafile=self.ssl_ca_location or None)
        try:
            with urllib.request.urlopen(req, timeout=limits.SPARK_SCHEMA_REGISTRY_TIMEOUT_S, context=context) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(f"schema registry {self.url}{path}: {exc.code} {exc.read()[:300]!r}") from None
        except OSError as exc:
            raise ValueError(f"schema registry {self.url} cannot be reached: {exc}") from None

    def schema(self, schema_id: int) -> tuple[str, list[str]]:
        """(schema text, the texts of its references, dependencies first) of id ``schema_id``."""
        answer = self.get(f"/schemas/ids/{int(schema_id)}")
        return answer["schema"], self._references(answer.get("references") or [])

    def version(self, subject: str, version: str) -> tuple[int, str, list[str]]:
        """(id, schema text, reference texts) of ``version`` (a number or ``latest``) of ``subject``."""
        answer = self.get(f"/subjects/{urllib.request.quote(subject, safe='')}/versions/{version}")
        if answer.get("schemaType", "AVRO") != "AVRO":
            raise ValueError(f"subject {subject} version {version} is a {answer['schemaType']} schema, not Avro")
        return int(answer["id"]), answer["schema"], self._references(answer.get("references") or [])

    def _references(self, refs: list[dict], depth: int = 0) -> list[str]:
        out: list[str] = []
        for ref in refs:
            if depth >= limits.MAX_SCHEMA_REFERENCE_DEPTH:
                raise ValueError("schema references nest too deep")
            answer = self.get(f"/subjects/{urllib.request.quote(ref['subject'], safe='')}/versions/{ref['version']}")
            out += self._references(answer.get("references") or [], depth + 1) + [answer["schema"]]
        return out


_PLAIN_LOGICAL = frozenset({"uuid", "time-millis", "time-micros"})
"""Logical types read as their underlying type (string, int, long): Spark has no UUID or time
column, and fastavro would give ``uuid.UUID`` / ``datetime.time`` objects."""


def _plain(schema):
    """``schema`` (JSON form) without the logical types of :data:`_PLAIN_LOGICAL`."""
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not (k == "logicalType" and v in _PLAIN_LOGICAL)}
    for key in ("items", "values"):
        if key in out:
            out[key] = _plain(out[key])
    if "fields" in out:
        out["fields"] = [{**f, "type": _plain(f["type"])} for f in out["fields"]]
    if isinstance(out.get("type"), (dict, list)):
        out["type"] = _plain(out["type"])
    return out


def parse(text: str, references: list[str]) -> dict:
    """The fastavro-parsed schema ``text`` with the named types of ``references`` defined first
    (logical types of :data:`_PLAIN_LOGICAL` left out)."""
    named: dict = {}
    for ref in references:
        fastavro.parse_schema(_plain(json.loads(ref)), named)
    return fastavro.parse_schema(_plain(json.loads(text)), named)


def spark_type(schema, named: dict | None = None) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema (JSON form), as Spark's ``SchemaConverters``.

    Raises:
        ValueError: a union of several non-null types, or a type Spark has no equivalent for.
    """
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], False
        if schema == "null":
            return StringType(), True
        if schema in named:
            return named[schema], False
        raise ValueError(f"unknown Avro type {schema!r}")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"Avro union {json.dumps(schema)[:200]}: only a type with null is supported")
        return spark_type(branches[0], named)[0], True
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal":
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
    if logical in _LOGICAL:
        return _LOGICAL[logical], False
    if kind == "record":
        struct_type = StructType([StructField(f["name"], *spark_type(f["type"], named)) for f in schema["fields"]])
        named[_full_name(schema)] = named[schema["name"]] = struct_type
        return struct_type, False
    if kind == "enum":
        named[_full_name(schema)] = named[schema["name"]] = StringType()
        return StringType(), False
    if kind == "fixed":
        named[_full_name(schema)] = named[schema["name"]] = BinaryType()
        return BinaryType(), False
    if kind == "array":
        item, nullable = spark_type(schema["items"], named)
        return ArrayType(item, nullable), False
    if kind == "map":
        value, nullable = spark_type(schema["values"], named)
        return MapType(StringType(), value, nullable), False
    return spark_type(kind, named)


def _full_name(schema: dict) -> str:
    name = schema["name"]
    return name if "." in name or not schema.get("namespace") else f"{schema['namespace']}.{name}"


def value_type(text: str, references: list[str]) -> StructType | DataType:
    """The Spark type of the ``value`` column for reader schema ``text``."""
    named: dict = {}
    for ref in references:
        spark_type(json.loads(ref), named)
    return spark_type(json.loads(text), named)[0]


class ValueDecoder:
    """Decodes the ``value`` column of the source's RecordBatches (see the module docstring).
    Picklable: the parsed schemas are rebuilt in each worker."""

    def __init__(self, registry: RegistryClient, reader_text: str, reader_refs: list[str], arrow_type: pa.DataType,
                 permissive: bool) -> None:
        self.registry = registry
        self.reader_text = reader_text
        self.reader_refs = reader_refs
        self.arrow_type = arrow_type
        self.permissive = permissive
        self._reader = None
        self._writers: dict[int, Any] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_reader": None, "_writers": {}}

    def _writer(self, schema_id: int):
        parsed = self._writers.get(schema_id)
        if parsed is None:
            text, refs = self.registry.schema(schema_id)
            parsed = self._writers[schema_id] = parse(text, refs)
        return parsed

    def decode_value(self, data: bytes | None):
        """One value as fastavro reads it (dicts, lists, ...), or None for a null value.

        Raises:
            ValueError: not the wire format, an unknown id, or bytes the schema does not read.
        """
        if data is None:
            return None
        if len(data) < _HEADER.size or data[0] != 0:
            raise ValueError("not in the schema registry's wire format (magic byte 0, schema id)")
        if self._reader is None:
            self._reader = parse(self.reader_text, self.reader_refs)
        _, schema_id = _HEADER.unpack_from(data)
        buf = io.BytesIO(data)
        buf.seek(_HEADER.size)
        return fastavro.schemaless_reader(buf, self._writer(schema_id), self._reader)

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its binary ``value`` column replaced by the decoded struct column."""
        index = batch.schema.get_field_index("value")
        values = []
        for i, data in enumerate(batch.column(index).to_pylist()):
            try:
                values.append(self.decode_value(data))
            except Exception as exc:  # fastavro raises many kinds for bytes it cannot read
                if not self.permissive:
                    raise ValueError(f"value at offset {batch.column('offset')[i].as_py()} cannot be decoded "
                                     f"(value.decode.mode=FAILFAST): {exc}") from None
                values.append(None)
        column = pa.array(values, type=self.arrow_type)
        schema = batch.schema.set(index, pa.field("value", self.arrow_type))
        return pa.RecordBatch.from_arrays([column if i == index else c for i, c in enumerate(batch.columns)],
                                          schema=schema)


class ValueEncoder:
    """Encodes the sink's struct ``value`` column in the schema registry's wire format with a
    registered Avro schema (``value.format=avro`` on writes). Picklable."""

    def __init__(self, schema_id: int, text: str, refs: list[str]) -> None:
        self.schema_id = schema_id
        self.text = text
        self.refs = refs
        self._parsed = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_parsed": None}

    def encode_column(self, column: pa.Array) -> list[bytes | None]:
        """The column's values (structs as dicts, maps as dicts) as wire-format bytes.

        Raises:
            ValueError: a row the schema cannot write (its position and fastavro's reason).
        """
        if self._parsed is None:
            self._parsed = parse(self.text, self.refs)
        header = _HEADER.pack(0, self.schema_id)
        out: list[bytes | None] = []
        for i, row in enumerate(column.to_pylist(maps_as_pydicts="strict")):
            if row is None:
                out.append(None)
                continue
            buf = io.BytesIO()
            buf.write(header)
            try:
                fastavro.schemaless_writer(buf, self._parsed, row)
            except Exception as exc:  # fastavro raises many kinds for data that does not fit
                raise ValueError(f"row {i} of a batch does not fit schema {self.schema_id}: {exc}") from None
            out.append(buf.getvalue())
        return out
