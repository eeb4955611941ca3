"""``litemq acl ...`` and ``litemq user ...``: ACLs (like Kafka's ``kafka-acls.sh``) and SCRAM
users (like ``kafka-configs.sh --entity-type users --alter --add-config SCRAM-SHA-256=...``).

They use confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials), so they work against LiteMQ and any
Kafka cluster. A secured broker needs ``--command-config FILE`` (or ``LITEMQ_CLIENT_CONFIG``)
with the client's security settings. Failures print one line and exit with status 1.
"""

from __future__ import annotations

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin, _reason, bootstrap_option
from litemq.cli.common import CliError, console, make_table

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite")
"""Operation names kafka-acls.sh accepts (case and ``_``/``-`` are ignored here)."""
CLUSTER_NAME = "kafka-cluster"
SCRAM_MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _result(fut, what: str):
    try:
        return fut.result(timeout=CLIENT_TIMEOUT_S * 3)
    except Exception as exc:
        raise CliError(f"{what}: {_reason(exc)}") from None


def _operation(name: str):
    from confluent_kafka.admin import AclOperation

    key = name.replace("_", "").replace("-", "").lower()
    for op in AclOperation:
        if op.name.replace("_", "").lower() == key and op.name not in ("UNKNOWN", "ANY"):
            return op
    raise click.BadParameter(f"unknown operation {name!r}; one of {', '.join(OPERATIONS)}", param_hint="--operation")


def _resources(topics, groups, cluster, transactional_ids) -> list[tuple]:
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in topics] + [(ResourceType.GROUP, g) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids]
    if cluster:
        out.append((ResourceType.BROKER, CLUSTER_NAME))  # confluent-kafka calls the CLUSTER type BROKER
    return out


def _pattern(name: str):
    from confluent_kafka.admin import ResourcePatternType

    return ResourcePatternType[name.upper()]


def resource_options(f):
    f = click.option("--transactional-id", "transactional_ids", multiple=True, help="Transactional id (repeatable).")(f)
    f = click.option("--cluster", is_flag=True, help="The cluster resource.")(f)
    f = click.option("--group", "groups", multiple=True, help="Consumer group (repeatable).")(f)
    f = click.option("--topic", "topics", multiple=True, help="Topic (repeatable).")(f)
    return f


@click.group()
def acl() -> None:
    """Add, list and remove ACLs (the broker needs authorizer.class.name)."""


def principal_host_options(f):
    """kafka-acls.sh's principal and host options (``--add`` and ``--remove``)."""
    f = click.option("--host", "hosts", multiple=True, help="Host of both allow and deny ACLs (repeatable).")(f)
    f = click.option("--deny-host", "deny_hosts", multiple=True, help="Host of deny ACLs [*] (repeatable).")(f)
    f = click.option("--allow-host", "allow_hosts", multiple=True, help="Host of allow ACLs [*] (repeatable).")(f)
    f = click.option("--deny-principal", "deny_principals", multiple=True, metavar="User:NAME",
                     help="Principal of deny ACLs (repeatable).")(f)
    f = click.option("--allow-principal", "allow_principals", multiple=True, metavar="User:NAME",
                     help="Principal of allow ACLs (repeatable; User:* = everyone).")(f)
    return f


def _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, hosts) -> list[tuple]:
    """``(principal, host, permission type)`` of every allow and deny principal x its hosts
    (default ``*``), as kafka-acls.sh pairs them."""
    from confluent_kafka.admin import AclPermissionType

    entries = [(p, h, AclPermissionType.ALLOW) for p in allow_principals for h in (allow_hosts + hosts or ("*",))]
    entries += [(p, h, AclPermissionType.DENY) for p in deny_principals for h in (deny_hosts + hosts or ("*",))]
    return entries


@acl.command("add")
@principal_host_options
@click.option("--operation", "operations", multiple=True, metavar="OP",
              help=f"Operation (repeatable) [All]: {', '.join(OPERATIONS)}.")
@resource_options
@click.option("--resource-pattern-type", "pattern", type=click.Choice(["literal", "prefixed"], case_sensitive=False),
              default="literal", show_default=True, help="Match the resource name exactly or as a prefix.")
@bootstrap_option
def acl_add(allow_principals, deny_principals, allow_hosts, deny_hosts, hosts, operations, topics, groups, cluster,
            transactional_ids, pattern, bootstrap) -> None:
    """Add ACLs: every principal x host x operation on every resource."""
    from confluent_kafka.admin import AclBinding

    if not allow_principals and not deny_principals:
        raise CliError("give --allow-principal or --deny-principal")
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        raise CliError("give a resource: --topic, --group, --cluster or --transactional-id")
    ops = [_operation(o) for o in operations or ("All",)]
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, hosts)
    bindings = [AclBinding(rtype, name, _pattern(pattern), principal, host, op, perm)
                for rtype, name in resources for principal, host, perm in entries for op in ops]
    admin = _admin(bootstrap)
    failures = []
    for binding, fut in admin.create_acls(bindings, request_timeout=CLIENT_TIMEOUT_S).items():
        try:
            fut.result(timeout=CLIENT_TIMEOUT_S * 3)
            console.print(f"added ACL {_describe(binding)}")
        except Exception as exc:
            failures.append(f"cannot add ACL {_describe(binding)}: {_reason(exc)}")
    if failures:
        more = f" (and {len(failures) - 1} more failure(s))" if len(failures) > 1 else ""
        raise CliError(failures[0] + more)


def _describe(b) -> str:
    rtype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
    return (f"{b.permission_type.name} {b.principal} {b.operation.name} from host {b.host} on "
            f"{rtype}:{b.resource_pattern_type.name}:{b.name}")


def _filters(topics, groups, cluster, transactional_ids, pattern, principal, operations, entries=None) -> list:
    """ACL binding filters: every resource x operation x entry, where an entry is ``(principal,
    host, permission type)`` (None = any); without ``entries``, ``principal`` (or any) from any
    host with any permission."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourceType,
    )

    ops = [_operation(o) for o in operations] or [AclOperation.ANY]
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        resources = [(ResourceType.ANY, None)]
        pattern = "any"
    entries = entries or [(principal, None, AclPermissionType.ANY)]
    return [AclBindingFilter(rtype, name, _pattern(pattern), p, host, op, perm)
            for rtype, name in resources for op in ops for p, host, perm in entries]


@acl.command("list")
@resource_options
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False),
              help="With a resource: its patterns of this type; 'match' = every ACL that applies to it.")
@click.option("--principal", default=None, metavar="User:NAME", help="Only ACLs of this principal.")
@bootstrap_option
def acl_list(topics, groups, cluster, transactional_ids, pattern, principal, bootstrap) -> None:
    """List ACLs (all of them without a resource option)."""
    admin = _admin(bootstrap)
    _require_cluster_describe(admin, "cannot list ACLs")
    seen: dict = {}
    for flt in _filters(topics, groups, cluster, transactional_ids, pattern, principal, ()):
        for b in _result(admin.describe_acls(flt, request_timeout=CLIENT_TIMEOUT_S), "cannot list ACLs"):
            seen[b] = None
    table = make_table("RESOURCE TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    for b in sorted(seen, key=lambda b: (b.restype.name, b.name, b.principal, b.operation.name)):
        table.add_row("CLUSTER" if b.restype.name == "BROKER" else b.restype.name, b.name,
                      b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name)
    console.print(table)


@acl.command("remove")
@resource_options
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False))
@click.option("--principal", default=None, metavar="User:NAME",
              help="Only ACLs of this principal, allow or deny, from any host [all].")
@principal_host_options
@click.option("--operation", "operations", multiple=True, metavar="OP", help="Only these operations [all].")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@bootstrap_option
def acl_remove(topics, groups, cluster, transactional_ids, pattern, principal, allow_principals, deny_principals,
               allow_hosts, deny_hosts, hosts, operations, force, bootstrap) -> None:
    """Remove the ACLs of the given resources: all of them, those of one principal (--principal),
    or, as Kafka's kafka-acls.sh --remove, the ACLs --allow-principal/--deny-principal x host
    (default *) x --operation name."""
    if not _resources(topics, groups, cluster, transactional_ids):
        raise CliError("give a resource: --topic, --group, --cluster or --transactional-id")
    if principal and (allow_principals or deny_principals):
        raise CliError("give --principal or --allow-principal/--deny-principal, not both")
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, hosts)
    filters = _filters(topics, groups, cluster, transactional_ids, pattern, principal, operations, entries)
    if not force:
        click.confirm(f"Remove every ACL matching {len(filters)} filter(s)?", abort=True)
    admin = _admin(bootstrap)
    removed = 0
    for fut in admin.delete_acls(filters, request_timeout=CLIENT_TIMEOUT_S).values():
        for b in _result(fut, "cannot remove ACLs"):
            console.print(f"removed ACL {_describe(b)}")
            removed += 1
    console.print(f"removed {removed} ACL(s)")


# ================================================================== SCRAM users
def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism[name.upper().replace("-", "_")]


@click.group()
def user() -> None:
    """Create, list and delete SCRAM users (SASL/SCRAM-SHA-256 and -512 credentials)."""


@user.command("create")
@click.argument("name")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="The user's password (asked for when not given).")
@click.option("--mechanism", "mechanisms", multiple=True, default=("SCRAM-SHA-256",), show_default=True,
              type=click.Choice(SCRAM_MECHANISM_NAMES, case_sensitive=False), help="SCRAM mechanism (repeatable).")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True,
              help="PBKDF2 iterations of the salted password.")
@bootstrap_option
def user_create(name, password, mechanisms, iterations, bootstrap) -> None:
    """Create user NAME, or change its password (AlterUserScramCredentials)."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    admin = _admin(bootstrap)
    for mech in dict.fromkeys(m.upper() for m in mechanisms):  # one request per mechanism: a user once per request
        upsertion = UserScramCredentialUpsertion(name, ScramCredentialInfo(_mechanism(mech), iterations),
                                                 password.encode())
        futures = admin.alter_user_scram_credentials([upsertion], request_timeout=CLIENT_TIMEOUT_S)
        _result(futures[name], f"cannot set the {mech} credential of user {name}")
        console.print(f"set {mech} credential of user [bold]{name}[/] ({iterations} iterations)")


def _require_cluster_describe(admin, what: str) -> None:
    """Stop with one line when the principal may not DESCRIBE the cluster (DescribeCluster's
    authorized operations, KIP-430), before asking: librdkafka 2.16 reports a refused
    DescribeAcls as no ACLs, and crashes reading a refused DescribeUserScramCredentials.

    Raises:
        CliError: not authorized."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AclOperation

    try:
        ops = admin.describe_cluster(include_authorized_operations=True,
                                     request_timeout=CLIENT_TIMEOUT_S).result(CLIENT_TIMEOUT_S).authorized_operations
    except KafkaException:
        return  # the request itself will say what is wrong
    # confluent-kafka gives None for an empty set of operations (the broker answered bitfield 0)
    if not {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL} & set(ops or ()):
        raise CliError(f"{what}: CLUSTER_AUTHORIZATION_FAILED (this needs Describe on the cluster)")


def _credentials(admin, names: list[str] | None, what: str = "cannot describe user") -> dict:
    _require_cluster_describe(admin, "cannot list users" if not names else what)
    if names:
        futures = admin.describe_user_scram_credentials(names, request_timeout=CLIENT_TIMEOUT_S)
        return {n: _result(f, f"{what} {n}") for n, f in futures.items()}
    return _result(admin.describe_user_scram_credentials(request_timeout=CLIENT_TIMEOUT_S), "cannot list users")


@user.command("list")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@bootstrap_option
def user_list(names, bootstrap) -> None:
    """List users with SCRAM credentials (mechanism and iterations)."""
    creds = _credentials(_admin(bootstrap), list(names) or None)
    table = make_table("USER", "MECHANISM", "ITERATIONS")
    for name in sorted(creds):
        for info in creds[name].scram_credential_infos:
            table.add_row(name, info.mechanism.name.replace("_", "-"), str(info.iterations))
    console.print(table)


@user.command("delete")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True,
              type=click.Choice(SCRAM_MECHANISM_NAMES, case_sensitive=False),
              help="Delete only this mechanism's credential (repeatable) [every one the user has].")
@bootstrap_option
def user_delete(name, mechanisms, bootstrap) -> None:
    """Delete the SCRAM credentials of user NAME."""
    from confluent_kafka.admin import UserScramCredentialDeletion

    admin = _admin(bootstrap)
    if mechanisms:
        mechs = [_mechanism(m) for m in dict.fromkeys(m.upper() for m in mechanisms)]
    else:
        mechs = [info.mechanism for info in _credentials(admin, [name], "cannot delete user")[name].scram_credential_infos]
    for mech in mechs:
        futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion(name, mech)],
                                                     request_timeout=CLIENT_TIMEOUT_S)
        _result(futures[name], f"cannot delete the {mech.name.replace('_', '-')} credential of user {name}")
    console.print(f"deleted user [bold]{name}[/]")


def register(main: click.Group) -> None:
    main.add_command(acl)
    main.add_command(user)
