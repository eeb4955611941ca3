"""Client commands (rpk/kcat-like): ``topic ...``, ``produce``, ``consume``.

They use confluent-kafka (librdkafka), so they work against LiteMQ and against any Kafka
cluster. Every failure is turned into one readable line (:class:`CliError`).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import click

from litemq.cli.client_config import client_config, command_config_option
from litemq.cli.common import CliError, bootstrap_server_option, console, err_console, make_table
from litemq.cli.common import parse_kv as _parse_kv

CLIENT_TIMEOUT_S = 10.0
CONNECT_GIVE_UP_S = 4.0
"""A client command gives up this long after its start when every bootstrap broker refuses the
connection or cannot be resolved (librdkafka keeps retrying forever; a broker that is not
running is the common case), with one line instead of librdkafka's retry log."""
QUIET_LOG_LEVEL = 0
"""librdkafka ``log_level`` of the CLI's clients (syslog levels, 0 = emergencies only): its
connection-retry log lines would bury the one-line error; a ``--command-config`` file may set
``log_level`` (or ``debug``) to see them."""
_CONNECT_ERRORS = ("_TRANSPORT", "_RESOLVE", "_ALL_BROKERS_DOWN")
_FATAL_CONNECT_ERRORS = ("_AUTHENTICATION", "_SSL")


def bootstrap_option(f):
    """``-b/--bootstrap-server`` (env ``LITEMQ_BOOTSTRAP_SERVER``) and ``--command-config``
    (client security settings)."""
    return command_config_option(bootstrap_server_option(f))


def _quiet(conf: dict) -> dict:
    """``conf`` with librdkafka's log silenced unless the command-config file sets a level."""
    conf.setdefault("log_level", QUIET_LOG_LEVEL)
    return conf


def _admin(bootstrap: str):
    """An AdminClient that has fetched metadata from a broker of ``bootstrap``.

    Raises:
        CliError: one line, ``cannot reach a broker at HOST:PORT (reason)``: after
            :data:`CONNECT_GIVE_UP_S` when every connection attempt is refused or the host does
            not resolve, at once on an authentication or TLS failure, else after
            :data:`CLIENT_TIMEOUT_S`.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []
    try:
        admin = AdminClient(_quiet(client_config(bootstrap, {"socket.connection.setup.timeout.ms": 5000,
                                                             "error_cb": errors.append})))
    except (KafkaException, ValueError, TypeError) as exc:  # a bad client setting
        raise CliError(f"bad client configuration: {_reason(exc)}") from None
    start = time.monotonic()
    last: BaseException | None = None
    while True:
        try:
            admin.list_topics(timeout=0.5)
            return admin
        except KafkaException as exc:
            last = exc
        admin.poll(0)  # serves error_cb
        names = {e.name() for e in errors}
        elapsed = time.monotonic() - start
        if names & set(_FATAL_CONNECT_ERRORS) or elapsed >= CLIENT_TIMEOUT_S or (
                names and names <= set(_CONNECT_ERRORS) and elapsed >= CONNECT_GIVE_UP_S):
            raise CliError(f"cannot reach a broker at {bootstrap} ({_connect_reason(errors, last)})")
        if not (names <= set(_CONNECT_ERRORS)):
            errors.clear()  # keep waiting on anything else (a broker still starting) until the timeout


def _connect_reason(errors: list, last: BaseException | None) -> str:
    """Short reason from librdkafka's errors: ``connection refused``, ``cannot resolve host``, ..."""
    for err in reversed(errors):
        if err.name() in _FATAL_CONNECT_ERRORS:
            return err.str()
    for err in reversed(errors):
        if err.name() == "_RESOLVE":
            return "cannot resolve host"
        if err.name() == "_TRANSPORT":
            text = err.str()
            detail = text.split("failed: ", 1)[-1].split(" (after ", 1)[0]
            return detail[:1].lower() + detail[1:]
    return _reason(last) if last is not None else "no answer"


def _reason(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else exc
    return getattr(err, "str", lambda: str(err))()


def _wait(futures: dict, what: str) -> None:
    for key, fut in futures.items():
        try:
            fut.result(timeout=CLIENT_TIMEOUT_S * 3)
        except Exception as exc:
            raise CliError(f"{what} {key}: {_reason(exc)}") from None


@click.group()
def topic() -> None:
    """Create, list, describe, delete topics and change their configs."""


@topic.command("create")
@click.argument("name")
@click.option("-p", "--partitions", type=int, default=-1, help="Partition count [broker default].")
@click.option("-r", "--replicas", type=int, default=-1, help="Replication factor [broker default].")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable).")
@bootstrap_option
def topic_create(name, partitions, replicas, configs, bootstrap) -> None:
    """Create topic NAME."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic(name, partitions, replicas, config=_parse_kv(configs, "--config"))],
                              operation_timeout=CLIENT_TIMEOUT_S), "cannot create topic")
    console.print(f"created topic [bold]{name}[/]")


@topic.command("list")
@click.option("-a", "--all", "show_internal", is_flag=True, help="Include internal topics.")
@bootstrap_option
def topic_list(show_internal, bootstrap) -> None:
    """List topics with their partition counts."""
    md = _admin(bootstrap).list_topics(timeout=CLIENT_TIMEOUT_S)
    table = make_table("TOPIC", "PARTITIONS")
    for name in sorted(md.topics):
        if name.startswith("__") and not show_internal:
            continue
        table.add_row(name, str(len(md.topics[name].partitions)))
    console.print(table)


@topic.command("describe")
@click.argument("name")
@bootstrap_option
def topic_describe(name, bootstrap) -> None:
    """Partitions (leader, replicas, offsets) and configs of topic NAME. A partition without a
    leader shows the leader as none; offsets that cannot be read (no leader, leader down or
    moving) show as unknown."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import ConfigResource

    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)  # all topics: never auto-creates
    t = md.topics.get(name)
    if t is None or t.error is not None:
        raise CliError(f"unknown topic {name!r}")
    consumer = Consumer(_quiet(client_config(bootstrap, {"group.id": f"litemq-cli-{uuid.uuid4()}",
                                                         "enable.auto.commit": False})))
    table = make_table("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG START", "HIGH WATERMARK")
    try:
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            lo = hi = "unknown"
            if p.leader >= 0:
                try:
                    lo, hi = consumer.get_watermark_offsets(TopicPartition(name, pid), timeout=CLIENT_TIMEOUT_S)
                except KafkaException:  # the leader moved or is down since the metadata was read
                    pass
            table.add_row(str(pid), str(p.leader) if p.leader >= 0 else "none", ",".join(map(str, p.replicas)),
                          ",".join(map(str, p.isrs)), str(lo), str(hi))
    finally:
        consumer.close()
    console.print(f"[bold]{name}[/]  partitions: {len(t.partitions)}")
    console.print(table)
    res = ConfigResource("topic", name)
    configs = admin.describe_configs([res])[res].result(timeout=CLIENT_TIMEOUT_S)
    ctable = make_table("CONFIG", "VALUE", "SOURCE")
    for key in sorted(configs):
        entry = configs[key]
        ctable.add_row(key, str(entry.value), config_source_name(entry.source))
    console.print(ctable)


def config_source_name(source) -> str:
    """Kafka's name of a DescribeConfigs ``config_source`` (``DYNAMIC_TOPIC_CONFIG``,
    ``STATIC_BROKER_CONFIG``, ``DEFAULT_CONFIG``, ... as ``kafka-configs.sh`` prints them);
    confluent-kafka hands it over as a number or a ``ConfigSource``. Unknown codes stay numbers."""
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(getattr(source, "value", source)).name
    except ValueError:
        return str(getattr(source, "value", source))


@topic.command("delete")
@click.argument("name")
@bootstrap_option
def topic_delete(name, bootstrap) -> None:
    """Delete topic NAME and its data."""
    admin = _admin(bootstrap)
    _wait(admin.delete_topics([name], operation_timeout=CLIENT_TIMEOUT_S), "cannot delete topic")
    console.print(f"deleted topic [bold]{name}[/]")


@topic.command("alter-config")
@click.argument("name")
@click.option("-c", "--config", "configs", multiple=True, required=True, metavar="KEY=VALUE",
              help="Config to set (repeatable); an empty value deletes the override.")
@bootstrap_option
def topic_alter_config(name, configs, bootstrap) -> None:
    """Set or delete topic configs (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = _admin(bootstrap)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v else AlterConfigOpType.DELETE)
               for k, v in _parse_kv(configs, "--config").items()]
    res = ConfigResource("topic", name, incremental_configs=entries)
    _wait(admin.incremental_alter_configs([res]), "cannot alter configs of topic")
    console.print(f"updated configs of [bold]{name}[/]")


@topic.command("add-partitions")
@click.argument("name")
@click.option("-p", "--partitions", type=click.IntRange(1), required=True,
              help="The new partition count (more than now; kafka-topics.sh --alter --partitions).")
@bootstrap_option
def topic_add_partitions(name, partitions, bootstrap) -> None:
    """Raise topic NAME's partition count to --partitions (CreatePartitions, Kafka message schema
    v0-3). Existing records stay where they are; keyed records may map to other partitions after."""
    from confluent_kafka.admin import NewPartitions

    admin = _admin(bootstrap)
    _wait(admin.create_partitions([NewPartitions(name, partitions)], operation_timeout=CLIENT_TIMEOUT_S),
          "cannot add partitions to topic")
    console.print(f"topic [bold]{name}[/] now has {partitions} partitions")


@topic.command("delete-records")
@click.argument("name")
@click.option("--partition", "partitions", type=click.IntRange(0), multiple=True,
              help="Partition (repeatable) [all of the topic's].")
@click.option("--before", "before_offset", type=click.IntRange(-1), required=True,
              help="Delete every record below this offset; -1 = the high watermark (all of it).")
@bootstrap_option
def topic_delete_records(name, partitions, before_offset, bootstrap) -> None:
    """Delete the records of topic NAME below an offset: the partitions' log start offset moves
    there (DeleteRecords, Kafka message schema v0-2; kafka-delete-records.sh). Prints each
    partition's new log start offset."""
    from confluent_kafka import TopicPartition

    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        raise CliError(f"unknown topic {name!r}")
    unknown = sorted(set(partitions) - set(t.partitions))
    if unknown:
        raise CliError(f"topic {name!r} has no partition {', '.join(map(str, unknown))} "
                       f"(it has {len(t.partitions)})")
    wanted = [TopicPartition(name, p, before_offset) for p in sorted(set(partitions) or t.partitions)]
    futures = admin.delete_records(wanted, operation_timeout=CLIENT_TIMEOUT_S)
    table = make_table("PARTITION", "LOG START", "ERROR")
    failed = []
    for tp, fut in sorted(futures.items(), key=lambda kv: kv[0].partition):
        try:
            table.add_row(str(tp.partition), str(fut.result(timeout=CLIENT_TIMEOUT_S * 3).low_watermark), "")
        except Exception as exc:  # per partition, as Kafka answers (e.g. an offset above the high watermark)
            failed.append(tp.partition)
            table.add_row(str(tp.partition), "-", _reason(exc))
    console.print(table)
    if failed:
        raise CliError(f"records of {name} partition{'s' if len(failed) > 1 else ''} "
                       f"{', '.join(map(str, failed))} not deleted (see above)")


@click.command()
@click.argument("topic_name", metavar="TOPIC")
@click.option("-k", "--key", default=None, help="Key for every record.")
@click.option("-K", "--key-delimiter", default=None, help="Split each line at this delimiter into key and value.")
@click.option("-f", "--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Read lines from FILE instead of stdin.")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE", help="Header on every record.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("-z", "--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default="none",
              show_default=True)
@bootstrap_option
def produce(topic_name, key, key_delimiter, path, headers, acks, compression, bootstrap) -> None:
    """Send one record per line of stdin (or --file) to TOPIC.

    A keyed record goes to the partition Kafka's Java client picks (murmur2 of the key), as
    with every LiteMQ producer and the REST API; an unkeyed one to any partition.
    """
    from confluent_kafka import KafkaException, Producer

    from litemq.protocol.partitioner import producer_config

    _admin(bootstrap)
    failures: list[str] = []
    delivered = 0

    def on_delivery(err, _msg):
        nonlocal delivered
        if err is not None:
            failures.append(err.str())
        else:
            delivered += 1

    settings = {"acks": acks, "enable.idempotence": acks == "all", "compression.type": compression, "linger.ms": 5}
    producer = Producer(_quiet(producer_config(client_config(bootstrap, settings))))
    hdrs = list(_parse_kv(headers, "--header").items()) or None
    stream = path.open("rb") if path else sys.stdin.buffer
    try:
        for raw in stream:
            line = raw.rstrip(b"\n").rstrip(b"\r")
            k = key.encode() if key is not None else None
            if key_delimiter is not None and key_delimiter.encode() in line:
                k, line = line.split(key_delimiter.encode(), 1)
            while True:
                try:
                    producer.produce(topic_name, value=line, key=k, headers=hdrs, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            if failures:
                break
        remaining = producer.flush(CLIENT_TIMEOUT_S * 3)
    except KafkaException as exc:
        raise CliError(_produce_failure(exc)) from None
    except SystemError as exc:
        # confluent-kafka runs on_delivery with a fatal error's KafkaException still pending, and
        # the callback's first call into the C extension turns it into this SystemError
        if not isinstance(exc.__cause__, KafkaException):
            raise
        raise CliError(_produce_failure(exc.__cause__)) from None
    finally:
        if path:
            stream.close()
    if failures:
        raise CliError(f"delivery failed: {failures[0]}")
    if remaining:
        raise CliError(f"{remaining} record(s) not acknowledged in time")
    err_console_print(f"produced {delivered} record(s) to {topic_name}")


def _produce_failure(exc: BaseException) -> str:
    """One line for a producer's fatal error; a refused idempotent producer id says what it needs."""
    from confluent_kafka import KafkaError

    reason = _reason(exc)
    err = exc.args[0] if exc.args else None
    if getattr(err, "code", lambda: None)() == KafkaError.CLUSTER_AUTHORIZATION_FAILED and "idempotence PID" in reason:
        reason += (" (with --acks all the producer is idempotent: it needs IdempotentWrite on the cluster "
                   "or Write on a topic; --acks 1 does not)")
    return reason


def err_console_print(text: str) -> None:
    err_console.print(text)


def format_record(fmt: str, msg) -> bytes:
    """kcat-style format: %t topic, %p partition, %o offset, %k key, %s value, %T timestamp ms,
    %h headers (k=v,...), %K key length, %S value length, \\n \\t escapes."""
    out = bytearray()
    i = 0
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            code = fmt[i + 1]
            i += 2
            if code == "t":
                out += msg.topic().encode()
            elif code == "p":
                out += str(msg.partition()).encode()
            elif code == "o":
                out += str(msg.offset()).encode()
            elif code == "k":
                out += msg.key() or b""
            elif code == "s":
                out += msg.value() or b""
            elif code == "T":
                out += str(msg.timestamp()[1]).encode()
            elif code == "K":
                out += str(len(msg.key()) if msg.key() is not None else -1).encode()
            elif code == "S":
                out += str(len(msg.value()) if msg.value() is not None else -1).encode()
            elif code == "h":
                out += ",".join(f"{k}={(v or b'').decode(errors='replace')}" for k, v in (msg.headers() or [])).encode()
            elif code == "%":
                out += b"%"
            else:
                out += ("%" + code).encode()
        else:
            out += c.encode()
            i += 1
    return bytes(out)


@click.command()
@click.argument("topic_name", metavar="TOPIC")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (default: only new records).")
@click.option("-n", "--count", type=int, default=None, help="Exit after COUNT records.")
@click.option("-g", "--group", default=None, help="Join consumer group GROUP and commit offsets.")
@click.option("-f", "--format", "fmt", default="%s\\n", show_default=True,
              help="kcat-style output format (%t %p %o %k %s %T %h).")
@click.option("--timeout", "idle_timeout_s", type=float, default=None,
              help="Exit after this many seconds without a record.")
@click.option("--rack", default=None, metavar="RACK",
              help="client.rack: read from a replica in this rack when the leader's broker names one (KIP-392).")
@bootstrap_option
def consume(topic_name, from_beginning, count, group, fmt, idle_timeout_s, rack, bootstrap) -> None:
    """Print records of TOPIC.

    SIGTERM or Ctrl-C stops it cleanly: the consumer is closed (with -g it commits its offsets
    and leaves the group at once, instead of being dropped after the session timeout), exit 0.
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=CLIENT_TIMEOUT_S)  # all topics: never auto-creates
    t = md.topics.get(topic_name)
    if t is None or t.error is not None or not t.partitions:
        raise CliError(f"unknown topic {topic_name!r}")
    conf = _quiet(client_config(bootstrap, {"enable.partition.eof": False,
                                            "auto.offset.reset": "earliest" if from_beginning else "latest"}))
    if rack:
        conf["client.rack"] = rack
    if group:
        conf.update({"group.id": group, "enable.auto.commit": True})
    else:
        conf.update({"group.id": f"litemq-cli-{uuid.uuid4()}", "enable.auto.commit": False})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())  # as Ctrl-C: close, then exit 0
    consumer = Consumer(conf)
    if group:
        consumer.subscribe([topic_name])
    else:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(topic_name, p, start) for p in sorted(t.partitions)])
    seen = 0
    last = time.monotonic()
    out = sys.stdout.buffer
    try:
        while (count is None or seen < count) and not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None:
                if idle_timeout_s is not None and time.monotonic() - last > idle_timeout_s:
                    break
                continue
            if msg.error():
                raise CliError(msg.error().str())
            last = time.monotonic()
            out.write(format_record(fmt, msg))
            out.flush()
            seen += 1
    except KeyboardInterrupt:
        pass
    except KafkaException as exc:
        raise CliError(_reason(exc)) from None
    finally:
        consumer.close()


def register(main: click.Group) -> None:
    main.add_command(topic)
    main.add_command(produce)
    main.add_command(consume)
