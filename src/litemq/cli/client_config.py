"""Client security settings for every client command: ``--command-config FILE``.

As Kafka's tools (``kafka-topics.sh --command-config client.properties``), a Java-style
properties file of client settings is applied to the confluent-kafka (librdkafka) clients a
command builds. Names are librdkafka's: ``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ... A Java client's ``sasl.jaas.config`` (PLAIN and SCRAM users, OAuth
logins) is translated to librdkafka's settings
(:func:`~litemq.security.client_settings.librdkafka_security_settings`). The file can also be
given by the environment variable ``LITEMQ_CLIENT_CONFIG``.

Precedence: the file's settings, then the settings a command needs (``bootstrap.servers`` from
``-b``, a consumer's ``group.id``, ...).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from litemq.cli.common import CliError
from litemq.config import read_properties
from litemq.security.client_settings import librdkafka_security_settings

COMMAND_CONFIG_ENV = "LITEMQ_CLIENT_CONFIG"
_META_KEY = "litemq.command_config"


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
    return librdkafka_security_settings(props)


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
