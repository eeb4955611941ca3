"""A broker without an HTTP port (``http.listen=off``, the embedded default) serves Kafka
clients without loading aiohttp; turning the port on loads it and serves ``/metrics``."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys, urllib.request
import litemq
from confluent_kafka import Producer
with litemq.Broker({http}) as b:
    p = Producer({{"bootstrap.servers": b.bootstrap_servers}})
    p.produce("t", b"v")
    assert p.flush(10) == 0
    print("aiohttp" in sys.modules, b.http_url is not None)
    if b.http_url:
        print(b"litemq_" in urllib.request.urlopen(b.http_url + "/metrics", timeout=10).read())
"""


def _run(http: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(http=http)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_a_broker_without_http_port_does_not_load_aiohttp():
    assert _run("") == ["False", "False"]


def test_a_broker_with_http_port_serves_metrics():
    assert _run("http_port=0") == ["True", "True", "True"]
