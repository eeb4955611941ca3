"""A Java Kafka client's security settings, translated to librdkafka's (confluent-kafka).

Users bring ``client.properties`` files and Spark ``kafka.*`` options written for Kafka's Java
clients, whose SASL login is a JAAS config. librdkafka has no JAAS; its names for the same
things (``sasl.username``, ``sasl.oauthbearer.method``, ...) are documented in its
CONFIGURATION.md. :func:`librdkafka_security_settings` maps one to the other; the CLI's
``--command-config`` and the Spark data source's ``kafka.*`` options both use it.

Sources: Kafka's ``PlainLoginModule``/``ScramLoginModule`` (``username``, ``password``),
``OAuthBearerLoginModule`` with ``OAuthBearerLoginCallbackHandler`` (KIP-768: ``clientId``,
``clientSecret``, ``scope``) and with its unsecured login options (KIP-255:
``unsecuredLoginStringClaim_sub``, ``unsecuredLoginListClaim_scope``,
``unsecuredLoginLifetimeSeconds``).
"""

from __future__ import annotations

import re

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
JAVA_ONLY_SECURITY_SETTINGS = ("sasl.jaas.config", "sasl.login.callback.handler.class")
"""Java client settings that have no librdkafka name; translated (the JAAS config) or dropped."""


def librdkafka_security_settings(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` without the Java-only security settings, plus what their JAAS config says
    in librdkafka's names (a setting already given in librdkafka's name wins):

    - ``username="..." password="..."`` (PLAIN, SCRAM) -> ``sasl.username``, ``sasl.password``;
    - ``OAuthBearerLoginModule`` with ``clientId`` -> ``sasl.oauthbearer.method=oidc`` and
      ``sasl.oauthbearer.client.id``/``.client.secret``/``.scope`` (``sasl.oauthbearer.token.
      endpoint.url`` has the same name in both);
    - ``OAuthBearerLoginModule`` with ``unsecuredLoginStringClaim_sub`` ->
      ``enable.sasl.oauthbearer.unsecure.jwt=true`` and ``sasl.oauthbearer.config``
      (``principal=... [scope=a,b] [lifeSeconds=N]``).

    Returns a new dict; ``settings`` is not changed.
    """
    out = {k: v for k, v in settings.items() if k not in JAVA_ONLY_SECURITY_SETTINGS}
    jaas = settings.get("sasl.jaas.config")
    if jaas is None:
        return out
    options = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_OPTION.findall(jaas)}
    for key in ("username", "password"):
        if key in options:
            out.setdefault(f"sasl.{key}", options[key])
    if "OAuthBearerLoginModule" not in jaas:
        return out
    if "clientId" in options:
        out.setdefault("sasl.oauthbearer.method", "oidc")
        for java, rdkafka in (("clientId", "client.id"), ("clientSecret", "client.secret"), ("scope", "scope")):
            if java in options:
                out.setdefault(f"sasl.oauthbearer.{rdkafka}", options[java])
    elif "unsecuredLoginStringClaim_sub" in options:
        parts = [f"principal={options['unsecuredLoginStringClaim_sub']}"]
        scope = options.get("unsecuredLoginListClaim_scope", "")
        if len(scope) > 1:  # Kafka: the first character is the list's separator
            parts.append("scope=" + ",".join(v for v in scope[1:].split(scope[0]) if v))
        if "unsecuredLoginLifetimeSeconds" in options:
            parts.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
        out.setdefault("enable.sasl.oauthbearer.unsecure.jwt", "true")
        out.setdefault("sasl.oauthbearer.config", " ".join(parts))
    return out
