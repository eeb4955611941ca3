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


def test_data_dir_is_locked_while_a_manager_has_it(tmp_path):
    """One broker per data dir (Kafka's ``.lock``): a second LogManager - here in the same
    process, as two embedded brokers would be - is refused naming the directory and the
    holder's pid until the first one closes."""
    import os

    import pytest

    from litemq.storage.dir_lock import DataDirInUseError

    data = tmp_path / "data"
    first = LogManager(data, LogConfig())  # creates the directory
    first.create("t", 0).append(batch(1), leader_epoch=0)
    assert (data / ".lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(DataDirInUseError) as info:
        LogManager(data, LogConfig())
    assert str(info.value) == f"data dir {data} is in use by another broker (pid {os.getpid()} holds {data}/.lock)"
    assert isinstance(info.value, OSError)
    first.close_all()
    assert (data / ".lock").read_text() == ""
    second = LogManager(data, LogConfig())
    assert set(second.load_all()) == {("t", 0)}  # .lock is no partition directory
    assert second.get("t", 0).log_end_offset == 1
    second.close_all()
    second.close_all()  # idempotent
