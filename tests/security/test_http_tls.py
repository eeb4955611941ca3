"""The broker's HTTP port as HTTPS (``http.ssl.enabled=true``, the broker's keystore): /metrics,
the REST API with Basic credentials and the console over TLS verified against the test CA;
plain HTTP to the port gets no answer; the setting without a keystore is refused. The Spark
data source's schema registry client reaches it with the CA and Basic or Bearer credentials."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest

from litemq.config import BrokerConfig
from litemq.security.tls import http_server_context
from litemq.spark.avro_values import RegistryClient
from litemq.testing.process import BrokerProcess
from tests.security.oauth_idp import unsecured_token

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
    overrides = {**pki.broker_overrides(), "http.ssl.enabled": "true", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
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
        # the Spark data source's registry client (value.format=avro): https with the CA, Basic or Bearer
        for client in (RegistryClient(base, "alice:alice-secret", ssl_ca_location=str(pki.ca_pem)),
                       RegistryClient(base, bearer_token=unsecured_token("alice"), ssl_ca_location=str(pki.ca_pem))):
            assert client.get("/subjects") == []
        for client, why in ((RegistryClient(base, ssl_ca_location=str(pki.ca_pem)), "401"),
                            (RegistryClient(base, bearer_token="not-a-token", ssl_ca_location=str(pki.ca_pem)), "401"),
                            (RegistryClient(base, "alice:alice-secret"), "cannot be reached")):
            with pytest.raises(ValueError, match=why):
                client.get("/subjects")


def test_https_without_a_keystore_is_refused():
    with pytest.raises(ValueError, match="http.ssl.enabled: ssl.keystore.location is required"):
        http_server_context(BrokerConfig.from_sources(overrides={"http.ssl.enabled": "true"}))
    assert http_server_context(BrokerConfig.from_sources(overrides={})) is None
