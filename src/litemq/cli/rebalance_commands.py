"""``litemq broker decommission N`` and ``litemq cluster rebalance`` (issue 20): planned partition
reassignments (KIP-455) over the whole cluster, as Redpanda's ``rpk redpanda admin brokers
decommission`` and Kafka's remove-broker flow (reassign, then ``kafka-cluster.sh unregister``).

- ``decommission N``: plans moving every replica off broker N onto the other live brokers
  (:func:`litemq.cluster.rebalance.decommission_plan`: replication factors kept, least loaded
  first, rack-aware), starts it with AlterPartitionReassignments, waits until
  ListPartitionReassignments lists none of its partitions and the metadata shows the targets,
  then unregisters N (UnregisterBroker, KIP-631). Refused before anything changes when a
  partition's replication factor exceeds the live brokers other than N. ``--no-wait`` only
  starts the moves. A broker still running stays unregistered until it restarts: stop it.
- ``rebalance``: plans even replica counts over the live brokers with minimal moves, then even
  preferred leaders (:func:`litemq.cluster.rebalance.rebalance_plan`), executes, waits, and runs a
  preferred leader election (ElectLeaders, KIP-460) over the planned partitions. ``--dry-run``
  prints the plan as kafka-reassign-partitions' JSON and changes nothing.

The live brokers and their racks come from DescribeCluster, the assignment from Metadata
(confluent-kafka); the reassignment calls go through kafka-python (confluent-kafka has none).
"""

from __future__ import annotations

import time

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, _admin, bootstrap_option
from litemq.cli.cluster_commands import cluster, unregister_broker
from litemq.cli.common import CliError, console, make_table
from litemq.cli.partition_commands import _call, _kafka_admin, _plan_json, start_moves

DEFAULT_WAIT_TIMEOUT_S = 600.0
"""How long ``decommission`` and ``rebalance`` wait for their moves by default."""

POLL_INTERVAL_S = 1.0


def _cluster_view(bootstrap: str) -> tuple[dict[tuple[str, int], list[int]], list[int], dict[int, str | None]]:
    """(assignment of every topic, live broker ids, broker id -> rack)."""
    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    assignment = {(t, p): list(pm.replicas) for t, tm in md.topics.items() if tm.error is None
                  for p, pm in tm.partitions.items()}
    try:
        nodes = admin.describe_cluster(request_timeout=CLIENT_TIMEOUT_S).result(timeout=CLIENT_TIMEOUT_S * 2).nodes
    except Exception as exc:  # confluent-kafka raises KafkaException or a timeout
        raise CliError(f"DescribeCluster failed: {exc}") from None
    return assignment, sorted(n.id for n in nodes), {n.id: n.rack for n in nodes}


def _print_plan(plan: dict, assignment: dict) -> None:
    table = make_table("Partition", "Replicas", "New replicas")
    for (t, p), replicas in sorted(plan.items()):
        table.add_row(f"{t}-{p}", str(assignment[(t, p)]), str(replicas))
    console.print(table)


def _counts_line(assignment: dict, brokers: list[int]) -> str:
    from litemq.cluster.rebalance import replica_counts

    return ", ".join(f"{b}: {n}" for b, n in sorted(replica_counts(assignment, brokers).items()))


def _execute(bootstrap: str, plan: dict) -> None:
    start_moves(bootstrap, plan)
    console.print(f"Started {len(plan)} partition reassignment(s).")


def _wait(bootstrap: str, plan: dict, timeout_s: float) -> None:
    """Until no partition of ``plan`` is listed in progress and each has its planned replicas.

    Raises:
        CliError: not done within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    topics = sorted({t for t, _ in plan})
    left = len(plan)
    while True:
        admin = _kafka_admin(bootstrap)
        try:
            ongoing = _call(admin.list_partition_reassignments, "cannot list reassignments",
                            {t: [p for (name, p) in plan if name == t] for t in topics})
        finally:
            admin.close()
        in_progress = {(tp.topic, tp.partition) for tp in ongoing}
        current, _, _ = _cluster_view(bootstrap)
        pending = [k for k, r in plan.items() if k in in_progress or current.get(k) != r]
        if len(pending) != left:
            left = len(pending)
            console.print(f"{len(plan) - left} of {len(plan)} partition(s) moved")
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CliError(f"{left} partition(s) still moving after {timeout_s:g}s: "
                           + ", ".join(f"{t}-{p}" for t, p in sorted(pending)[:10]))
        time.sleep(POLL_INTERVAL_S)


def _elect_preferred(bootstrap: str, keys) -> None:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    if not keys:
        return
    admin = _admin(bootstrap)
    try:
        # confluent-kafka 2.16 refuses elect_leaders' own timeout options
        res = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in sorted(keys)]) \
            .result(timeout=CLIENT_TIMEOUT_S * 4)
    except Exception as exc:
        raise CliError(f"preferred leader election failed: {exc}") from None
    failed = {f"{tp.topic}-{tp.partition}": err.name() for tp, err in res.items()
              if err is not None and err.code() != KafkaError.ELECTION_NOT_NEEDED}
    if failed:
        console.print("Preferred leader election failed for: "
                      + ", ".join(f"{k} ({v})" for k, v in sorted(failed.items())))
    else:
        console.print("Preferred leaders elected.")


@click.group()
def broker() -> None:
    """Broker tools (decommission)."""


@broker.command("decommission")
@bootstrap_option
@click.argument("broker_id", type=int)
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait for the moves and unregister the broker (--no-wait: only start the moves).")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_WAIT_TIMEOUT_S, show_default=True,
              help="Seconds to wait for the moves.")
def broker_decommission(bootstrap, broker_id, wait, timeout_s) -> None:
    """Move every replica off broker BROKER_ID, then unregister it (stop it afterwards)."""
    from litemq.cluster.rebalance import PlanError, decommission_plan

    assignment, live, racks = _cluster_view(bootstrap)
    if broker_id not in live and not any(broker_id in r for r in assignment.values()):
        raise CliError(f"broker {broker_id} is neither live nor a replica of any partition")
    try:
        plan = decommission_plan(assignment, broker_id, live, racks)
    except PlanError as exc:
        raise CliError(str(exc)) from None
    console.print(f"Replicas per live broker: {_counts_line(assignment, live)}")
    if plan:
        console.print(f"Moving {len(plan)} partition(s) off broker {broker_id}:")
        _print_plan(plan, assignment)
        _execute(bootstrap, plan)
        if not wait:
            return
        _wait(bootstrap, plan, timeout_s)
    else:
        console.print(f"Broker {broker_id} holds no replicas.")
        if not wait:
            return
    unregister_broker(bootstrap, broker_id)
    console.print(f"Broker {broker_id} is decommissioned: it holds no replicas and is no longer registered "
                  "(stop it: a running broker stays unregistered only until it restarts).")


@cluster.command("rebalance")
@bootstrap_option
@click.option("--dry-run", is_flag=True, help="Print the plan (kafka-reassign-partitions JSON) and change nothing.")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_WAIT_TIMEOUT_S, show_default=True,
              help="Seconds to wait for the moves.")
def cluster_rebalance(bootstrap, dry_run, timeout_s) -> None:
    """Spread replicas, then preferred leaders, evenly over the live brokers (minimal moves)."""
    from litemq.cluster.rebalance import rebalance_plan

    assignment, live, racks = _cluster_view(bootstrap)
    plan = rebalance_plan(assignment, live, racks)
    if dry_run:
        click.echo("Current partition replica assignment")
        click.echo(_plan_json({k: assignment[k] for k in plan}))
        click.echo("")
        click.echo("Proposed partition reassignment configuration")
        click.echo(_plan_json(plan))
        return
    console.print(f"Replicas per live broker: {_counts_line(assignment, live)}")
    if not plan:
        console.print("The cluster is balanced: nothing to move.")
        return
    _print_plan(plan, assignment)
    _execute(bootstrap, plan)
    _wait(bootstrap, plan, timeout_s)
    _elect_preferred(bootstrap, plan)
    after, live, _ = _cluster_view(bootstrap)
    console.print(f"Replicas per live broker now: {_counts_line(after, live)}")


def register(main: click.Group) -> None:
    main.add_command(broker, "broker")
