"""``litemq partition reassign``: moving partitions between brokers, like Kafka's
``kafka-reassign-partitions.sh`` and with its JSON files (KIP-455).

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the current assignment
  of the topics in F (``{"version": 1, "topics": [{"topic": "t"}]}``) and a proposed one over the
  listed brokers (same partition count and replication factor, round-robin as topic creation
  assigns: leaders spread evenly). Nothing is changed.
- ``--execute --reassignment-json-file F [--throttle B]``: starts the moves of F (``{"version": 1,
  "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}``; ``log_dirs`` is
  accepted and must be ``any``), after printing the current assignment to save for a rollback.
  ``--throttle B`` (bytes/s), as Kafka: first sets ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` to B on every broker of the old and new replica sets,
  and on each moving partition's topic ``leader.replication.throttled.replicas`` (its current
  replicas) and ``follower.replication.throttled.replicas`` (the replicas it gains).
- ``--verify --reassignment-json-file F``: for each partition of F, whether its move is still in
  progress, completed (the replicas are F's) or failed (no move and other replicas); exit status
  1 unless all completed. Once all completed it removes the throttles (both rates on every
  broker, both throttled-replicas configs on F's topics), as Kafka's ``--verify``.
- ``--cancel --reassignment-json-file F``: cancels the moves of F's partitions in progress (their
  replica sets walk back to what they were).

AlterPartitionReassignments and ListPartitionReassignments go through kafka-python's
``KafkaAdminClient`` (confluent-kafka has no such calls); the current assignment and the
throttle configs (IncrementalAlterConfigs) go through confluent-kafka. ``-b`` takes plaintext
listeners (no TLS/SASL client settings here). ``--replica-alter-log-dirs-throttle`` is not
supported (LiteMQ has one log dir per broker).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin
from litemq.cli.common import CliError, bootstrap_server_option
from litemq.cluster.throttle import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS,
                                     format_throttled_replicas)

PLAN_VERSION = 1
"""The ``version`` of kafka-reassign-partitions' JSON files."""


def _read_json(path: Path, what: str) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{path}: the {what} is not a JSON object")
    return doc


def _plan_partitions(path: Path) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> replicas of a reassignment JSON file.

    Raises:
        CliError: unreadable, malformed, a partition listed twice, ``log_dirs`` other than ``any``.
    """
    doc = _read_json(path, "reassignment JSON file")
    out: dict[tuple[str, int], list[int]] = {}
    try:
        for entry in doc["partitions"]:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            dirs = entry.get("log_dirs")
            if dirs is not None and any(d != "any" for d in dirs):
                raise CliError(f"{path}: {key[0]}-{key[1]}: log_dirs other than \"any\" are not supported")
            if key in out:
                raise CliError(f"{path}: partition {key[0]}-{key[1]} is listed twice")
            out[key] = replicas
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(f"{path}: not a reassignment JSON file ({exc!r})") from None
    if not out:
        raise CliError(f"{path}: no partitions")
    return out


def _plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    parts = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
             for (t, p), r in sorted(assignment.items())]
    return json.dumps({"version": PLAN_VERSION, "partitions": parts})


def _current(bootstrap: str, topics) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> current replicas of ``topics`` (CliError for an unknown topic)."""
    md = _admin(bootstrap).list_topics(timeout=CLIENT_TIMEOUT_S)
    out = {}
    for t in sorted(set(topics)):
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            raise CliError(f"topic {t} does not exist")
        for p, pm in tm.partitions.items():
            out[(t, p)] = list(pm.replicas)
    return out


def _kafka_admin(bootstrap: str):
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="litemq-cli",
                                request_timeout_ms=int(CLIENT_TIMEOUT_S * 3000))
    except KafkaError as exc:
        raise CliError(f"cannot reach a broker at {bootstrap} ({exc})") from None


def _call(fn, what: str, *args):
    from kafka.errors import KafkaError

    try:
        return fn(*args)
    except KafkaError as exc:
        raise CliError(f"{what}: {exc}") from None


def _error_name(err) -> str:
    return getattr(err, "__name__", str(err))


def _generate(bootstrap: str, topics_file: Path, broker_list: str) -> None:
    from litemq.cluster.image import assign_replicas
    from litemq.protocol.errors import KafkaError

    doc = _read_json(topics_file, "topics-to-move JSON file")
    try:
        topics = [str(t["topic"]) for t in doc["topics"]]
    except (KeyError, TypeError) as exc:
        raise CliError(f"{topics_file}: not a topics-to-move JSON file ({exc!r})") from None
    try:
        brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"--broker-list {broker_list!r}: not a comma-separated list of broker ids") from None
    if not topics or not brokers:
        raise CliError("nothing to move: no topics or no brokers")
    current = _current(bootstrap, topics)
    proposed: dict[tuple[str, int], list[int]] = {}
    start = 0
    for t in sorted(set(topics)):
        parts = sorted(p for (name, p) in current if name == t)
        rf = len(current[(t, parts[0])])
        try:
            lists = assign_replicas(brokers, len(parts), rf, start)
        except KafkaError as exc:
            raise CliError(f"topic {t}: {exc}") from None
        proposed.update({(t, p): r for p, r in zip(parts, lists)})
        start += len(parts)
    click.echo("Current partition replica assignment")
    click.echo(_plan_json(current))
    click.echo("")
    click.echo("Proposed partition reassignment configuration")
    click.echo(_plan_json(proposed))


def _alter_configs(bootstrap: str, changes: list[tuple[str, str, dict[str, str | None]]]) -> None:
    """IncrementalAlterConfigs: ``(resource type "broker"|"topic", name, {key: value, or None to
    delete})`` each. Raises CliError naming the first resource that failed."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resources = [ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
        for k, v in configs.items()]) for kind, name, configs in changes]
    admin = _admin(bootstrap) if resources else None
    for res in resources:  # librdkafka: one BROKER resource per call
        try:
            admin.incremental_alter_configs([res])[res].result(timeout=CLIENT_TIMEOUT_S * 3)
        except Exception as exc:  # KafkaException, timeouts: one line
            raise CliError(f"cannot set the throttle configs of {res}: {exc}") from None


def throttle_changes(plan: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]],
                     rate: int) -> list[tuple[str, str, dict[str, str | None]]]:
    """The config changes of ``--throttle rate`` (Kafka ``ReassignPartitionsCommand``
    ``modifyReassignmentThrottle``/``modifyTopicThrottles``): both rates on every broker of the
    old and new replica sets; per topic, leader throttled replicas = the current replicas of its
    moving partitions, follower throttled replicas = the replicas they gain."""
    moving = {k: r for k, r in plan.items() if set(r) != set(current[k])}
    brokers = sorted({b for k in moving for b in (*current[k], *moving[k])})
    out: list[tuple[str, str, dict[str, str | None]]] = [
        ("broker", str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}) for b in brokers]
    for topic in sorted({t for t, _ in moving}):
        leader = {p: set(current[(t, p)]) for (t, p) in moving if t == topic}
        follower = {p: set(moving[(t, p)]) - set(current[(t, p)]) for (t, p) in moving if t == topic}
        out.append(("topic", topic, {LEADER_REPLICAS: format_throttled_replicas(leader),
                                     FOLLOWER_REPLICAS: format_throttled_replicas({p: b for p, b in follower.items()
                                                                                   if b})}))
    return out


def _execute(bootstrap: str, plan_file: Path, throttle: int | None = None) -> None:
    plan = _plan_partitions(plan_file)
    current = _current(bootstrap, {t for t, _ in plan})
    missing = [f"{t}-{p}" for t, p in plan if (t, p) not in current]
    if missing:
        raise CliError(f"unknown partitions: {', '.join(missing)}")
    click.echo("Current partition replica assignment")
    click.echo("")
    click.echo(_plan_json({k: current[k] for k in plan}))
    click.echo("")
    click.echo("Save this to use as the --reassignment-json-file option during rollback")
    if throttle is not None:
        _alter_configs(bootstrap, throttle_changes(plan, current, throttle))
        click.echo("Warning: You must run --verify periodically, until the reassignment completes, "
                   "to ensure the throttle is removed.")
        click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
    start_moves(bootstrap, plan)
    click.echo("Successfully started partition reassignments for " + ",".join(f"{t}-{p}" for t, p in sorted(plan)))


def start_moves(bootstrap: str, plan: dict[tuple[str, int], list[int]]) -> None:
    """AlterPartitionReassignments (KIP-455) of ``plan`` ((topic, partition) -> target replicas).

    Raises:
        CliError: the call failed, or a partition's move was refused (its error names).
    """
    from kafka import TopicPartition

    admin = _kafka_admin(bootstrap)
    try:
        res = _call(admin.alter_partition_reassignments, "cannot start the reassignment",
                    {TopicPartition(t, p): r for (t, p), r in plan.items()})
    finally:
        admin.close()
    failed = {f"{tp.topic}-{tp.partition}": _error_name(err) for tp, err in res.items() if err is not None}
    if failed:
        raise CliError("reassignment refused: " + ", ".join(f"{k}: {v}" for k, v in sorted(failed.items())))


def _verify(bootstrap: str, plan_file: Path) -> None:
    plan = _plan_partitions(plan_file)
    admin = _kafka_admin(bootstrap)
    try:
        ongoing = _call(admin.list_partition_reassignments, "cannot list reassignments",
                        {t: [p for (name, p) in plan if name == t] for t in {t for t, _ in plan}})
    finally:
        admin.close()
    in_progress = {(tp.topic, tp.partition) for tp in ongoing}
    current = _current(bootstrap, {t for t, _ in plan})
    click.echo("Status of partition reassignment:")
    done = True
    for (t, p), replicas in sorted(plan.items()):
        if (t, p) in in_progress:
            state, done = "is still in progress", False
        elif current.get((t, p)) == replicas:
            state = "is completed"
        else:
            state, done = f"failed: its replicas are {current.get((t, p))}, not {replicas}", False
        click.echo(f"Reassignment of partition {t}-{p} {state}.")
    if not done:
        raise SystemExit(1)
    _clear_throttles(bootstrap, sorted({t for t, _ in plan}))


def _clear_throttles(bootstrap: str, topics: list[str]) -> None:
    """Kafka ``--verify`` once every move completed: delete both rates on every broker and both
    throttled-replicas configs of ``topics``."""
    brokers = sorted(_admin(bootstrap).list_topics(timeout=CLIENT_TIMEOUT_S).brokers)
    _alter_configs(bootstrap, [("broker", str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in brokers])
    click.echo("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)))
    _alter_configs(bootstrap, [("topic", t, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}) for t in topics])
    click.echo("Clearing topic-level throttles on topics " + ",".join(topics))


def _cancel(bootstrap: str, plan_file: Path) -> None:
    from kafka import TopicPartition
    from kafka.errors import NoReassignmentInProgressError

    plan = _plan_partitions(plan_file)
    admin = _kafka_admin(bootstrap)
    try:
        res = _call(admin.alter_partition_reassignments, "cannot cancel the reassignment",
                    {TopicPartition(t, p): None for t, p in plan})
    finally:
        admin.close()
    cancelled = sorted(f"{tp.topic}-{tp.partition}" for tp, err in res.items() if err is None)
    idle = sorted(f"{tp.topic}-{tp.partition}" for tp, err in res.items() if err is NoReassignmentInProgressError)
    failed = {f"{tp.topic}-{tp.partition}": _error_name(err) for tp, err in res.items()
              if err is not None and err is not NoReassignmentInProgressError}
    if cancelled:
        click.echo("Successfully cancelled partition reassignments for: " + ",".join(cancelled))
    if idle:
        click.echo("None of the specified partition reassignments are active: " + ",".join(idle))
    if failed:
        raise CliError("cancel refused: " + ", ".join(f"{k}: {v}" for k, v in sorted(failed.items())))


@click.group()
def partition() -> None:
    """Partition tools (reassignment: kafka-reassign-partitions)."""


@partition.command()
@bootstrap_server_option
@click.option("--generate", "mode", flag_value="generate", help="Propose a plan for --topics-to-move-json-file "
                                                                "over --broker-list (changes nothing).")
@click.option("--execute", "mode", flag_value="execute", help="Start the moves of --reassignment-json-file.")
@click.option("--verify", "mode", flag_value="verify", help="Show whether the moves of --reassignment-json-file "
                                                            "completed (exit status 1 if not all).")
@click.option("--cancel", "mode", flag_value="cancel", help="Cancel the moves of --reassignment-json-file.")
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(path_type=Path), default=None,
              help='{"version": 1, "topics": [{"topic": "t"}]} (with --generate).')
@click.option("--broker-list", default=None, metavar="ID,ID,...", help="Brokers to place replicas on (--generate).")
@click.option("--reassignment-json-file", "plan_file", type=click.Path(path_type=Path), default=None,
              help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}.')
@click.option("--throttle", type=click.IntRange(min=1), default=None, metavar="BYTES_PER_S",
              help="With --execute: limit the replication of the moving replicas to this many bytes/s "
                   "per broker (leader and follower side); --verify removes it once the moves completed.")
def reassign(bootstrap, mode, topics_file, broker_list, plan_file, throttle) -> None:
    """Move partitions between brokers (KIP-455), with kafka-reassign-partitions' JSON files."""
    if mode is None:
        raise click.UsageError("one of --generate, --execute, --verify or --cancel is required")
    if mode == "generate":
        if topics_file is None or broker_list is None:
            raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        _generate(bootstrap, topics_file, broker_list)
        return
    if plan_file is None:
        raise click.UsageError(f"--{mode} needs --reassignment-json-file")
    if throttle is not None and mode != "execute":
        raise click.UsageError("--throttle goes with --execute")
    if mode == "execute":
        _execute(bootstrap, plan_file, throttle)
        return
    {"verify": _verify, "cancel": _cancel}[mode](bootstrap, plan_file)


def register(main: click.Group) -> None:
    main.add_command(partition)
