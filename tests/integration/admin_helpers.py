"""Helpers of the admin-API tests: unique names, the error code of a failed admin future, and
the pages of a DescribeTopicPartitions."""

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


def describe_topic_partition_pages(admin, topics: list[str], limit: int) -> list[dict]:
    """Every page of kafka-python's ``describe_topic_partitions(topics)`` (DescribeTopicPartitions,
    KIP-966) with ``limit`` partitions a page, following ``next_cursor`` from the start."""
    pages, cursor = [], None
    for _ in range(100):
        page = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
    pytest.fail(f"no end after 100 pages: {pages[-3:]}")
