"""The web console in headless Chromium (Debian's ``chromium``, see scripts/setup.sh): after its
JavaScript ran against a real broker, the DOM shows the broker, the topic with its partitions and
high watermarks, the consumer group with its per-partition lag, the message browser's records
(key, value, headers), the registered schemas and throughput samples; the screenshot is a real
rendering (not blank).
An idle broker's console opens the browser on a user topic, not ``__consumer_offsets``, and
draws distinct y-axis ticks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from PIL import Image

from litemq.testing.process import BrokerProcess
from tests.observability.helpers import dom_tables, get_json

TOPIC = "console-orders"
GROUP = "console-billing"
WINDOW = (1280, 1800)


def _chromium(tmp_path, url: str, *mode: str) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``url`` until its JavaScript went idle for the virtual time budget."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (scripts/setup.sh installs Debian's chromium package)"
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--virtual-time-budget=6000", *mode, url]
    return subprocess.run(args, capture_output=True, text=True, timeout=90)


def test_console_in_headless_chromium(tmp_path):
    with BrokerProcess(tmp_path / "data", http_port=0) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            fut.result(15)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(30):
            p.produce(TOPIC, key=f"order-{i}".encode(), value=json.dumps({"order": i, "total": i * 10}).encode(),
                      partition=i % 2, headers=[("source", b"web-shop")])
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        seen = 0
        while seen < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            seen += m is not None and not m.error()
        c.commit(offsets=[TopicPartition(TOPIC, 0, 15), TopicPartition(TOPIC, 1, 4)], asynchronous=False)
        registry = SchemaRegistryClient({"url": broker.http_url})
        order = {"type": "record", "name": "Order", "fields": [{"name": "order", "type": "int"}]}
        registry.register_schema(f"{TOPIC}-value", Schema(json.dumps(order), "AVRO"))
        registry.set_compatibility(f"{TOPIC}-value", "FULL")

        url = f"{broker.http_url}/console/?topic={TOPIC}&partition=1&offset=2&max=5&refresh_ms=700"
        dumped = _chromium(tmp_path, url, "--dump-dom")
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        dom = dom_tables(dumped.stdout)
        assert dom.body_attrs.get("data-overview-loaded") == "1", dumped.stdout[:3000]
        assert dom.body_attrs.get("data-messages-loaded") == "1"
        assert int(dom.body_attrs.get("data-throughput-samples", "0")) >= 2  # polled, charts drawn

        brokers = dom.tables["brokers"][1:]
        assert brokers == [["1", f"127.0.0.1:{broker.port}", "–", "live", "voter", "controller"]]  # no rack
        assert dom.body_attrs.get("data-reassignments-loaded") == "1"
        assert dom.tables["reassignments"][1:] == [["No partition reassignment in progress."]]
        assert dom.tables["throttles"][1:] == [["No replication throttle set."]]
        topics = {row[0]: row for row in dom.tables["topics"][1:]}
        assert topics[TOPIC][1:4] == ["2", "1", "30"]  # partitions, replication factor, messages
        assert "__consumer_offsets" not in topics  # internal topics hidden unless asked for
        partitions = [row for row in dom.tables["partitions"][1:] if row[0] == TOPIC]
        assert [(r[1], r[2], r[5], r[6]) for r in partitions] == [("0", "1", "0", "15"), ("1", "1", "0", "15")]
        groups = {row[0]: row for row in dom.tables["groups"][1:]}
        assert groups[GROUP][1] == "Stable" and groups[GROUP][2] == "1" and groups[GROUP][4] == "11"
        lags = {(r[1], r[2]): r for r in dom.tables["lags"][1:] if r[0] == GROUP}
        assert lags[(TOPIC, "0")][3:6] == ["15", "15", "0"]
        assert lags[(TOPIC, "1")][3:6] == ["4", "15", "11"]
        assert lags[(TOPIC, "1")][6].startswith("rdkafka")  # the consumer owning the partition
        assert dom.body_attrs.get("data-schemas-loaded") == "1"
        assert dom.tables["schemas"][1:] == [[f"{TOPIC}-value", "1", "1", "1", "AVRO", "FULL"]]
        messages = dom.tables["messages"][1:]  # JSON values, not in the registry's format: as they are
        assert [r[0] for r in messages] == ["2", "3", "4", "5", "6"]
        assert messages[0][2] == "order-5" and json.loads(messages[0][3]) == {"order": 5, "total": 50}
        assert messages[0][4] == "source=web-shop" and messages[0][1].endswith("Z")
        assert 'id="chart-bytes"' in dumped.stdout and "<polyline" in dumped.stdout

        # the console's JSON agrees with what the page shows
        overview = get_json(broker.http_url + "/console/api/overview")
        assert [g["lag"] for g in overview["groups"] if g["group_id"] == GROUP] == [11]
        c.close()

        shot = tmp_path / "console.png"
        taken = _chromium(tmp_path, url, f"--screenshot={shot}")
        assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    with Image.open(shot) as img:
        assert img.size == WINDOW
        rgb = img.convert("RGB")
        colors = rgb.getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 200  # text, tables and charts, not a blank page
        most = max(colors)[0]
        assert most / (WINDOW[0] * WINDOW[1]) < 0.9
        header = rgb.crop((0, 0, WINDOW[0], 40)).getcolors(maxcolors=1 << 16)
        assert max(header)[1] == (0x15, 0x23, 0x3D)  # the console's dark header bar was painted


def _chart_ticks(page: str, chart_id: str) -> list[str]:
    """The y-axis tick labels of one chart in a dumped DOM, bottom to top."""
    svg = re.search(rf'<svg id="{chart_id}"[^>]*>(.*?)</svg>', page, re.S)
    assert svg, f"no chart {chart_id}"
    return re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg.group(1))


def test_idle_console_opens_on_a_user_topic_with_distinct_axis_ticks(tmp_path):
    """An idle broker with a consumer group (so ``__consumer_offsets`` exists): with internal
    topics unticked the message browser offers and selects only user topics; a link naming an
    internal topic ticks "internal topics" and opens on it; with no traffic every chart's
    y-axis labels are distinct (no ``1 B, 1 B, 1 B, 0 B, 0 B``)."""
    with BrokerProcess(tmp_path / "data", http_port=0) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for fut in admin.create_topics([NewTopic("alpha-logs", 1, 1), NewTopic("beta-logs", 1, 1)]).values():
            fut.result(15)
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("alpha-logs", 0, 0)], asynchronous=False)
        c.close()
        internal = [t["name"] for t in get_json(broker.http_url + "/console/api/overview")["topics"] if t["internal"]]
        assert "__consumer_offsets" in internal

        dumped = _chromium(tmp_path, f"{broker.http_url}/console/?refresh_ms=500", "--dump-dom")
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        dom = dom_tables(dumped.stdout)
        assert dom.body_attrs.get("data-overview-loaded") == "1", dumped.stdout[:3000]
        assert int(dom.body_attrs.get("data-throughput-samples", "0")) >= 3
        assert dom.body_attrs.get("data-browser-topic") == "alpha-logs"
        select = re.search(r'<select id="b-topic">(.*?)</select>', dumped.stdout, re.S).group(1)
        assert re.findall(r'<option value="([^"]*)"', select) == ["alpha-logs", "beta-logs"]
        for chart in ("chart-bytes", "chart-messages"):
            ticks = _chart_ticks(dumped.stdout, chart)
            assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), (chart, ticks)
            assert ticks[0] in ("0", "0 B"), (chart, ticks)

        linked = _chromium(tmp_path, f"{broker.http_url}/console/?topic=__consumer_offsets&refresh_ms=500",
                           "--dump-dom")
        assert linked.returncode == 0, linked.stderr[-2000:]
        linked_dom = dom_tables(linked.stdout)
        assert linked_dom.body_attrs.get("data-browser-topic") == "__consumer_offsets"
        assert "__consumer_offsets" in [row[0] for row in linked_dom.tables["topics"][1:]]  # ticked
