"""Hosted partition replicas: the layer between the partition log (``storage/``) and the
broker, the coordinators and the replicated cluster (``cluster/``).

:class:`Partition` is one hosted partition (log, high watermark, waiters); the cluster's
``ReplicatedPartition`` extends it with Raft. :class:`ReplicaManager` holds a broker's partitions.
Runs on the broker's event loop; only flushes run in its executor.
"""

from litemq.replica.manager import Partition, ReplicaManager, timed_flush

__all__ = ["Partition", "ReplicaManager", "timed_flush"]
