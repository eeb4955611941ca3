"""The broker's HTTP port as HTTPS (``http.ssl.enabled=true``, the broker's keystore): /metrics,
the REST API with Basic credentials and the console over TLS verified against the test CA;
plain HTTP to the port gets no answer; the setting without a keystore is refused."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest

from litemq.config import BrokerConfig
from litemq.security.tls import http_server_context
from litemq.testing.process import BrokerProcess

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def _get(url: str, ctx: ssl.SSLContext | None, user: str | None = None) -> tuple[int, bytes]:
    headers = {} if user is None else {
        "Authorization": "Basic " + base64.b64encode(f"{user}:{user}-secret".encode()).decode()}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_https_port(tmp_path, pki):
    overrides = {**pki.broker_overrides(), "http.ssl.enabled": "true", "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS}
    with BrokerProcess(tmp_path / "data", overrides=overrides, listeners={"SASL_SSL": 0}, http_port=0) as broker:
        base = broker.http_url
        assert base.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(pki.ca_pem))
        status, body = _get(base + "/metrics", ctx)
        assert status == 200 and b"kafka_server_socket_server_metrics_connection_count" in body
        # only SASL listeners: the REST API needs credentials, and gets them encrypted
        assert _get(base + "/v3/clusters", ctx)[0] == 401
        status, body = _get(base + "/v3/clusters", ctx, "alice")
        assert status == 200 and json.loads(body)["data"][0]["cluster_id"]
        assert _get(base + "/console/", ctx)[0] == 200
        with pytest.raises(urllib.error.URLError):  # the system CAs do not know the test CA
            _get(base + "/metrics", ssl.create_default_context())
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):  # no plain HTTP
            _get(base.replace("https://", "http://") + "/metrics", None)


def test_https_without_a_keystore_is_refused():
    with pytest.raises(ValueError, match="http.ssl.enabled: ssl.keystore.location is required"):
        http_server_context(BrokerConfig.from_sources(overrides={"http.ssl.enabled": "true"}))
    assert http_server_context(BrokerConfig.from_sources(overrides={})) is None
