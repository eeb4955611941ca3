"""PySpark connector: ``format("litemq")`` for batch and streaming reads and writes.

Importing this package registers the data source with the active SparkSession, if there is
one; :func:`register` does it for a given session. PySpark also finds it on its own through
the top-level module ``pyspark_litemq`` (automatic lookup of ``pyspark_*`` modules exposing a
``DefaultSource``), so ``format("litemq")`` works without any import in a fresh session.

    >>> import litemq.spark
    >>> df = (spark.readStream.format("litemq")
    ...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
    ...       .option("subscribe", "events").load())

Requires pyspark >= 4.2 (``latestOffset(start, limit)``), pyarrow, confluent-kafka.
"""

from __future__ import annotations

from litemq.spark.source import LiteMQDataSource, kafka_schema

__all__ = ["LiteMQDataSource", "kafka_schema", "register"]


def register(spark=None) -> None:
    """Register ``format("litemq")`` with ``spark`` (default: the active session, if any)."""
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return
    spark.dataSource.register(LiteMQDataSource)


try:
    register()
except Exception:  # importing must never fail because of a session in a strange state
    pass
