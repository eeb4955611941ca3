"""``litemq client-metrics list|describe|alter|delete``: client metrics subscriptions (KIP-714),
as ``kafka-client-metrics.sh``.

A subscription asks the Kafka clients it matches to push metrics to the brokers, which serve
them on ``/metrics`` when started with ``client.telemetry.enable=true``. Sent as
ListClientMetricsResources, DescribeConfigs and IncrementalAlterConfigs (resource type
CLIENT_METRICS) to the first bootstrap broker that answers, with the ``--command-config``
security settings (confluent-kafka's admin client has no CLIENT_METRICS resource type).
"""

from __future__ import annotations

import uuid

import click

from litemq.cli.client_commands import bootstrap_option
from litemq.cli.common import CliError, console, make_table
from litemq.cli.config_commands import _wire, ask

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CLIENT_METRICS_RESOURCES = 32, 44, 74
CLIENT_METRICS_RESOURCE = 16
SET, DELETE = 0, 1


def _request(bootstrap: str, api_key: int, version: int, body: dict):
    with _wire(bootstrap) as w:
        return ask(w, api_key, version, body)


def _error(code: int, message: str | None) -> str:
    from litemq.protocol.errors import ErrorCode

    return f"{ErrorCode(code).name}: {message or ''}".rstrip(": ")


def _names(bootstrap: str) -> list[str]:
    resp = _request(bootstrap, LIST_CLIENT_METRICS_RESOURCES, 0, {})
    if resp.error_code:
        raise CliError(_error(resp.error_code, None))
    return sorted(r.name for r in resp.client_metrics_resources)


def _alter(bootstrap: str, name: str, configs: list[dict]) -> None:
    resp = _request(bootstrap, INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": CLIENT_METRICS_RESOURCE, "resource_name": name, "configs": configs}],
        "validate_only": False})
    result = resp.responses[0]
    if result.error_code:
        raise CliError(f"cannot alter client metrics subscription {name}: "
                       f"{_error(result.error_code, result.error_message)}")


@click.group("client-metrics")
def client_metrics() -> None:
    """List, describe, alter and delete client metrics subscriptions (kafka-client-metrics.sh)."""


@client_metrics.command("list")
@bootstrap_option
def client_metrics_list(bootstrap) -> None:
    """The names of the subscriptions."""
    names = _names(bootstrap)
    console.print("\n".join(names) if names else "no client metrics subscriptions")


@client_metrics.command("describe")
@click.option("--name", default=None, help="One subscription (default: all).")
@bootstrap_option
def client_metrics_describe(name, bootstrap) -> None:
    """Each subscription's metrics, push interval and match patterns."""
    names = [name] if name else _names(bootstrap)
    if not names:
        console.print("no client metrics subscriptions")
        return
    resp = _request(bootstrap, DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": CLIENT_METRICS_RESOURCE, "resource_name": n, "configuration_keys": None}
                      for n in names], "include_synonyms": False, "include_documentation": False})
    table = make_table("NAME", "METRICS", "INTERVAL MS", "MATCH")
    for result in resp.results:
        if result.error_code:
            raise CliError(f"cannot describe {result.resource_name}: {_error(result.error_code, result.error_message)}")
        configs = {c.name: c.value for c in result.configs}
        if not configs:
            raise CliError(f"no client metrics subscription named {result.resource_name}")
        table.add_row(result.resource_name, configs.get("metrics", ""), configs.get("interval.ms", "300000 (default)"),
                      configs.get("match", "") or "(every client)")
    console.print(table)


@client_metrics.command("alter")
@click.option("--name", default=None, help="The subscription to create or change.")
@click.option("--generate-name", is_flag=True, help="Create a subscription with a new random name.")
@click.option("--metrics", default=None, metavar="PREFIX[,...]",
              help="Metric name prefixes to push ('*': all; '': none).")
@click.option("--interval-ms", "interval_ms", type=int, default=None, help="Push interval, 100..3600000 ms.")
@click.option("--match", default=None, metavar="ATTR=REGEX[,...]",
              help="Clients to match (client_id, client_instance_id, client_software_name, "
                   "client_software_version, client_source_address, client_source_port); '': every client.")
@bootstrap_option
def client_metrics_alter(name, generate_name, metrics, interval_ms, match, bootstrap) -> None:
    """Create or change a subscription; only the options given change."""
    if bool(name) == generate_name:
        raise click.UsageError("give --name NAME or --generate-name")
    name = name or str(uuid.uuid4())
    configs = [{"name": key, "config_operation": SET if value else DELETE, "value": value or None}
               for key, value in (("metrics", metrics), ("match", match),
                                  ("interval.ms", None if interval_ms is None else str(interval_ms)))
               if value is not None]
    if not configs:
        raise click.UsageError("give at least one of --metrics, --interval-ms, --match")
    _alter(bootstrap, name, configs)
    console.print(f"altered client metrics subscription [bold]{name}[/]")


@client_metrics.command("delete")
@click.option("--name", required=True, help="The subscription to delete.")
@bootstrap_option
def client_metrics_delete(name, bootstrap) -> None:
    """Delete a subscription: the clients it matched stop pushing what only it asked for."""
    if name not in _names(bootstrap):
        raise CliError(f"no client metrics subscription named {name}")
    _alter(bootstrap, name, [{"name": k, "config_operation": DELETE, "value": None}
                             for k in ("interval.ms", "match", "metrics")])
    console.print(f"deleted client metrics subscription [bold]{name}[/]")


def register(main: click.Group) -> None:
    main.add_command(client_metrics)
