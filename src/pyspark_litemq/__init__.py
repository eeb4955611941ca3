"""Entry point for PySpark's automatic data source lookup: ``format("litemq")``.

PySpark imports every top-level module named ``pyspark_*`` and registers its ``DefaultSource``
under ``DefaultSource.name()``; see :mod:`litemq.spark`.
"""

from litemq.spark.source import LiteMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
