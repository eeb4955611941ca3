"""Kafka's ``partition.metadata`` file (KIP-516): its exact format, and a missing or malformed
file read as no topic id, never raised."""

from __future__ import annotations

import uuid

from litemq.storage.partition_metadata import PARTITION_METADATA_FILE, read_topic_id, write_topic_id


def test_kafka_format_round_trip(tmp_path):
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    write_topic_id(tmp_path, topic_id)
    # Kafka's Uuid.toString: base64url of the 16 bytes without padding
    assert (tmp_path / PARTITION_METADATA_FILE).read_text() == "version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n"
    assert read_topic_id(tmp_path) == topic_id


def test_missing_or_malformed_is_no_topic_id(tmp_path):
    assert read_topic_id(tmp_path) is None
    for content in (b"\xff\xfe", b"garbage", b"version: 7\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n",
                    b"version: 0\ntopic_id: !!\n"):
        (tmp_path / PARTITION_METADATA_FILE).write_bytes(content)
        assert read_topic_id(tmp_path) is None, content
