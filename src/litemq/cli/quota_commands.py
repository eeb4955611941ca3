"""``litemq quota describe|alter``: client quotas, as ``kafka-configs.sh --entity-type users /
clients / ips`` (``--user U`` = ``--entity-type users --entity-name U``, ``--user-defaults`` =
``--entity-type users --entity-default``; the same for ``--client-id`` and ``--ip``).

Sent as DescribeClientQuotas / AlterClientQuotas (KIP-546) to the first bootstrap broker that
answers, with the ``--command-config`` security settings (confluent-kafka has no client quota
API). Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s), ``request_percentage``
(% of one request thread), ``controller_mutation_rate`` (partitions/s) for users and client ids;
``connection_creation_rate`` (connections/s) for IPs.
"""

from __future__ import annotations

import click

from litemq.cli.client_commands import bootstrap_option
from litemq.cli.common import CliError, console, make_table
from litemq.cli.config_commands import _wire, ask

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT, MATCH_DEFAULT = 0, 1


def _entity_options(f):
    for entity_type, flag in (("ip", "ip"), ("client-id", "client"), ("user", "user")):
        f = click.option(f"--{flag}-defaults", f"{flag.replace('-', '_')}_defaults", is_flag=True,
                         help=f"The default {entity_type} quota (kafka-configs --entity-default).")(f)
        f = click.option(f"--{entity_type}", entity_type.replace("-", "_"), default=None, metavar="NAME",
                         help=f"The {entity_type} NAME (kafka-configs --entity-name).")(f)
    return f


def _entity(user, user_defaults, client_id, client_defaults, ip, ip_defaults) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs named by the options."""
    out: list[tuple[str, str | None]] = []
    for entity_type, name, default in (("user", user, user_defaults), ("client-id", client_id, client_defaults),
                                       ("ip", ip, ip_defaults)):
        if name is not None and default:
            raise click.UsageError(f"give --{entity_type} NAME or its --...-defaults flag, not both")
        if name is not None:
            if not name:
                raise click.UsageError(f"--{entity_type} needs a name")
            out.append((entity_type, name))
        elif default:
            out.append((entity_type, None))
    return out


def _request(bootstrap: str, api_key: int, body: dict):
    with _wire(bootstrap) as client:
        return ask(client, api_key, 1, body)


_ORDER = {"user": 0, "client-id": 1, "ip": 2}


def _entity_label(pairs) -> str:
    """``user=alice, client-id=<default>``: user first, as kafka-configs names them."""
    return ", ".join(f"{t}={'<default>' if n is None else n}"
                     for t, n in sorted(pairs, key=lambda p: _ORDER.get(p[0], 3)))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@click.group("quota")
def quota() -> None:
    """Describe and alter client quotas (kafka-configs.sh --entity-type users/clients/ips)."""


@quota.command("describe")
@_entity_options
@bootstrap_option
def quota_describe(user, user_defaults, client_id, client_defaults, ip, ip_defaults, bootstrap) -> None:
    """The quotas of the entity the options name exactly (e.g. --user alice --client-id app),
    or with no option every quota the cluster stores."""
    from litemq.protocol.errors import ErrorCode

    pairs = _entity(user, user_defaults, client_id, client_defaults, ip, ip_defaults)
    components = [{"entity_type": t, "match_type": MATCH_EXACT if n is not None else MATCH_DEFAULT, "match": n}
                  for t, n in pairs]
    resp = _request(bootstrap, DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": bool(pairs)})
    if resp.error_code:
        raise CliError(f"{ErrorCode(resp.error_code).name}: {resp.error_message or ''}".rstrip(": "))
    rows = sorted(((_entity_label((e.entity_type, e.entity_name) for e in entry.entity), v.key, _number(v.value))
                   for entry in resp.entries or () for v in entry.values))
    if not rows:
        console.print("no client quotas")
        return
    table = make_table("ENTITY", "QUOTA", "VALUE")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _parse_add(values) -> list[tuple[str, float]]:
    out = []
    for item in values:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise click.UsageError(f"--add takes KEY=VALUE[,KEY=VALUE...], not {part!r}")
            try:
                out.append((key.strip(), float(value)))
            except ValueError:
                raise click.UsageError(f"quota {key.strip()} needs a number, not {value!r}") from None
    return out


@quota.command("alter")
@_entity_options
@click.option("--add", "adds", multiple=True, metavar="KEY=VALUE[,...]",
              help="Quotas to set (kafka-configs --add-config; repeatable).")
@click.option("--delete", "deletes", multiple=True, metavar="KEY[,...]",
              help="Quotas to remove (kafka-configs --delete-config; repeatable).")
@bootstrap_option
def quota_alter(user, user_defaults, client_id, client_defaults, ip, ip_defaults, adds, deletes, bootstrap) -> None:
    """Set or remove quotas of one entity: a user, a client id, both, or an IP (each a name or
    the default). Every broker applies them at once to the traffic it serves."""
    from litemq.protocol.errors import ErrorCode

    pairs = _entity(user, user_defaults, client_id, client_defaults, ip, ip_defaults)
    if not pairs:
        raise click.UsageError("name the entity: --user, --client-id, --ip or their --...-defaults")
    ops = [{"key": k, "value": v, "remove": False} for k, v in _parse_add(adds)]
    ops += [{"key": k.strip(), "value": 0.0, "remove": True} for item in deletes for k in item.split(",") if k.strip()]
    if not ops:
        raise click.UsageError("give at least one --add KEY=VALUE or --delete KEY")
    resp = _request(bootstrap, ALTER_CLIENT_QUOTAS, {
        "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in pairs], "ops": ops}],
        "validate_only": False})
    result = resp.entries[0]
    if result.error_code:
        raise CliError(f"cannot alter quotas of {_entity_label(pairs)}: {ErrorCode(result.error_code).name}: "
                       f"{result.error_message or ''}".rstrip(": "))
    console.print(f"updated quotas of [bold]{_entity_label(pairs)}[/]")


def register(main: click.Group) -> None:
    main.add_command(quota)
