"""``litemq ingest``: line handling (CRLF, no final newline, undecodable bytes), keys, record
timestamps, headers, one topic per source vs --single-topic, and --follow surviving rotation
and truncation. Real broker process, real confluent-kafka consumer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from litemq.pipeline.ingest import FollowedFile, Ingester, ingest, resolve_sources, source_name

from .conftest import read_topic

HDFS = [
    b"081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
    b"081109 203807 222 INFO dfs.DataNode$PacketResponder: PacketResponder 0 for block blk_-6952295868487656571 terminating",
    b"081109 204005 35 INFO dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blockMap updated: 10.251.73.220:50010 is added to blk_7128370237687728475 size 67108864",
]


def test_crlf_no_final_newline_undecodable_bytes(broker, tmp_path, prefix):
    f = tmp_path / "hdfs.log"
    bad = b"081109 204015 308 INFO dfs.DataNode$PacketResponder: bad \xff\xfe bytes \xc3("
    f.write_bytes(HDFS[0] + b"\r\n" + HDFS[1] + b"\r\n\r\n" + bad + b"\n" + HDFS[2])   # no final newline
    stats = ingest([str(f)], broker.bootstrap_servers, topic_prefix=prefix)
    assert stats.lines == 4 and stats.errors == 0
    msgs = read_topic(broker.bootstrap_servers, prefix + "hdfs")
    assert [m.value() for m in msgs] == [HDFS[0], HDFS[1], bad, HDFS[2]]      # CR stripped, bytes kept as-is
    # key = component (hdfs has no host), timestamp = the line's own (081109 203615, read as UTC)
    assert msgs[0].key() == b"dfs.DataNode$PacketResponder"
    assert msgs[0].timestamp()[1] == int(datetime(2008, 11, 9, 20, 36, 15, tzinfo=timezone.utc).timestamp() * 1000)
    assert dict(msgs[0].headers()) == {"source": b"hdfs", "format": b"hdfs"}


def test_access_log_key_timestamp_and_single_topic(broker, tmp_path, prefix):
    a = tmp_path / "web1.log"
    a.write_text('1.2.3.4 - - [17/May/2015:10:05:03 +0200] "GET /x HTTP/1.1" 200 12 "-" "curl"\n')
    b = tmp_path / "web2.log"
    b.write_text('5.6.7.8 - - [17/May/2015:10:06:00 +0000] "GET /y HTTP/1.1" 500 7 "-" "curl"\n')
    topic = prefix + "all"
    ingest([str(tmp_path / "web*.log")], broker.bootstrap_servers, single_topic=topic)
    msgs = read_topic(broker.bootstrap_servers, topic)
    assert sorted(dict(m.headers())["source"] for m in msgs) == [b"web1", b"web2"]
    ts = {dict(m.headers())["source"]: m.timestamp()[1] for m in msgs}
    assert ts[b"web1"] == int(datetime(2015, 5, 17, 8, 5, 3, tzinfo=timezone.utc).timestamp() * 1000)          # 10:05:03 +0200 = 08:05:03 UTC
    assert all(m.key() is None for m in msgs)     # access logs have no host/component


def test_lines_dated_ahead_of_the_broker_clock_are_not_refused(broker, tmp_path, prefix):
    """A line whose own time is more than an hour ahead (a source east of UTC whose zone-less
    times are read as UTC; an access log stamped in the future) would be refused by the topic
    (``message.timestamp.after.max.ms``, Kafka 4's one hour): the record takes the time it was
    sent, the line keeps its own. Lines within the hour keep their own time as the record's."""
    now = datetime.now(timezone.utc)
    ahead, near = now + timedelta(hours=5), now + timedelta(minutes=20)
    f = tmp_path / "web.log"
    f.write_text("".join(f'1.2.3.4 - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "GET /{n} HTTP/1.1" 200 1 "-" "c"\n'
                         for n, t in (("ahead", ahead), ("near", near))))
    sent_ms = int(time.time() * 1000)
    stats = ingest([str(f)], broker.bootstrap_servers, topic_prefix=prefix)
    assert stats.lines == 2 and stats.errors == 0
    msgs = read_topic(broker.bootstrap_servers, prefix + "web")
    by_path = {m.value().split(b" ")[6]: m.timestamp()[1] for m in msgs}
    assert sent_ms <= by_path[b"/ahead"] <= int(time.time() * 1000)
    assert by_path[b"/near"] == int(near.replace(microsecond=0).timestamp() * 1000)


def test_resolve_sources_names(tmp_path):
    (tmp_path / "d").mkdir()
    for n in ("a.log", "b.txt", ".hidden", "a.log.1", "a.log.2.gz", "b.txt-20261129", "b.txt-2026112901.gz"):
        (tmp_path / "d" / n).write_text("x\n")  # rotated copies in a directory are no sources
    (tmp_path / "a.log").write_text("x\n")
    srcs = resolve_sources([str(tmp_path / "d"), str(tmp_path / "a.log")], "logs.")
    assert [s.name for s in srcs] == ["a", "b", "a_2"]
    assert [s.topic for s in srcs] == ["logs.a", "logs.b", "logs.a_2"]
    assert source_name("/var/log/Nginx Access.log.gz") == "Nginx_Access"


def test_followed_file_rotation_and_truncation(tmp_path):
    p = tmp_path / "app.log"
    p.write_bytes(b"one\r\ntwo\npart")
    ff = FollowedFile(p)
    assert ff.poll() == [b"one", b"two"]            # partial line held
    with open(p, "ab") as fh:
        fh.write(b"ial\nthree\n")
    assert ff.poll() == [b"partial", b"three"]
    with open(p, "ab") as fh:
        fh.write(b"last-of-old")                      # rotated away without a final newline
    os.rename(p, tmp_path / "app.log.1")
    assert ff.poll() == []                            # new file not there yet: keep the old one
    p.write_bytes(b"new1\n")
    assert ff.poll() == [b"last-of-old", b"new1"]
    with open(p, "wb") as fh:                         # copytruncate
        fh.write(b"t\n")
    assert ff.poll() == [b"t"]
    with open(p, "ab") as fh:
        fh.write(b"tail-no-newline")
    ff2 = FollowedFile(p, from_end=True)
    assert ff2.poll() == [] and ff2.close(flush=True) == []
    assert ff.close(flush=True) == [b"tail-no-newline"]    # emitted at shutdown


def test_follow_mode_with_rotation_end_to_end(broker, tmp_path, prefix):
    d = tmp_path / "logs"
    d.mkdir()
    p = d / "svc.log"
    p.write_bytes(HDFS[0] + b"\n")
    stop = threading.Event()
    ing = Ingester(broker.bootstrap_servers)
    th = threading.Thread(target=ing.follow, args=([str(d)],),  # the directory: rescanned every second
                          kwargs={"topic_prefix": prefix, "stop": stop, "poll_interval_s": 0.05})
    th.start()
    try:
        time.sleep(0.5)
        with open(p, "ab") as fh:
            fh.write(HDFS[1] + b"\n")
        time.sleep(0.5)
        os.rename(p, d / "svc.log.1")                 # logrotate: rename, then a new file
        p.write_bytes(HDFS[2] + b"\n")
        time.sleep(0.5)
        with open(p, "ab") as fh:
            fh.write(b"no newline at the end")
        time.sleep(0.3)
    finally:
        stop.set()
        th.join(30)
    msgs = read_topic(broker.bootstrap_servers, prefix + "svc")
    assert [m.value() for m in msgs] == [HDFS[0], HDFS[1], HDFS[2], b"no newline at the end"]
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics
    assert [t for t in topics if t.startswith(prefix)] == [prefix + "svc"]  # svc.log.1 sent nothing again


def test_cli_ingest_rate(broker, tmp_path, prefix):
    f = tmp_path / "r.log"
    f.write_bytes(b"".join(HDFS[i % 3] + b"\n" for i in range(20)))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "ingest", str(f), "-b", broker.bootstrap_servers,
                        "--topic-prefix", prefix, "--rate", "40"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ingested 20 lines" in r.stderr
    assert time.monotonic() - t0 >= 0.45             # 20 lines at 40 lines/s
    assert len(read_topic(broker.bootstrap_servers, prefix + "r")) == 20


def test_speed_replay_merges_sources_in_time_order(broker, tmp_path, prefix):
    def line(sec, tag):
        return f"081109 2036{sec:02d} 1 INFO dfs.DataNode: {tag} at {sec}".encode()

    (tmp_path / "a.log").write_bytes(b"\n".join(line(s, "a") for s in (0, 4, 8)) + b"\n")
    (tmp_path / "b.log").write_bytes(b"\n".join(line(s, "b") for s in (2, 6)) + b"\n")
    topic = prefix + "merged"
    t0 = time.monotonic()
    ingest([str(tmp_path / "a.log"), str(tmp_path / "b.log")], broker.bootstrap_servers, single_topic=topic,
           speed=10.0)                                 # 8 s of log time at 10x = 0.8 s
    took = time.monotonic() - t0
    assert 0.7 <= took < 10, took
    msgs = read_topic(broker.bootstrap_servers, topic)
    assert [m.value().split(b": ")[1] for m in msgs] == [b"a at 0", b"b at 2", b"a at 4", b"b at 6", b"a at 8"]


def test_a_source_year_dates_its_yearless_lines_and_travels_in_a_header(broker, tmp_path, prefix):
    """``years`` (the demo passes loghub's collection years) dates a syslog file's lines in that
    year and sends it in a ``year`` header, which the analysis uses for the same lines; a file
    without one has no header and its lines are dated in the last 12 months."""
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    for f in (old, new):
        f.write_text("Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass; user unknown\n")
    stats = ingest([str(old), str(new)], broker.bootstrap_servers, topic_prefix=prefix, years={str(old): 2005})
    assert stats.lines == 2 and stats.errors == 0
    [m_old] = read_topic(broker.bootstrap_servers, prefix + "old")
    [m_new] = read_topic(broker.bootstrap_servers, prefix + "new")
    assert dict(m_old.headers())["year"] == b"2005"
    assert m_old.timestamp()[1] == int(datetime(2005, 6, 14, 15, 16, 1, tzinfo=timezone.utc).timestamp() * 1000)
    assert "year" not in dict(m_new.headers())
    assert datetime.now(timezone.utc).year - 1 <= datetime.fromtimestamp(
        m_new.timestamp()[1] / 1000, timezone.utc).year <= datetime.now(timezone.utc).year
