"""The Spark data source against a SASL listener configured as for Spark's own Kafka source:
the Java client's ``kafka.sasl.jaas.config`` (an OAuth login with unsecured tokens, and a
PLAIN user) is translated to librdkafka's settings, so the same job options authenticate, and
the executors read through the fast path (``litemq.spark.wire``), which speaks SASL too.
One broker process whose SASL_PLAINTEXT listener offers OAUTHBEARER and PLAIN; real Spark in
``local[2]``: a batch write, then a batch read of what was written."""

from __future__ import annotations

import pytest

from litemq.security.client_settings import librdkafka_security_settings
from litemq.spark import wire
from litemq.spark.options import client_config
from litemq.testing.process import BrokerProcess
from tests.integration.admin_helpers import unique_name

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="etl" password="etl-secret";')
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="etl-job" unsecuredLoginListClaim_scope="|kafka|spark";')


def test_java_login_settings_translate():
    assert librdkafka_security_settings({"sasl.jaas.config": PLAIN_JAAS, "sasl.mechanism": "PLAIN"}) == {
        "sasl.mechanism": "PLAIN", "sasl.username": "etl", "sasl.password": "etl-secret"}
    assert librdkafka_security_settings({"sasl.jaas.config": OAUTH_JAAS}) == {
        "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=etl-job scope=kafka,spark"}
    oidc = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" '
            'clientSecret="s\\"x" scope="kafka";')
    assert librdkafka_security_settings({"sasl.jaas.config": oidc, "sasl.oauthbearer.token.endpoint.url": "https://t",
                                         "sasl.login.callback.handler.class": "org.apache.kafka.X"}) == {
        "sasl.oauthbearer.token.endpoint.url": "https://t", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": 's"x', "sasl.oauthbearer.scope": "kafka"}
    # librdkafka's own names win over the JAAS config
    assert librdkafka_security_settings({"sasl.jaas.config": PLAIN_JAAS, "sasl.username": "other"})["sasl.username"] \
        == "other"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    overrides = {"sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                     'org.apache.kafka.common.security.plain.PlainLoginModule required user_etl="etl-secret";'}
    with BrokerProcess(tmp_path_factory.mktemp("spark-sasl") / "data", overrides=overrides,
                       listeners={"PLAINTEXT": 0, "SASL_PLAINTEXT": 0}) as proc:
        yield proc


@pytest.mark.parametrize("mechanism,jaas", [("OAUTHBEARER", OAUTH_JAAS), ("PLAIN", PLAIN_JAAS)])
def test_spark_job_with_a_java_sasl_login(spark, sasl_broker, mechanism, jaas):
    topic = unique_name("spark-sasl")
    security = {"kafka.bootstrap.servers": sasl_broker.bootstrap("SASL_PLAINTEXT"),
                "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": mechanism,
                "kafka.sasl.jaas.config": jaas}
    # the executors read with the fast path (LiteMQ's codec and Arrow), not the confluent-kafka fallback
    assert wire.supports(client_config({k.lower(): v for k, v in security.items()}))
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (spark.createDataFrame(rows, "key STRING, value STRING").write.format("litemq")
     .options(**security).option("topic", topic).mode("append").save())
    got = (spark.read.format("litemq").options(**security).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
           .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect())
    assert sorted((r.k, r.v) for r in got) == sorted(rows)
    log = sasl_broker.log_path.read_text()
    assert "Failed authentication" not in log
