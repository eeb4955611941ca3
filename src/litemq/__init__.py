"""LiteMQ: a Kafka-compatible streaming log written in Python.

``litemq.Broker`` runs a real broker inside the current process (see :mod:`litemq.embedded`).
"""

__version__ = "0.1.0"

__all__ = ["Broker", "__version__"]


def __getattr__(name: str):
    if name == "Broker":
        from litemq.embedded import Broker

        return Broker
    raise AttributeError(name)
