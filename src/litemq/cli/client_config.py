"""Client security settings for every client command: ``--command-config FILE``.

As Kafka's tools (``kafka-topics.sh --command-config client.properties``), a Java-style
properties file of client settings is applied to the confluent-kafka (librdkafka) clients a
command builds. Names are librdkafka's: ``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ... A Java client's ``sasl.jaas.config`` is translated:
``username="..." password="..."`` to ``sasl.username``/``sasl.password``; Kafka's
``OAuthBearerLoginModule`` with ``clientId``/``clientSecret``/``scope`` (OIDC client
credentials, KIP-768) to librdkafka's ``sasl.oauthbearer.method=oidc`` and
``sasl.oauthbearer.client.id``/``.client.secret``/``.scope``, and with
``unsecuredLoginStringClaim_sub`` (unsecured tokens, KIP-255) to
``enable.sasl.oauthbearer.unsecure.jwt`` and ``sasl.oauthbearer.config``; the Java-only
``sasl.login.callback.handler.class`` is dropped. The file can also be given by the environment
variable ``LITEMQ_CLIENT_CONFIG``.

Precedence: the file's settings, then the settings a command needs (``bootstrap.servers`` from
``-b``, a consumer's ``group.id``, ...).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from litemq.cli.common import CliError
from litemq.config import read_properties

COMMAND_CONFIG_ENV = "LITEMQ_CLIENT_CONFIG"
_META_KEY = "litemq.command_config"
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _remember(ctx: click.Context, _param, value):
    if value is not None:
        ctx.meta[_META_KEY] = value
    return value


def command_config_option(f):
    """Add ``--command-config FILE`` (env ``LITEMQ_CLIENT_CONFIG``) to a click command."""
    return click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        envvar=COMMAND_CONFIG_ENV, expose_value=False, callback=_remember,
                        help="Properties file of client settings (librdkafka names: security.protocol, "
                             "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...) "
                             f"[env {COMMAND_CONFIG_ENV}].")(f)


def load_client_properties(path: str | Path) -> dict[str, str]:
    """The settings of a command-config file (``sasl.jaas.config`` translated).

    Raises:
        CliError: unreadable or unparsable file.
    """
    try:
        props = read_properties(Path(path))
    except (OSError, ValueError) as exc:
        raise CliError(f"--command-config {path}: {exc}") from None
    jaas = props.pop("sasl.jaas.config", None)
    props.pop("sasl.login.callback.handler.class", None)
    if jaas is not None:
        options = dict(_JAAS_OPTION.findall(jaas))
        for key in ("username", "password"):
            if key in options:
                props.setdefault(f"sasl.{key}", options[key])
        if "OAuthBearerLoginModule" in jaas:
            _oauthbearer_options(options, props)
    return props


def _oauthbearer_options(options: dict[str, str], props: dict[str, str]) -> None:
    """Kafka's ``OAuthBearerLoginModule`` JAAS options -> librdkafka settings (see module docstring)."""
    if "clientId" in options:
        props.setdefault("sasl.oauthbearer.method", "oidc")
        for java, rdkafka in (("clientId", "client.id"), ("clientSecret", "client.secret"), ("scope", "scope")):
            if java in options:
                props.setdefault(f"sasl.oauthbearer.{rdkafka}", options[java])
    elif "unsecuredLoginStringClaim_sub" in options:
        parts = [f"principal={options['unsecuredLoginStringClaim_sub']}"]
        scope = options.get("unsecuredLoginListClaim_scope", "")
        if len(scope) > 1:  # Kafka: the first character is the list's separator
            parts.append("scope=" + ",".join(v for v in scope[1:].split(scope[0]) if v))
        if "unsecuredLoginLifetimeSeconds" in options:
            parts.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
        props.setdefault("enable.sasl.oauthbearer.unsecure.jwt", "true")
        props.setdefault("sasl.oauthbearer.config", " ".join(parts))


def client_config(bootstrap: str, settings: dict | None = None) -> dict:
    """confluent-kafka config for a client command: the command-config file's settings (from
    ``--command-config`` or ``LITEMQ_CLIENT_CONFIG``), then ``settings``, then
    ``bootstrap.servers``."""
    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get(_META_KEY) if ctx is not None else None
    if path is None:
        path = os.environ.get(COMMAND_CONFIG_ENV) or None
    conf = load_client_properties(path) if path else {}
    conf.update(settings or {})
    conf["bootstrap.servers"] = bootstrap
    return conf
