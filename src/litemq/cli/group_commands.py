"""``litemq group ...``: consumer group tooling, like Kafka's ``kafka-consumer-groups.sh``.

``list`` (with each group's type: ``classic`` or ``consumer``, KIP-848), ``describe GROUP``
(members, their partitions, committed offset, log end offset and lag per partition; for a
``consumer`` group also the group and assignment epochs and each member's epoch, current and
target assignment), ``delete GROUP`` and ``reset-offsets GROUP --topic T --to-...``. They use
confluent-kafka's AdminClient (ListGroups, ConsumerGroupDescribe/DescribeGroups, OffsetFetch,
OffsetCommit, DeleteGroups, ListOffsets), so they work against LiteMQ and against any Kafka
cluster; the member epochs come from one ConsumerGroupDescribe sent to the group's coordinator
(plaintext listeners only: with TLS/SASL client settings they are left out).
"""

from __future__ import annotations

from datetime import datetime, timezone

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin, _reason, bootstrap_option
from litemq.cli.client_config import client_config
from litemq.cli.common import CliError, console, make_table


def _result(fut, what: str):
    try:
        return fut.result(timeout=CLIENT_TIMEOUT_S * 3)
    except Exception as exc:
        raise CliError(f"{what}: {_reason(exc)}") from None


def _state_name(state) -> str:
    """confluent-kafka's ConsumerGroupState -> Kafka's state name. Its enum has no KIP-848
    ``Assigning``/``Reconciling``: those come back as ``Unknown``, and the callers ask the group's
    coordinator (ConsumerGroupDescribe) for the name instead."""
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance"}.get(
        name, name.capitalize())


def _type_name(group_type) -> str:
    """confluent-kafka's ConsumerGroupType -> ``consumer`` / ``classic`` (``-`` when unknown)."""
    name = getattr(group_type, "name", "") or ""
    return name.lower() if name in ("CONSUMER", "CLASSIC") else "-"


def _consumer_group_epochs(bootstrap: str, desc) -> object | None:
    """ConsumerGroupDescribe (KIP-848) of ``desc``'s group, asked of its coordinator: group and
    assignment epochs, member epochs and target assignments. None when it cannot be asked
    (a TLS/SASL client config, the coordinator unreachable, an error answer)."""
    from litemq.testing.wire import WireClient

    if str(client_config(bootstrap).get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT":
        return None
    node = desc.coordinator
    try:
        with WireClient(node.host, node.port, timeout_s=CLIENT_TIMEOUT_S) as c:
            g = c.request(69, 0, {"group_ids": [desc.group_id], "include_authorized_operations": False},
                          client_id="litemq-cli").groups[0]
    except (OSError, ConnectionError, ValueError):
        return None
    return g if g.error_code == 0 else None


def _parts(assignment) -> str:
    by_topic = {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items()) if ps) or "-"


def _committed(admin, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = _result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group],
                  f"cannot fetch offsets of group {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or [] if tp.offset >= 0}


def _list_offsets(admin, partitions: list[tuple[str, int]], spec, *,
                  skip_unreadable: bool = False) -> dict[tuple[str, int], int]:
    """Offset of each partition at ``spec``. With ``skip_unreadable`` a partition whose offset
    cannot be read (no leader, leader down) is left out, else it is a CliError.

    The ListOffsets requests get :data:`CLIENT_TIMEOUT_S` (``request_timeout``; librdkafka's
    default is ``socket.timeout.ms``, a minute, for a leader that died). A negative offset is no
    offset: confluent-kafka resolves a partition whose request failed that way with
    ``OFFSET_INVALID`` (-1001) instead of raising, so it is unreadable too; only a timestamp
    spec's -1 is an answer (no record at or after the time, Kafka ``ListOffsetsResponse``).
    """
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    futs = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, request_timeout=CLIENT_TIMEOUT_S)
    no_match = -1 if getattr(spec, "timestamp", None) is not None else None  # OffsetSpec.for_timestamp
    found = {}
    for tp, f in futs.items():
        what = f"cannot list offsets of {tp.topic}-{tp.partition}"
        try:
            offset = _result(f, what).offset
            if offset < 0 and offset != no_match:
                raise CliError(f"{what}: no valid offset ({offset})")
            found[(tp.topic, tp.partition)] = offset
        except CliError:
            if not skip_unreadable:
                raise
    return found


def _describe(admin, group: str):
    return _result(admin.describe_consumer_groups([group])[group], f"cannot describe group {group}")


def topic_partitions(admin, topics) -> list[tuple[str, int]]:
    """Every (topic, partition) of ``topics``; CliError for an unknown topic."""
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    partitions = []
    for t in topics:
        info = md.topics.get(t)
        if info is None or info.error is not None:
            raise CliError(f"unknown topic {t!r}")
        partitions += [(t, p) for p in sorted(info.partitions)]
    return partitions


def reset_targets(admin, partitions: list[tuple[str, int]], to_earliest: bool, to_latest: bool,
                  to_offset: int | None, to_datetime: str | None = None) -> dict[tuple[str, int], int]:
    """The offsets a ``reset-offsets`` moves ``partitions`` to (one of the four ``--to-...``
    choices; an offset is clamped to the log's range, a time past the end gives the end)."""
    from confluent_kafka.admin import OffsetSpec

    earliest = _list_offsets(admin, partitions, OffsetSpec.earliest())
    latest = _list_offsets(admin, partitions, OffsetSpec.latest())
    if to_earliest:
        return earliest
    if to_latest:
        return latest
    if to_offset is not None:
        return {tp: min(max(to_offset, earliest[tp]), latest[tp]) for tp in partitions}
    by_time = _list_offsets(admin, partitions, OffsetSpec.for_timestamp(_parse_datetime(to_datetime)))
    return {tp: latest[tp] if by_time[tp] < 0 else by_time[tp] for tp in partitions}


@click.group()
def group() -> None:
    """List, describe and delete consumer groups; reset their committed offsets."""


@group.command("list")
@bootstrap_option
def group_list(bootstrap) -> None:
    """List consumer groups with their state."""
    admin = _admin(bootstrap)
    res = _result(admin.list_consumer_groups(request_timeout=CLIENT_TIMEOUT_S), "cannot list groups")
    table = make_table("GROUP", "TYPE", "STATE", "SIMPLE")
    for g in sorted(res.valid, key=lambda g: g.group_id):
        kind, state = _type_name(getattr(g, "type", None)), _state_name(g.state)
        if kind == "consumer" and state == "Unknown":
            epochs = _consumer_group_epochs(bootstrap, _describe(admin, g.group_id))
            state = epochs.group_state if epochs is not None else state
        table.add_row(g.group_id, kind, state, "yes" if g.is_simple_consumer_group else "no")
    console.print(table)


@group.command("describe")
@click.argument("group_id", metavar="GROUP")
@bootstrap_option
def group_describe(group_id, bootstrap) -> None:
    """Members of GROUP, their partitions, committed offset, log end offset and lag."""
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)
    desc = _describe(admin, group_id)
    committed = _committed(admin, group_id)
    owner: dict[tuple[str, int], object] = {}
    for m in desc.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owner[(tp.topic, tp.partition)] = m
    partitions = sorted(set(committed) | set(owner))
    if not desc.members and not committed and _state_name(desc.state) == "Dead":
        raise CliError(f"group {group_id!r} does not exist")
    ends = _list_offsets(admin, partitions, OffsetSpec.latest(), skip_unreadable=True)  # unknown: "-"
    kind = _type_name(getattr(desc, "type", None))
    epochs = _consumer_group_epochs(bootstrap, desc) if kind == "consumer" else None
    state = _state_name(desc.state)
    if state == "Unknown" and epochs is not None:
        state = epochs.group_state
    console.print(f"group [bold]{group_id}[/]  type {kind}  state {state}  assignor "
                  f"{desc.partition_assignor or '-'}  members {len(desc.members)}")
    table = make_table("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
    for tp in partitions:
        cur, end, m = committed.get(tp), ends.get(tp), owner.get(tp)
        lag = "-" if cur is None or end is None else str(max(end - cur, 0))
        table.add_row(tp[0], str(tp[1]), "-" if cur is None else str(cur), "-" if end is None else str(end), lag,
                      m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-")
    console.print(table)
    idle = [m for m in desc.members if not m.assignment or not m.assignment.topic_partitions]
    for m in idle:
        console.print(f"member {m.member_id} ({m.client_id}, {m.host}) has no partitions")
    if kind == "consumer":
        if epochs is None:
            console.print("(member epochs unavailable: ConsumerGroupDescribe could not be asked of the coordinator)")
            return
        console.print(f"group epoch {epochs.group_epoch}  assignment epoch {epochs.assignment_epoch}")
        members = make_table("MEMBER-ID", "CLIENT-ID", "INSTANCE-ID", "MEMBER-EPOCH", "ASSIGNMENT", "TARGET")
        for m in sorted(epochs.members, key=lambda m: m.client_id + m.member_id):
            members.add_row(m.member_id, m.client_id, m.instance_id or "-", str(m.member_epoch),
                            _parts(m.assignment), _parts(m.target_assignment))
        console.print(members)


@group.command("delete")
@click.argument("group_id", metavar="GROUP")
@bootstrap_option
def group_delete(group_id, bootstrap) -> None:
    """Delete GROUP and its committed offsets (it must have no members)."""
    admin = _admin(bootstrap)
    _result(admin.delete_consumer_groups([group_id], request_timeout=CLIENT_TIMEOUT_S)[group_id],
            f"cannot delete group {group_id}")
    console.print(f"deleted group [bold]{group_id}[/]")


def _parse_datetime(text: str) -> int:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 date/time: {text!r}", param_hint="--to-datetime") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


@group.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topics", multiple=True, required=True, help="Topic whose offsets to reset (repeatable).")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-offset", type=int, default=None, help="Reset to this offset (clamped to the log's range).")
@click.option("--to-datetime", default=None, metavar="ISO",
              help="Reset to the first offset at or after this time (ISO 8601; UTC if no zone).")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
@bootstrap_option
def group_reset_offsets(group_id, topics, to_earliest, to_latest, to_offset, to_datetime, dry_run, bootstrap) -> None:
    """Reset GROUP's committed offsets of --topic (the group must have no active members)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    admin = _admin(bootstrap)
    partitions = topic_partitions(admin, topics)
    desc = _describe(admin, group_id)
    if desc.members and not dry_run:
        raise CliError(f"group {group_id!r} has {len(desc.members)} active member(s); offsets can only be "
                       "reset while the group is inactive (stop its consumers first)")
    target = reset_targets(admin, partitions, to_earliest, to_latest, to_offset, to_datetime)
    committed = _committed(admin, group_id)
    table = make_table("TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET")
    for tp in partitions:
        old = committed.get(tp)
        table.add_row(tp[0], str(tp[1]), "-" if old is None else str(old), str(target[tp]))
    console.print(table)
    if dry_run:
        console.print("dry run: nothing committed")
        return
    req = ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, target[(t, p)]) for t, p in partitions])
    res = _result(admin.alter_consumer_group_offsets([req])[group_id], f"cannot reset offsets of group {group_id}")
    failed = [tp for tp in res.topic_partitions if tp.error is not None]
    if failed:
        raise CliError(f"cannot reset {failed[0].topic}-{failed[0].partition}: {failed[0].error.str()}")
    console.print(f"reset {len(partitions)} partition(s) of group [bold]{group_id}[/]")


def register(main: click.Group) -> None:
    main.add_command(group)
