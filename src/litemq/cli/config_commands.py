"""``litemq config describe|alter``: dynamic broker configs, as ``kafka-configs.sh --entity-type
brokers`` (``--entity-name N`` = ``--broker N``, ``--entity-default`` = ``--broker-defaults``), and
per-group configs, as ``--entity-type groups --entity-name G`` (``--group G``: Kafka 4.1's
``consumer.*`` and ``share.*`` group configs, through the AdminClient's GROUP resources).

A broker's own configs go through confluent-kafka's AdminClient (DescribeConfigs and
IncrementalAlterConfigs on BROKER resource ``N``, which it sends to broker N), so it works against
Kafka too. librdkafka (and kafka-python) refuse the cluster-wide default's empty resource name,
so ``--broker-defaults`` sends the same two requests itself (``litemq.protocol``) to the first
bootstrap broker that answers (one silent for a few seconds, e.g. paused, is left for the next),
with the ``--command-config`` security settings (TLS with
``ssl.ca.location``/``ssl.certificate.location``/``ssl.key.location``, SASL PLAIN or SCRAM).
Topic configs stay under ``litemq topic``.
"""

from __future__ import annotations

import ssl
from types import SimpleNamespace

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin, _reason, bootstrap_option, config_source_name
from litemq.cli.client_config import client_config
from litemq.cli.common import CliError, console, make_table, parse_address
from litemq.cli.common import parse_kv as _parse_kv

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, API_VERSIONS = 32, 44, 18
BROKER_ANSWER_TIMEOUT_S = 3.0
"""Seconds a bootstrap broker has to connect, authenticate and answer ApiVersions before the next is tried."""
BROKER_RESOURCE = 4
SET, DELETE = 0, 1


def _wire(bootstrap: str):
    """A connected, authenticated :class:`~litemq.testing.wire.WireClient` to the first broker of
    ``bootstrap`` that answers (the command-config's TLS and SASL settings applied), its
    ``address`` set to that broker's ``HOST:PORT``.

    Like Kafka's AdminClient, a broker that does not answer is left for the next one: each is
    given :data:`BROKER_ANSWER_TIMEOUT_S` to connect, authenticate and answer ApiVersions (a
    paused or hung broker still accepts TCP connections). The client then waits
    :data:`CLIENT_TIMEOUT_S` for each answer.

    Raises:
        CliError: no broker answers (each one's reason named), an unsupported security setting,
            failed authentication.
    """
    from litemq.testing.wire import WireClient, WireSaslError

    conf = client_config(bootstrap)
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=conf.get("ssl.ca.location"))
        if conf.get("ssl.certificate.location"):
            context.load_cert_chain(conf["ssl.certificate.location"], conf.get("ssl.key.location"),
                                    conf.get("ssl.key.password"))
        if str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
    failures: list[str] = []
    for item in bootstrap.split(","):
        host, port = parse_address(item)
        address = f"{host or '127.0.0.1'}:{port}"
        client = None
        try:
            client = WireClient(host or "127.0.0.1", port, timeout_s=BROKER_ANSWER_TIMEOUT_S, ssl_context=context)
            if protocol.startswith("SASL"):
                mechanism = str(conf.get("sasl.mechanism", "PLAIN")).upper()
                user, password = conf.get("sasl.username", ""), conf.get("sasl.password", "")
                if mechanism == "PLAIN":
                    client.sasl_plain(user, password)
                elif mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    client.sasl_scram(mechanism, user, password)
                else:
                    raise CliError(f"sasl.mechanism {mechanism} is not supported with --broker-defaults")
            client.request(API_VERSIONS, 3, {"client_software_name": "litemq-cli",
                                             "client_software_version": "1"}, client_id="litemq-cli")
        except WireSaslError as exc:
            client.close()
            raise CliError(f"authentication failed: {exc.error_message or exc}") from None
        except (OSError, ssl.SSLError) as exc:  # refused, timed out (a paused broker), closed
            if client is not None:
                client.close()
            failures.append(f"{address}: {_os_reason(exc)}")
            continue
        except CliError:
            client.close()
            raise
        client.sock.settimeout(CLIENT_TIMEOUT_S)
        client.address = address
        return client
    raise CliError(f"cannot reach a broker at {bootstrap} ({'; '.join(failures)})")


def _os_reason(exc: BaseException) -> str:
    """``timed out``, ``connection refused``, ... for a socket error."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {BROKER_ANSWER_TIMEOUT_S:g}s"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[:1].lower() + text[1:]


def ask(client, api_key: int, version: int, body: dict):
    """``client.request`` (a :func:`_wire` client); CliError naming the broker when it does not
    answer within :data:`CLIENT_TIMEOUT_S` or closes the connection."""
    try:
        return client.request(api_key, version, body, client_id="litemq-cli")
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"no answer from {client.address}: {_os_reason(exc)}") from None


def _check_broker(admin, broker: int) -> None:
    """CliError unless broker ``broker`` is in the cluster's metadata (the client sends a
    broker's config requests to that broker itself and would wait for it until it times out)."""
    brokers = admin.list_topics(timeout=CLIENT_TIMEOUT_S).brokers
    if broker not in brokers:
        raise CliError(f"no broker {broker} in the cluster (brokers: {', '.join(map(str, sorted(brokers)))})")


def _defaults_request(bootstrap: str, api_key: int, body: dict):
    """One DescribeConfigs (v4) or IncrementalAlterConfigs (v1) about the cluster-wide default;
    its one result, or CliError with the broker's error."""
    version = 4 if api_key == DESCRIBE_CONFIGS else 1
    with _wire(bootstrap) as client:
        resp = ask(client, api_key, version, body)
    result = (resp.results if api_key == DESCRIBE_CONFIGS else resp.responses)[0]
    if result.error_code:
        from litemq.protocol.errors import ErrorCode

        raise CliError(f"{ErrorCode(result.error_code).name}: {result.error_message or ''}".rstrip(": "))
    return result


def _resource_name(broker: int | None, broker_defaults: bool, group: str | None = None) -> str:
    """The BROKER resource name (the node id, or "" for the cluster-wide default) or the group id."""
    if (broker is not None) + bool(broker_defaults) + (group is not None) != 1:
        raise click.UsageError("give exactly one of --broker N, --broker-defaults and --group G")
    if group is not None:
        if not group:
            raise click.UsageError("--group needs a group id")
        return group
    return "" if broker_defaults else str(broker)


def _broker_options(f):
    f = click.option("--group", default=None, metavar="G",
                     help="Group G's configs (kafka-configs --entity-type groups --entity-name G).")(f)
    f = click.option("--broker-defaults", is_flag=True,
                     help="The cluster-wide default of every broker (kafka-configs --entity-default).")(f)
    return click.option("--broker", type=click.IntRange(min=0), default=None, metavar="N",
                        help="Broker N's own configs (kafka-configs --entity-name N).")(f)


@click.group("config")
def config() -> None:
    """Describe and alter dynamic broker configs (kafka-configs.sh --entity-type brokers) and
    group configs (--entity-type groups)."""


@config.command("describe")
@_broker_options
@bootstrap_option
def config_describe(broker, broker_defaults, group, bootstrap) -> None:
    """Every config of broker N with its value, source and whether it is read-only; with
    --broker-defaults the cluster-wide defaults that are set; with --group G every group config
    of G (its own value, or the broker's)."""
    from confluent_kafka.admin import ConfigResource

    name = _resource_name(broker, broker_defaults, group)
    if group is not None:
        res = ConfigResource("group", name)
        admin = _admin(bootstrap)  # kept referenced until the result is in
        try:
            configs = admin.describe_configs([res])[res].result(timeout=CLIENT_TIMEOUT_S * 3)
        except Exception as exc:
            raise CliError(f"cannot describe configs of group {name}: {_reason(exc)}") from None
    elif broker_defaults:
        result = _defaults_request(bootstrap, DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        configs = {c.name: SimpleNamespace(value=c.value, source=c.config_source, is_read_only=c.read_only)
                   for c in result.configs}
    else:
        admin = _admin(bootstrap)
        _check_broker(admin, broker)
        res = ConfigResource("broker", name)
        try:
            configs = admin.describe_configs([res])[res].result(timeout=CLIENT_TIMEOUT_S * 3)
        except Exception as exc:
            raise CliError(f"cannot describe configs of broker {name}: {_reason(exc)}") from None
    if not configs:
        console.print("no dynamic broker defaults set" if broker_defaults else "no configs")
        return
    table = make_table("CONFIG", "VALUE", "SOURCE", "READ-ONLY")
    for key in sorted(configs):
        entry = configs[key]
        table.add_row(key, "" if entry.value is None else str(entry.value), config_source_name(entry.source),
                      "yes" if entry.is_read_only else "no")
    console.print(table)


@config.command("alter")
@_broker_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Config to set (repeatable).")
@click.option("--delete", "deletes", multiple=True, metavar="KEY",
              help="Config to delete, back to the next source (repeatable).")
@bootstrap_option
def config_alter(broker, broker_defaults, group, sets, deletes, bootstrap) -> None:
    """Set or delete dynamic configs of broker N, of every broker, or of group G
    (IncrementalAlterConfigs); applied without a restart. Read-only settings are refused
    (INVALID_REQUEST), unknown or out-of-range group configs too (INVALID_CONFIG)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    name = _resource_name(broker, broker_defaults, group)
    if not sets and not deletes:
        raise click.UsageError("give at least one --set KEY=VALUE or --delete KEY")
    values = _parse_kv(sets, "--set")
    what = "broker defaults" if broker_defaults else f"group {name}" if group is not None else f"broker {name}"
    if broker_defaults:
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in values.items()]
        ops += [{"name": k.strip(), "config_operation": DELETE, "value": None} for k in deletes]
        try:
            _defaults_request(bootstrap, INCREMENTAL_ALTER_CONFIGS, {
                "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "", "configs": ops}],
                "validate_only": False})
        except CliError as exc:
            raise CliError(f"cannot alter configs of {what}: {exc.message}") from None
        console.print(f"updated configs of [bold]{what}[/]")
        return
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()]
    entries += [ConfigEntry(k.strip(), None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    admin = _admin(bootstrap)
    if group is None:
        _check_broker(admin, broker)
    fut = admin.incremental_alter_configs([ConfigResource("group" if group is not None else "broker", name,
                                                          incremental_configs=entries)])
    try:
        next(iter(fut.values())).result(timeout=CLIENT_TIMEOUT_S * 3)
    except Exception as exc:
        raise CliError(f"cannot alter configs of {what}: {_reason(exc)}") from None
    console.print(f"updated configs of [bold]{what}[/]")


def register(main: click.Group) -> None:
    main.add_command(config)
