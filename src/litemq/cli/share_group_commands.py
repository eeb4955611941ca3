"""``litemq share-group ...``: share group tooling (KIP-932), like Kafka's ``kafka-share-groups.sh``.

``list`` (ListGroups with the ``share`` type filter, asked of every broker), ``describe GROUP``
(ShareGroupDescribe: state, epochs, members and their partitions; DescribeShareGroupOffsets:
each share-partition's start offset, with the log end offset and the lag behind it),
``reset-offsets GROUP --topic T --to-earliest|--to-latest|--to-offset N|--to-datetime T``
(AlterShareGroupOffsets, the group must have no members), ``delete-offsets GROUP --topic T``
(DeleteShareGroupOffsets, likewise) and ``delete GROUP`` (DeleteGroups). confluent-kafka has no
share-group admin calls, so these requests go over LiteMQ's wire client to the group's
coordinator (plaintext listeners); offsets come from the AdminClient (ListOffsets).
"""

from __future__ import annotations

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin, bootstrap_option
from litemq.cli.common import CliError, console, make_table
from litemq.cli.group_commands import _list_offsets, _result, reset_targets, topic_partitions
from litemq.protocol.errors import ErrorCode


def _wire(host: str, port: int):
    from litemq.testing.wire import WireClient

    return WireClient(host, port, timeout_s=CLIENT_TIMEOUT_S)


def _code(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _brokers(admin) -> list[tuple[str, int]]:
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    return [(b.host, b.port) for b in md.brokers.values()]


def _coordinator(admin, group_id: str) -> tuple[str, int]:
    """Host and port of ``group_id``'s coordinator (FindCoordinator v3)."""
    for host, port in _brokers(admin):
        try:
            with _wire(host, port) as w:
                r = w.request(10, 3, {"key": group_id, "key_type": 0}, client_id="litemq-cli")
        except (OSError, ConnectionError, ValueError):
            continue
        if r.error_code == 0:
            return r.host, r.port
    raise CliError(f"cannot find the coordinator of group {group_id!r}")


def _ask(admin, group_id: str, api_key: int, version: int, body: dict):
    host, port = _coordinator(admin, group_id)
    try:
        with _wire(host, port) as w:
            return w.request(api_key, version, body, client_id="litemq-cli")
    except (OSError, ConnectionError, ValueError) as exc:
        raise CliError(f"cannot reach the coordinator of {group_id!r} at {host}:{port}: {exc}") from None


@click.group("share-group")
def share_group() -> None:
    """List, describe, reset and delete share groups (KIP-932 queues)."""


@share_group.command("list")
@bootstrap_option
def share_group_list(bootstrap) -> None:
    """List share groups with their state."""
    admin = _admin(bootstrap)
    groups = {}
    for host, port in _brokers(admin):
        try:
            with _wire(host, port) as w:
                r = w.request(16, 5, {"states_filter": [], "types_filter": ["share"]}, client_id="litemq-cli")
        except (OSError, ConnectionError, ValueError) as exc:
            raise CliError(f"cannot list groups of broker {host}:{port}: {exc}") from None
        for g in r.groups:
            groups[g.group_id] = g.group_state
    table = make_table("GROUP", "STATE")
    for gid in sorted(groups):
        table.add_row(gid, groups[gid])
    console.print(table)


def _describe_offsets(admin, group_id: str) -> dict[tuple[str, int], int]:
    r = _ask(admin, group_id, 90, 0, {"groups": [{"group_id": group_id, "topics": None}]})
    g = r.groups[0]
    if g.error_code:
        raise CliError(f"cannot describe the offsets of {group_id!r}: {_code(g.error_code)}")
    return {(t.topic_name, p.partition_index): p.start_offset for t in g.topics for p in t.partitions
            if p.error_code == 0}


@share_group.command("describe")
@click.argument("group_id", metavar="GROUP")
@bootstrap_option
def share_group_describe(group_id, bootstrap) -> None:
    """GROUP's state, members and their partitions, and per share-partition the start offset
    (SPSO), the log end offset and the lag (records at or after the start offset)."""
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)
    r = _ask(admin, group_id, 77, 1, {"group_ids": [group_id], "include_authorized_operations": False})
    g = r.groups[0]
    if g.error_code:
        raise CliError(f"cannot describe share group {group_id!r}: {_code(g.error_code)}"
                       + (f" ({g.error_message})" if g.error_message else ""))
    console.print(f"share group [bold]{group_id}[/]  state {g.group_state}  group epoch {g.group_epoch}  "
                  f"assignment epoch {g.assignment_epoch}  assignor {g.assignor_name}  members {len(g.members)}")
    starts = _describe_offsets(admin, group_id)
    parts = sorted(starts)
    ends = _list_offsets(admin, parts, OffsetSpec.latest(), skip_unreadable=True)  # unknown: "-"
    table = make_table("TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG")
    for tp in parts:
        start, end = starts[tp], ends.get(tp)
        lag = "-" if start < 0 or end is None else str(max(end - start, 0))
        table.add_row(tp[0], str(tp[1]), "-" if start < 0 else str(start), "-" if end is None else str(end), lag)
    console.print(table)
    members = make_table("MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "ASSIGNMENT")
    for m in sorted(g.members, key=lambda m: m.client_id + m.member_id):
        by_topic = {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions}
        members.add_row(m.member_id, m.client_id, m.client_host, str(m.member_epoch),
                        " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items()) if ps) or "-")
    console.print(members)


@share_group.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topics", multiple=True, required=True, help="Topic whose start offsets to reset (repeatable).")
@click.option("--to-earliest", is_flag=True, help="Start at the log start offset.")
@click.option("--to-latest", is_flag=True, help="Start at the log end offset.")
@click.option("--to-offset", type=int, default=None, help="Start at this offset (clamped to the log's range).")
@click.option("--to-datetime", default=None, metavar="ISO",
              help="Start at the first offset at or after this time (ISO 8601; UTC if no zone).")
@click.option("--dry-run", is_flag=True, help="Show the new start offsets without setting them.")
@bootstrap_option
def share_group_reset_offsets(group_id, topics, to_earliest, to_latest, to_offset, to_datetime, dry_run,
                              bootstrap) -> None:
    """Reset GROUP's share-partitions of --topic to a start offset; nothing stays in flight
    (the group must have no members)."""
    if sum([to_earliest, to_latest, to_offset is not None, to_datetime is not None]) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    admin = _admin(bootstrap)
    partitions = topic_partitions(admin, topics)
    target = reset_targets(admin, partitions, to_earliest, to_latest, to_offset, to_datetime)
    old = _describe_offsets(admin, group_id)
    table = make_table("TOPIC", "PARTITION", "OLD-START-OFFSET", "NEW-START-OFFSET")
    for tp in partitions:
        table.add_row(tp[0], str(tp[1]), str(old[tp]) if old.get(tp, -1) >= 0 else "-", str(target[tp]))
    console.print(table)
    if dry_run:
        console.print("dry run: nothing changed")
        return
    body = {"group_id": group_id, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": target[(t, p)]}
                                         for tt, p in partitions if tt == t]} for t in topics]}
    r = _ask(admin, group_id, 91, 0, body)
    for t in r.responses:
        for p in t.partitions:
            if p.error_code:
                hint = " (stop its consumers first)" if p.error_code == ErrorCode.NON_EMPTY_GROUP else ""
                raise CliError(f"cannot reset {t.topic_name}-{p.partition_index} of {group_id!r}: "
                               f"{_code(p.error_code)}{hint}")
    console.print(f"reset {len(partitions)} share-partition(s) of group [bold]{group_id}[/]")


@share_group.command("delete-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topics", multiple=True, required=True, help="Topic whose share state to delete (repeatable).")
@bootstrap_option
def share_group_delete_offsets(group_id, topics, bootstrap) -> None:
    """Delete GROUP's share-partition state of --topic (the group must have no members); the
    next member starts those partitions as a new group would (share.auto.offset.reset)."""
    admin = _admin(bootstrap)
    r = _ask(admin, group_id, 92, 0, {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
    if r.error_code:
        raise CliError(f"cannot delete the offsets of {group_id!r}: {_code(r.error_code)}")
    for t in r.responses:
        for p in t.partitions:
            if p.error_code:
                raise CliError(f"cannot delete the offsets of {t.topic_name} in {group_id!r}: {_code(p.error_code)}")
    console.print(f"deleted the share state of {', '.join(topics)} in group [bold]{group_id}[/]")


@share_group.command("delete")
@click.argument("group_id", metavar="GROUP")
@bootstrap_option
def share_group_delete(group_id, bootstrap) -> None:
    """Delete share group GROUP and its share-partition state (it must have no members)."""
    admin = _admin(bootstrap)
    _result(admin.delete_consumer_groups([group_id], request_timeout=CLIENT_TIMEOUT_S)[group_id],
            f"cannot delete share group {group_id}")
    console.print(f"deleted share group [bold]{group_id}[/]")


def register(main: click.Group) -> None:
    main.add_command(share_group)
