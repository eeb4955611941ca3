"""The ``litemq`` command: ``serve``, ``topic``, ``produce``, ``consume`` (and more per issue).

Client commands talk to any Kafka-protocol cluster through confluent-kafka (librdkafka), with
``-b/--bootstrap-server`` (default 127.0.0.1:9092). Errors are printed as one readable line
(no traceback) and exit with status 1; bad arguments exit with status 2 (click).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click

from litemq.broker.malloc import keep_freed_memory
from litemq.cli.common import CliError, address_callback, check_peers, parse_address, parse_kv
from litemq.config import DEFAULT_HTTP_LISTEN, DEFAULT_LISTEN, BrokerConfig


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="litemq")
def main() -> None:
    """LiteMQ: a Kafka-compatible streaming log in Python."""


# ------------------------------------------------------------------ serve
@main.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="Log directory (log.dirs).")
@click.option("--listen", default=None, metavar="HOST:PORT", callback=address_callback(resolve=True),
              help=f"HOST:PORT of one PLAINTEXT listener [default {DEFAULT_LISTEN}]; for several (SSL, SASL) "
                   "set listeners=NAME://HOST:PORT,... instead.")
@click.option("--advertise", default=None, metavar="HOST:PORT", callback=address_callback(),
              help="HOST:PORT clients are told to use (advertised.listeners).")
@click.option("--node-id", type=int, default=None, help="This broker's id (node.id).")
@click.option("--rpc-listen", default=None, metavar="HOST:PORT",
              callback=address_callback(resolve=True, example="127.0.0.1:9192"),
              help="HOST:PORT for broker-to-broker Raft traffic (cluster mode).")
@click.option("--peers", default=None, metavar="ID@HOST:PORT,...", callback=check_peers,
              help="Every broker of the cluster with its --rpc-listen address (the metadata voters; "
                   "Kafka's controller.quorum.voters). Without it the broker runs alone.")
@click.option("--join", default=None, metavar="HOST:PORT,...",
              help="RPC addresses of brokers of a running cluster to join as an observer (a new broker that is "
                   "not in --peers; Kafka's controller.quorum.bootstrap.servers). 'litemq cluster add-controller' "
                   "makes it a metadata voter.")
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Java-style properties file with Kafka broker setting names.")
@click.option("-o", "--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Broker setting with its Kafka name, e.g. -o num.partitions=3 (repeatable).")
@click.option("--num-partitions", type=int, default=None, help="Default partitions of new topics.")
@click.option("--auto-create-topics/--no-auto-create-topics", default=None,
              help="auto.create.topics.enable")
@click.option("--http-listen", default=None, metavar="HOST:PORT|off",
              callback=address_callback(resolve=True, allow_off=True, example=DEFAULT_HTTP_LISTEN),
              help=f"HTTP port for /metrics, the web console and the REST API (http.listen) "
                   f"[default {DEFAULT_HTTP_LISTEN}; port 0 = any free port; off = none].")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def serve(data_dir, listen, advertise, node_id, rpc_listen, peers, join, config_file, overrides, num_partitions,
          auto_create_topics, http_listen, log_level) -> None:
    """Run one broker in the foreground until SIGTERM/SIGINT (clean shutdown)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_kv(overrides, "--override")
    try:
        cfg = BrokerConfig.from_sources(config_file, settings)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if data_dir is not None:
        cfg.data_dir = data_dir
    if listen is not None:
        if cfg.listeners.strip():
            raise CliError("--listen and the listeners setting exclude each other: put every listener in listeners")
        cfg.listen_host, cfg.listen_port = _address(listen)
    if advertise is not None:
        cfg.advertised_host, cfg.advertised_port = _address(advertise)
    if node_id is not None:
        cfg.node_id = node_id
    if peers is not None:
        cfg.controller_quorum_voters = peers
    if join is not None:
        cfg.controller_quorum_bootstrap_servers = join
    try:
        voters = cfg.quorum_voters()
    except ValueError as exc:
        raise CliError(f"--peers: {exc}") from None
    try:
        joining = cfg.quorum_bootstrap_servers()
    except ValueError as exc:
        raise CliError(f"--join: {exc}") from None
    if rpc_listen is not None:
        cfg.rpc_listen_host, cfg.rpc_listen_port = _address(rpc_listen)
    elif cfg.node_id in voters:
        cfg.rpc_listen_host, cfg.rpc_listen_port = voters[cfg.node_id]
    if voters and cfg.node_id not in voters and not joining:
        raise CliError(f"--node-id {cfg.node_id} is not one of the --peers {sorted(voters)} (a new broker joins "
                       "a running cluster with --join)")
    if joining and not cfg.rpc_listen_port:
        raise CliError("--join needs --rpc-listen HOST:PORT (the address the cluster's brokers reach this one at)")
    if num_partitions is not None:
        try:
            cfg.apply({"num.partitions": str(num_partitions)})  # checked against its bounds
        except ValueError as exc:
            raise CliError(str(exc)) from None
    if auto_create_topics is not None:
        cfg.auto_create_topics_enable = auto_create_topics
    if http_listen is not None:
        cfg.http_listen = http_listen
    try:
        cfg.validate()
        keep_freed_memory()
        asyncio.run(_serve(cfg))
    except (OSError, ValueError) as exc:  # ValueError: a bad setting (named) or unreadable PEM file
        raise CliError(f"cannot start broker: {exc}") from None


async def _serve(cfg: BrokerConfig) -> None:
    from litemq.broker.broker import BrokerRuntime

    runtime = BrokerRuntime(cfg)
    await runtime.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    where = ", ".join(f"{s.name}://{s.host}:{runtime.ports[s.name]}" for s in runtime.listeners)
    print(f"LiteMQ broker {cfg.node_id} ready on {where}", flush=True)
    if runtime.http.url is not None:
        print(f"console {runtime.http.url}/console/ · metrics {runtime.http.url}/metrics", flush=True)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([stopping, runtime.failed], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    await runtime.stop()
    if runtime.failed.done():  # its data dir belongs to another cluster (found joining the peers)
        raise ValueError(runtime.failed.result())


def _address(text: str) -> tuple[str, int]:
    """A checked ``HOST:PORT`` option value -> (host, port); an empty host is loopback."""
    host, port = parse_address(text)
    return host or "127.0.0.1", port


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
