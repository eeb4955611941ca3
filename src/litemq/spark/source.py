"""The ``litemq`` data source class (PySpark Python Data Source API).

``format("litemq")`` reads and writes with the option names and the output schema of Spark's
built-in Kafka source and sink (see :mod:`litemq.spark.options` and ``docs/spark.md``).

Output schema (``includeHeaders=false``)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>   (includeHeaders=true)]

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

from litemq.spark.options import parse_source_options

HEADERS_SPARK_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (nullability as Spark declares it)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
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

    def schema(self):
        return kafka_schema(self._include_headers())

    def reader(self, schema):
        from litemq.spark.reader import LiteMQBatchReader

        return LiteMQBatchReader(parse_source_options(dict(self.options), streaming=False))

    def streamReader(self, schema):
        from litemq.spark.reader import LiteMQStreamReader

        return LiteMQStreamReader(parse_source_options(dict(self.options), streaming=True))

    def writer(self, schema, overwrite: bool):
        from litemq.spark.writer import LiteMQBatchWriter

        return LiteMQBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema, overwrite: bool):
        from litemq.spark.writer import LiteMQStreamWriter

        return LiteMQStreamWriter(dict(self.options), schema)
