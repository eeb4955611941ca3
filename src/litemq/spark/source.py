"""The ``litemq`` data source class (PySpark Python Data Source API).

``format("litemq")`` reads and writes with the option names and the output schema of Spark's
built-in Kafka source and sink (see :mod:`litemq.spark.options` and ``docs/spark.md``).

Output schema (``includeHeaders=false``)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>   (includeHeaders=true)]

With ``value.format=avro`` the ``value`` column is the struct of a registered Avro schema
(:mod:`litemq.spark.avro_values`).

Source: PySpark ``pyspark.sql.datasource.DataSource``; Spark Kafka integration guide.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from litemq.spark.options import OptionError, avro_value_options, parse_source_options

HEADERS_SPARK_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False, value_type=None) -> StructType:
    """Spark's Kafka source schema (nullability as Spark declares it); ``value_type`` replaces
    ``value``'s binary type (``value.format=avro``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", value_type or BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE))
    return StructType(fields)


class LiteMQDataSource(DataSource):
    """``format("litemq")``: batch and streaming reads and writes of Kafka-protocol topics."""

    @classmethod
    def name(cls) -> str:
        return "litemq"

    def _include_headers(self) -> bool:
        return str(self.options.get("includeheaders", self.options.get("includeHeaders", "false"))).lower() == "true"

    def _avro_reader_schema(self):
        """(options, registry client, reader schema text, its references) with
        ``value.format=avro``, else None (the schema is fetched from the registry)."""
        avro_opts = avro_value_options(dict(self.options))
        if avro_opts is None:
            return None
        from litemq.spark.avro_values import RegistryClient

        registry = RegistryClient(avro_opts.url, avro_opts.user_info, avro_opts.bearer_token,
                                  avro_opts.ssl_ca_location)
        _, text, refs = registry.version(avro_opts.subject, avro_opts.version)
        return avro_opts, registry, text, refs

    def schema(self):
        avro = self._avro_reader_schema()
        if avro is None:
            return kafka_schema(self._include_headers())
        from litemq.spark.avro_values import value_type

        return kafka_schema(self._include_headers(), value_type(avro[2], avro[3]))

    def _source_options(self, schema, streaming: bool):
        so = parse_source_options(dict(self.options), streaming=streaming)
        avro = self._avro_reader_schema()
        if avro is not None:
            from pyspark.sql.pandas.types import to_arrow_type

            from litemq.spark.avro_values import ValueDecoder, value_type

            avro_opts, registry, text, refs = avro
            declared = schema["value"].dataType
            if value_type(text, refs) != declared:
                raise OptionError(f"the schema of {avro_opts.subject} changed while the query was planned; "
                                  "set value.schema.version")
            so.value_decoder = ValueDecoder(registry, text, refs, to_arrow_type(declared, timezone="UTC"),
                                            avro_opts.permissive)
        return so

    def reader(self, schema):
        from litemq.spark.reader import LiteMQBatchReader

        return LiteMQBatchReader(self._source_options(schema, streaming=False))

    def streamReader(self, schema):
        from litemq.spark.reader import LiteMQStreamReader

        return LiteMQStreamReader(self._source_options(schema, streaming=True))

    def writer(self, schema, overwrite: bool):
        from litemq.spark.writer import LiteMQBatchWriter

        return LiteMQBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema, overwrite: bool):
        from litemq.spark.writer import LiteMQStreamWriter

        return LiteMQStreamWriter(dict(self.options), schema)
