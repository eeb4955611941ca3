"""Helpers of the admin-API tests: unique names and the error code of a failed admin future."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import KafkaException


def unique_name(prefix: str) -> str:
    """``prefix`` plus a random suffix, so tests sharing one broker never collide."""
    return f"{prefix}-{random.randrange(1 << 30)}"


def error_code(fut, timeout_s: float = 30) -> int:
    """The Kafka error code of a confluent-kafka admin future that must fail."""
    with pytest.raises(KafkaException) as exc:
        fut.result(timeout=timeout_s)
    return exc.value.args[0].code()
