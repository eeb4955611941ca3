"""LogManager: load_all after clean/unclean shutdown, create/get/delete, dir-name parsing."""

from __future__ import annotations

from litemq.storage.config import LogConfig
from litemq.storage.manager import LogManager, parse_partition_dir_name
from storage_helpers import batch, offsets


def test_parse_dir_names():
    assert parse_partition_dir_name("my-topic.v2-12") == ("my-topic.v2", 12)
    assert parse_partition_dir_name("topic") is None
    assert parse_partition_dir_name("topic-x") is None
    assert parse_partition_dir_name("-3") is None


def test_manager_roundtrip(tmp_path):
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=1024))
    a = mgr.create("a-b.c", 0)
    b = mgr.create("x", 7)
    assert mgr.create("x", 7) is b
    for _ in range(10):
        a.append(batch(2), leader_epoch=1)
    b.append(batch(1), leader_epoch=1)
    mgr.close_all()
    (tmp_path / "not a partition").mkdir()
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=1024))
    logs = mgr.load_all()
    assert set(logs) == {("a-b.c", 0), ("x", 7)}
    assert offsets(logs[("a-b.c", 0)].read_bytes(0, 10**6)) == list(range(20))
    assert mgr.get("x", 7).log_end_offset == 1
    assert mgr.delete("x", 7)
    assert not (tmp_path / "x-7").exists()
    assert mgr.get("x", 7) is None
    mgr.close_all()
