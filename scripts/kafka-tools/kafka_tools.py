"""Kafka's command-line tools, as far as client test suites call them, over LiteMQ's CLI.

librdkafka's test harness runs ``$KAFKA_PATH/bin/kafka-topics.sh`` and
``$KAFKA_PATH/bin/kafka-acls.sh`` (Apache Kafka's tools, which need a JVM and a Kafka
distribution). ``scripts/librdkafka-suite.sh`` points ``KAFKA_PATH`` at this directory, whose
``bin/`` scripts call this module: it parses the options of Kafka 4's tools that the suite uses
and runs the ``litemq`` command that does the same thing, so the suite's tests that create topics
with configs or add ACLs this way run against LiteMQ too.

Supported (anything else exits 2 with a message, as Kafka's tools do):

- ``kafka-topics.sh --bootstrap-server B --create --topic T [--partitions N]
  [--replication-factor N] [--config K=V]...``, ``--alter --topic T --partitions N``,
  ``--delete --topic T``, ``--list``, ``--describe --topic T``;
- ``kafka-acls.sh --bootstrap-server B --add|--remove|--list`` with ``litemq acl``'s options,
  which have Kafka's names (``--allow-principal``, ``--deny-host``, ``--operation``, ``--topic``,
  ``--group``, ``--cluster``, ...).
"""
from __future__ import annotations

import argparse
import os
import sys


def _topics(argv: list[str]) -> list[str]:
    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "alter", "delete", "list", "describe"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", default=[])
    a = p.parse_args(argv)
    b = ["-b", a.bootstrap_server]
    if a.list:
        return ["topic", "list", *b]
    if not a.topic:
        p.error("--topic is required")
    if a.create:
        cmd = ["topic", "create", a.topic, *b]
        if a.partitions is not None:
            cmd += ["--partitions", str(a.partitions)]
        if a.replication_factor is not None:
            cmd += ["--replicas", str(a.replication_factor)]
        for kv in a.config:
            cmd += ["--config", kv]
        return cmd
    if a.alter:
        if a.partitions is None or a.config:
            p.error("--alter takes --partitions (configs: kafka-configs.sh)")
        return ["topic", "add-partitions", a.topic, "--partitions", str(a.partitions), *b]
    if a.delete:
        return ["topic", "delete", a.topic, *b]
    return ["topic", "describe", a.topic, *b]


def _acls(argv: list[str]) -> list[str]:
    actions = [x for x in ("--add", "--remove", "--list") if x in argv]
    if len(actions) != 1:
        print("kafka-acls.sh: exactly one of --add, --remove, --list", file=sys.stderr)
        sys.exit(2)
    rest = [x for x in argv if x != actions[0]]
    cmd = ["acl", actions[0][2:], *rest]
    if actions[0] == "--remove" and "--force" not in rest:
        cmd.append("--force")  # Kafka's tool asks on a terminal; a script passes --force
    return cmd


def main() -> None:
    tool, argv = sys.argv[1], sys.argv[2:]
    cmd = {"topics": _topics, "acls": _acls}[tool](argv)
    os.execvp("litemq", ["litemq", *cmd])


if __name__ == "__main__":
    main()
