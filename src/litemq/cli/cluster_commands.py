"""``litemq cluster start|stop|status``: a local multi-process replicated cluster for development.

``start`` runs N detached ``litemq serve`` processes on 127.0.0.1 (node i: client port
``BASE+i-1``, RPC port ``BASE+100+i-1``, data in ``DIR/node-<i>``, output in
``DIR/node-<i>/broker.log``), records them in ``DIR/cluster.json``, waits until a metadata
leader sees all N brokers live and prints the bootstrap servers. ``stop`` sends SIGTERM to the
recorded processes, waits for them and marks ``cluster.json`` stopped (the data is kept; ``status``
and another ``stop`` then print the ``cluster start`` command that runs it again); ``status``
asks the brokers' RPC ``status`` and shows the brokers, the metadata group and every
partition's leader, epoch, replicas, high watermark, log end offset and largest replica lag.

``describe-quorum``, ``add-controller``, ``remove-controller`` and ``unregister`` speak the Kafka
protocol to ``--bootstrap-server`` (with the ``--command-config`` security settings), as
``kafka-metadata-quorum.sh describe --status`` / ``--replication`` / ``add-controller`` /
``remove-controller`` and ``kafka-cluster.sh unregister --id``: DescribeQuorum (KIP-595),
AddRaftVoter and RemoveRaftVoter (KIP-853) and UnregisterBroker (KIP-631).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import click

from litemq.cli.client_commands import CLIENT_TIMEOUT_S, bootstrap_option
from litemq.cli.common import CliError, console, make_table, parse_kv
from litemq.cluster.quorum import directory_uuid, directory_id_text
from litemq.config import DEFAULT_HTTP_PORT, BrokerConfig
from litemq.limits import VOTER_CHANGE_MAX_TIMEOUT_MS, VOTER_CHANGE_TIMEOUT_MS
from litemq.testing.cluster import HOST, ask_status, claimed_leaders, cluster_args, wait_cluster_ready, wait_for
from litemq.testing.process import port_is_free

STATE_FILE = "cluster.json"
DEFAULT_DIR = "litemq-cluster"
RPC_PORT_OFFSET = 100


def data_dir_option(f):
    return click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
                        show_default=True, help="Directory of the cluster (node-<id>/ and cluster.json).")(f)


# ------------------------------------------------------------------ process bookkeeping
def _is_our_broker(pid: int) -> bool:
    """True when ``pid`` is a running (not zombie) ``litemq ... serve`` process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _pid_exists(pid)  # no /proc (macOS): trust the recorded pid
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and b"serve" in cmdline and any(b"litemq" in a for a in cmdline)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _load_state(data_dir: Path) -> dict:
    """``DIR/cluster.json``.

    Raises:
        CliError: no such file: "no cluster in DIR" when DIR holds no broker data either, else
            that the cluster is stopped and the ``cluster start`` command to run it again;
            an unreadable file.
    """
    path = data_dir / STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        node_ids = _node_dirs(data_dir)
        if not node_ids:
            raise CliError(f"no cluster in {data_dir} (neither {STATE_FILE} nor node-<id>/ data there); start one "
                           f"with 'litemq cluster start --data-dir {shlex.quote(str(data_dir))}'") from None
        raise CliError(f"the cluster in {data_dir} is not running (data of {len(node_ids)} broker"
                       f"{'s' if len(node_ids) > 1 else ''} kept, no {STATE_FILE}); start it again with: "
                       f"litemq cluster start -n {max(node_ids)} --data-dir {shlex.quote(str(data_dir))} "
                       "--base-port <its first node's client port>") from None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def _node_dirs(data_dir: Path) -> list[int]:
    """Node ids of the ``node-<id>/`` directories in ``data_dir`` (none when it does not exist)."""
    try:
        names = [p.name for p in data_dir.iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(int(m.group(1)) for name in names if (m := re.fullmatch(r"node-(\d+)", name)))


def _recorded_start(state: dict) -> tuple[int, int, int, list[str], dict[str, str]]:
    """How the cluster recorded in ``state`` was started: ``(nodes, base port, HTTP base port,
    racks, overrides)``."""
    nodes = state.get("nodes") or []
    start = state.get("start") or {}  # recorded since the stopped state is kept; else from the nodes
    return (start.get("nodes", len(nodes)), start.get("base_port", min((nd["port"] for nd in nodes), default=9092)),
            start.get("http_base_port", DEFAULT_HTTP_PORT), list(start.get("racks") or []),
            dict(state.get("overrides") or {}))


def _start_command(data_dir: Path, state: dict) -> str:
    """The ``litemq cluster start`` command that runs the cluster recorded in ``state`` again:
    the same nodes, ports, HTTP ports and overrides, on the kept data."""
    n, base, http_base, racks, overrides = _recorded_start(state)
    args = ["litemq", "cluster", "start", "-n", str(n), "--base-port", str(base), "--data-dir", str(data_dir)]
    if http_base != DEFAULT_HTTP_PORT:
        args += ["--http-base-port", str(http_base)]
    if racks:
        args += ["--racks", ",".join(racks)]
    for k, v in overrides.items():
        args += ["-o", f"{k}={v}"]
    return shlex.join(args)


def _stopped(state: dict) -> bool:
    """True when ``cluster stop`` stopped the recorded cluster, or none of its brokers runs."""
    return "stopped_at" in state or not any(_is_our_broker(nd["pid"]) for nd in state.get("nodes", []))


def _write_state(data_dir: Path, state: dict) -> None:
    path = data_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def _terminate(pids: list[int], timeout_s: float) -> list[int]:
    """SIGTERM every pid that is one of our brokers, wait up to ``timeout_s`` seconds for all of
    them to end; returns the pids still running then."""
    running = [pid for pid in pids if _is_our_broker(pid)]
    for pid in running:
        try:
            os.kill(pid, signal.SIGCONT)  # a paused broker cannot act on SIGTERM
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = [pid for pid in running if _is_our_broker(pid)]
    return running


def _kill(pids: list[int]) -> None:
    for pid in pids:
        if _is_our_broker(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _exited(pid: int) -> bool:
    """True when ``pid``, a broker this command spawned, has exited (and reap it). Asked of the
    kernel with ``waitpid``: reading ``/proc`` once took a starting broker for gone. A pid that
    is not this process's child is judged by :func:`_is_our_broker`."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return not _is_our_broker(pid)
    return done != 0


def _start_failure(nodes: list[dict]) -> str | None:
    """The error of the first of ``nodes`` (``cluster.json`` entries just started) whose process
    exited, with the end of its log; None while all run."""
    for nd in nodes:
        if _exited(nd["pid"]):
            return f"broker {nd['node_id']} exited during start-up; end of {nd['log']}:\n{_log_tail(Path(nd['log']))}"
    return None


def _spawn(nd: dict, rpc_ports: dict[int, int], settings: dict[str, str], rack: str | None) -> int:
    """Start node ``nd`` (a ``cluster.json`` node entry) detached, output appended to its log;
    returns its pid."""
    i = nd["node_id"]
    args = [sys.executable, "-m", "litemq.cli", "serve", "--data-dir", nd["data_dir"],
            "--listen", f"{HOST}:{nd['port']}", *cluster_args(i, rpc_ports, HOST),
            "--http-listen", f"{HOST}:{nd['http_port']}" if nd.get("http_port") else settings.get("http.listen", "off")]
    for k, v in settings.items():
        args += ["-o", f"{k}={v}"]
    if rack:
        args += ["-o", f"broker.rack={rack}"]
    with open(nd["log"], "ab") as log:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # detached: survives this command and Ctrl-C
    return proc.pid


def _restart_exited(data_dir: Path, state: dict, exited: list[dict], timeout_s: float) -> None:
    """Start again the brokers of a running ``cluster start`` cluster that exited (killed,
    crashed), each with the ports, HTTP port, rack and overrides it was started with and its
    kept data, and wait until every recorded broker is live again.

    Raises:
        CliError: a restarted broker exits during start-up, or the cluster is not ready in
            ``timeout_s`` seconds (the restarted brokers are left running then).
    """
    nodes = state["nodes"]
    rpc_ports = {nd["node_id"]: nd["rpc_port"] for nd in nodes}
    racks = (state.get("start") or {}).get("racks") or []
    busy = sorted(p for nd in exited for p in (nd["port"], nd["rpc_port"]) if not port_is_free(p))
    if busy:
        raise CliError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} of the exited "
                       f"broker{'s' if len(exited) > 1 else ''} already in use")
    for nd in exited:
        rack = racks[nd["node_id"] - 1] if len(racks) >= nd["node_id"] else None
        nd["pid"] = _spawn(nd, rpc_ports, state.get("overrides") or {}, rack)
    _write_state(data_dir, state)
    ids = ", ".join(str(nd["node_id"]) for nd in exited)
    console.print(f"started broker{'s' if len(exited) > 1 else ''} {ids} again (the others are running); "
                  f"waiting for the cluster ...")

    def check() -> None:
        message = _start_failure(exited)
        if message is not None:
            raise CliError(message)

    want = {nd["node_id"] for nd in nodes}

    def all_live() -> bool:
        """Each restarted broker answers itself (the metadata may still count the killed
        process live) and knows a metadata leader that counts every recorded broker live."""
        check()
        for nd in exited:
            st = ask_status(HOST, nd["rpc_port"], 2.0)
            live = {b.get("node_id") for b in (st or {}).get("brokers") or [] if b.get("live")}
            if not st or (st.get("metadata") or {}).get("leader_id") is None or not want <= live:
                return False
        return True

    try:
        wait_for(all_live, timeout_s, f"brokers {ids} live again", interval_s=0.2)
    except TimeoutError as exc:
        raise CliError(f"{exc}; see the logs in {data_dir}/node-<id>/broker.log") from None
    console.print(f"cluster ready: its {len(nodes)} brokers live; bootstrap servers: [bold]{state['bootstrap_servers']}[/]")


# ------------------------------------------------------------------ commands
@click.group()
def cluster() -> None:
    """Run a local replicated cluster (start, stop) and show its state (status)."""


_START_SETTINGS = ("n", "base_port", "http_base_port", "racks", "overrides")
"""``cluster start``'s options that say how the brokers run (not given: a recorded cluster's)."""


@cluster.command("start")
@click.option("-n", "--nodes", "n", type=click.IntRange(1, 99), default=3, show_default=True,
              help="Number of brokers (node ids 1..N, all metadata voters). With none of -n, --base-port, "
                   "--http-base-port, --racks and -o, a DIR that holds a cluster starts as recorded.")
@click.option("--base-port", type=click.IntRange(1, 65535 - RPC_PORT_OFFSET - 99), default=9092, show_default=True,
              help=f"Client port of node 1; node i uses BASE+i-1, its RPC port BASE+{RPC_PORT_OFFSET}+i-1.")
@data_dir_option
@click.option("-o", "--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Broker setting for every node, e.g. -o broker.session.timeout.ms=2000 (repeatable).")
@click.option("--http-base-port", type=click.IntRange(0, 65535 - 99), default=DEFAULT_HTTP_PORT, show_default=True,
              help="HTTP port (/metrics, web console, REST API) of node 1; node i uses BASE+i-1; 0 = none.")
@click.option("--racks", default=None, metavar="R1,R2,...",
              help="broker.rack of each node, in node id order (one per node), e.g. --racks a,b,c (KIP-392).")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds to wait for a metadata leader with all brokers live.")
def cluster_start(n, base_port, data_dir, overrides, http_base_port, racks, timeout_s) -> None:
    """Start N brokers in the background and wait until the cluster is ready.

    On a cluster from DIR that is running with some of its brokers exited (killed, crashed),
    the same -n and --base-port start those brokers again, as they were started before. Given
    none of -n, --base-port, --http-base-port, --racks and -o, a DIR that holds a cluster (stopped,
    or running with brokers exited) is started again as it was recorded."""
    data_dir = data_dir.resolve()
    old = _load_state(data_dir) if (data_dir / STATE_FILE).exists() else None
    ctx = click.get_current_context()
    if old is not None and all(ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT
                               for name in _START_SETTINGS):
        n, base_port, http_base_port, rack_list, recorded_overrides = _recorded_start(old)
        racks = ",".join(rack_list) if rack_list else None
        overrides = tuple(f"{k}={v}" for k, v in recorded_overrides.items())
    settings = parse_kv(overrides, "--override")
    rack_list = [r.strip() for r in racks.split(",")] if racks is not None else []
    if racks is not None and (len(rack_list) != n or not all(rack_list)):
        raise CliError(f"--racks: give {n} non-empty rack names, one per node (got {racks!r})")
    if rack_list and "broker.rack" in settings:
        raise CliError("--racks and -o broker.rack exclude each other")
    try:
        for rack in rack_list or [None]:  # a bad -o (or rack) fails here, not in N broker logs
            BrokerConfig.from_sources(overrides={**settings, **({"broker.rack": rack} if rack else {})}).validate()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if old is not None:
        alive = [] if "stopped_at" in old else [nd["pid"] for nd in old.get("nodes", []) if _is_our_broker(nd["pid"])]
        if alive:
            recorded = old.get("start") or {}
            exited = [nd for nd in old.get("nodes", []) if not _is_our_broker(nd["pid"])]
            if exited and (recorded.get("nodes"), recorded.get("base_port")) == (n, base_port):
                _restart_exited(data_dir, old, exited, timeout_s)
                return
            why = (f"its broker{'s' if len(exited) > 1 else ''} {', '.join(str(nd['node_id']) for nd in exited)} "
                   f"exited: '{_start_command(data_dir, old)}' starts {'them' if len(exited) > 1 else 'it'} again, "
                   f"or " if exited else "")
            raise CliError(f"a cluster from {data_dir} is running (pids {', '.join(map(str, alive))}); "
                           f"{why}'litemq cluster stop --data-dir {data_dir}' first")
    ids = range(1, n + 1)
    ports = {i: base_port + i - 1 for i in ids}
    rpc_ports = {i: base_port + RPC_PORT_OFFSET + i - 1 for i in ids}
    http_ports = {i: http_base_port + i - 1 for i in ids} if http_base_port and "http.listen" not in settings else {}
    busy = sorted(p for p in [*ports.values(), *rpc_ports.values()] if not port_is_free(p))
    if busy:
        raise CliError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} already in use; "
                       f"choose another --base-port")
    busy = sorted(p for p in http_ports.values() if not port_is_free(p))
    if busy:
        message = (f"HTTP port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} already in use; "
                   f"choose another --http-base-port (0 = no HTTP port)")
        if click.get_current_context().get_parameter_source("http_base_port") != click.core.ParameterSource.DEFAULT:
            raise CliError(message)
        console.print(f"[yellow]warning:[/] {message}; starting without HTTP ports", highlight=False)
        http_ports = {}
    data_dir.mkdir(parents=True, exist_ok=True)
    nodes = []
    for i in ids:
        node_dir = data_dir / f"node-{i}"
        node_dir.mkdir(exist_ok=True)
        nd = {"node_id": i, "pid": None, "host": HOST, "port": ports[i], "rpc_port": rpc_ports[i],
              "http_port": http_ports.get(i), "data_dir": str(node_dir), "log": str(node_dir / "broker.log")}
        nd["pid"] = _spawn(nd, rpc_ports, settings, rack_list[i - 1] if rack_list else None)
        nodes.append(nd)
    bootstrap = ",".join(f"{HOST}:{ports[i]}" for i in ids)
    _write_state(data_dir, {"nodes": nodes, "bootstrap_servers": bootstrap, "overrides": settings,
                            "start": {"nodes": n, "base_port": base_port, "http_base_port": http_base_port,
                                      "racks": rack_list},
                            "started_at": time.time()})
    console.print(f"started {n} broker{'s' if n > 1 else ''} (logs in {data_dir}/node-<id>/broker.log); "
                  f"waiting for the cluster ...")

    def check() -> None:
        message = _start_failure(nodes)
        if message is not None:
            _fail(message)

    def _fail(message: str) -> None:
        pids = [nd["pid"] for nd in nodes]
        _kill(_terminate(pids, 10.0))
        (data_dir / STATE_FILE).unlink(missing_ok=True)
        raise CliError(message)

    try:
        view = wait_cluster_ready(lambda: {nd["node_id"]: (HOST, nd["rpc_port"]) for nd in nodes}, n, timeout_s,
                                  check)
    except TimeoutError as exc:
        _fail(f"{exc}; brokers stopped, see the logs in {data_dir}/node-<id>/broker.log")
    leader = (view.get("metadata") or {}).get("leader_id")
    console.print(f"cluster ready: {n} live broker{'s' if n > 1 else ''}, metadata leader {leader}")
    console.print(f"bootstrap servers: [bold]{bootstrap}[/]")
    console.print(f"  export LITEMQ_BOOTSTRAP_SERVER={bootstrap}", highlight=False)
    if http_ports:
        console.print(f"web console: http://{HOST}:{http_ports[1]}/console/ (metrics: "
                      + ", ".join(f"http://{HOST}:{p}/metrics" for p in http_ports.values()) + ")", highlight=False)


@cluster.command("stop")
@data_dir_option
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True,
              help="Seconds to wait for a clean shutdown before SIGKILL.")
def cluster_stop(data_dir, timeout_s) -> None:
    """Stop the brokers started by 'litemq cluster start' (SIGTERM, then wait); the data is kept."""
    data_dir = data_dir.resolve()
    state = _load_state(data_dir)
    if "stopped_at" in state:
        console.print(f"the cluster in {data_dir} is already stopped (data kept); start it again with: "
                      f"{_start_command(data_dir, state)}", highlight=False, soft_wrap=True)
        return
    pids = [nd["pid"] for nd in state.get("nodes", [])]
    running = [pid for pid in pids if _is_our_broker(pid)]
    left = _terminate(running, timeout_s)
    if left:
        _kill(left)
        console.print(f"[yellow]warning:[/] pid{'s' if len(left) > 1 else ''} {', '.join(map(str, left))} "
                      f"did not stop within {timeout_s:g}s and {'were' if len(left) > 1 else 'was'} killed")
    _write_state(data_dir, {**state, "stopped_at": time.time()})
    console.print(f"stopped {len(running)} broker{'s' if len(running) != 1 else ''} (data kept in {data_dir}); "
                  f"start again with: {_start_command(data_dir, state)}", highlight=False, soft_wrap=True)


@cluster.command("status")
@data_dir_option
@click.option("-a", "--all", "show_internal", is_flag=True, help="Include internal topics (__consumer_offsets).")
@click.option("--timeout", "timeout_s", type=float, default=2.0, show_default=True,
              help="Seconds to wait for each broker's answer.")
def cluster_status(data_dir, show_internal, timeout_s) -> None:
    """Brokers, metadata leader and per-partition leaders, offsets and replica lag."""
    data_dir = data_dir.resolve()
    state = _load_state(data_dir)
    if _stopped(state):
        how = "is stopped" if "stopped_at" in state else "is not running (its brokers exited)"
        raise CliError(f"the cluster in {data_dir} {how}; data kept; start it again with: "
                       f"{_start_command(data_dir, state)}")
    nodes = {nd["node_id"]: nd for nd in state.get("nodes", [])}
    statuses = {nid: ask_status(nd["host"], nd["rpc_port"], timeout_s) for nid, nd in sorted(nodes.items())}
    answered = {nid: st for nid, st in statuses.items() if st is not None}
    if not answered:
        addrs = ", ".join(f"{HOST}:{nd['rpc_port']}" for nd in nodes.values())
        raise CliError(f"no broker of the cluster in {data_dir} answers on its RPC port ({addrs})")
    # the metadata leader's view of brokers is authoritative; otherwise the highest term's
    by_term = sorted(answered.values(), key=lambda st: (st.get("metadata") or {}).get("term", -1), reverse=True)
    md = by_term[0].get("metadata") or {}
    view = answered.get(md.get("leader_id")) or by_term[0]
    md = view.get("metadata") or md
    # Brokers that joined later (``litemq serve --join``) are not in the state file: the
    # metadata names them with their RPC address, and their replicas lead and lag too.
    for b in view.get("brokers") or []:
        nid, rpc = b.get("node_id"), b.get("rpc")
        if nid in statuses or not rpc or not b.get("live"):
            continue
        statuses[nid] = ask_status(rpc[0], int(rpc[1]), timeout_s)
        if statuses[nid] is not None:
            answered[nid] = statuses[nid]
    _print_brokers(nodes, statuses, view)
    leader = md.get("leader_id")
    console.print(f"metadata: leader [bold]{leader if leader is not None else 'none'}[/], term {md.get('term')}, "
                  f"commit index {md.get('commit_index')}, voters {_ids(md.get('voters') or [])}"
                  + (f", cluster id {view['cluster_id']}" if view.get("cluster_id") else ""))
    _print_partitions(answered, show_internal, view.get("assignments") or {})


def _ids(ids) -> str:
    return ",".join(map(str, ids)) or "-"


def _print_brokers(nodes: dict[int, dict], statuses: dict[int, dict | None], view: dict) -> None:
    known = {b.get("node_id"): b for b in view.get("brokers") or []}
    table = make_table("ID", "ADDRESS", "RACK", "RPC", "PID", "PROCESS", "LIVE", "DIRECTORY ID", title="brokers",
                       title_justify="left")
    for nid in sorted(set(nodes) | set(known)):
        nd, b = nodes.get(nid, {}), known.get(nid)
        address = f"{b['host']}:{b['port']}" if b else f"{nd.get('host')}:{nd.get('port')}"
        if nd:
            process = "running" if _is_our_broker(nd["pid"]) else "[red]exited[/]"
            if statuses.get(nid) is None and process == "running":
                process = "[yellow]not answering[/]"
        elif nid in statuses:  # joined later, not started by 'cluster start'
            process = "answering" if statuses[nid] is not None else "[yellow]not answering[/]"
        else:
            process = "-"
        st = statuses.get(nid) or {}
        if st.get("replaced_disk") or (st.get("metadata") or {}).get("recovering"):
            process += " [yellow](replaced disk: recovering)[/]"  # no vote until caught up (issue 20)
        live = "[green]yes[/]" if b and b.get("live") else "[red]no[/]"
        # the directory.id of the broker's data dir (meta.properties), as it registered it
        directory_id = (b or {}).get("directory_id") or (statuses.get(nid) or {}).get("directory_id") or "-"
        rack = (b or {}).get("rack") or "-"  # broker.rack as the broker registered it
        rpc = f"{HOST}:{nd['rpc_port']}" if nd else ("{}:{}".format(*b["rpc"]) if b and b.get("rpc") else "-")
        table.add_row(str(nid), address, rack, rpc, str(nd.get("pid", "-")),
                      process, live, directory_id)
    console.print(table)


def _print_partitions(statuses: dict[int, dict], show_internal: bool, assignments: dict[str, list]) -> None:
    """One row per partition the answering brokers host or the metadata's ``assignments``
    (topic -> replicas per partition) name: one that no answering broker hosts (its replicas
    all down) is shown without a leader, with its replicas."""
    leaders = claimed_leaders(statuses.values())
    seen: dict[tuple[str, int], dict] = {}
    for st in statuses.values():
        for p in st.get("partitions") or []:
            key = (p["topic"], int(p["partition"]))
            if key not in seen or p.get("leader_epoch", -1) > seen[key].get("leader_epoch", -1):
                seen[key] = p
    for topic, replicas in assignments.items():
        for index, ids in enumerate(replicas):
            seen.setdefault((topic, index), {"replicas": ids})
    keys = sorted(k for k in seen if show_internal or not k[0].startswith("__"))
    if not keys:
        console.print("no partitions" + ("" if show_internal else " (internal topics hidden; -a shows them)"))
        return
    table = make_table("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "HW", "LEO", "MAX LAG",
                  title="partitions", title_justify="left")
    for key in keys:
        entry = leaders.get(key)
        if entry is None:
            p = seen[key]
            table.add_row(key[0], str(key[1]), "[red]none[/]", str(p.get("leader_epoch", "-")),
                          _ids(p.get("replicas") or []), "-", "-", "-")
            continue
        lag = {int(k): v for k, v in (entry.get("lag") or {}).items()}
        if lag:
            worst = max(lag, key=lambda r: lag[r])
            max_lag = f"{lag[worst]} (node {worst})" if lag[worst] else "0"
        else:
            max_lag = "0"
        table.add_row(key[0], str(key[1]), str(entry["leader_id"]), str(entry.get("leader_epoch", "-")),
                      _ids(entry.get("replicas") or []), str(entry.get("high_watermark", "-")),
                      str(entry.get("log_end_offset", "-")), max_lag)
    console.print(table)


# ------------------------------------------------------------------ metadata quorum (Kafka wire)
DESCRIBE_QUORUM, UNREGISTER_BROKER, DESCRIBE_CLUSTER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 64, 60, 80, 81
NOT_LEADER_OR_FOLLOWER = 6
QUORUM_REQUEST = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def _describe_quorum(bootstrap: str, timeout_s: float):
    """``(DescribeQuorum v2 answer, DescribeCluster v0 answer)`` from the metadata leader, found
    through ``bootstrap``: a broker that is not the leader answers NOT_LEADER_OR_FOLLOWER with the
    leader it knows, whose address DescribeCluster gives; retried until ``timeout_s``.

    Raises:
        CliError: an error answer (e.g. CLUSTER_AUTHORIZATION_FAILED), no leader in time.
    """
    from litemq.cli.config_commands import _wire, ask
    from litemq.protocol.errors import ErrorCode

    deadline = time.monotonic() + timeout_s
    target, why = bootstrap, "no answer"
    while True:
        try:
            with _wire(target) as w:
                cluster = ask(w, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
                resp = ask(w, DESCRIBE_QUORUM, 2, QUORUM_REQUEST)
        except CliError:
            if target == bootstrap or time.monotonic() >= deadline:
                raise
            target = bootstrap  # the leader named does not answer (paused, just died): ask again
            continue
        if resp.error_code:
            raise CliError(f"DescribeQuorum failed: {ErrorCode(resp.error_code).name}: {resp.error_message or ''}")
        part = resp.topics[0].partitions[0]
        if part.error_code == 0:
            return resp, cluster
        if part.error_code != NOT_LEADER_OR_FOLLOWER:
            raise CliError(f"DescribeQuorum failed: {ErrorCode(part.error_code).name}")
        addrs = {b.broker_id: f"{b.host}:{b.port}" for b in cluster.brokers}
        why = f"metadata leader {part.leader_id} not found" if part.leader_id >= 0 else "no metadata leader"
        if time.monotonic() >= deadline:
            raise CliError(f"DescribeQuorum: {why} within {timeout_s:g}s")
        if part.leader_id in addrs:
            target = addrs[part.leader_id]
        else:
            target = bootstrap
            time.sleep(0.2)


def _kafka_uuid(u) -> str:
    """A UUID as Kafka prints one (``Uuid.toString``: 22 URL-safe base64 characters)."""
    return directory_id_text(u) or "AAAAAAAAAAAAAAAAAAAAAA"


def _lag_ms(rows, now_ms: int) -> int:
    caught = [r.last_caught_up_timestamp for r in rows]
    return 0 if not caught else max(0, now_ms - min(caught)) if min(caught) >= 0 else -1


@cluster.command("describe-quorum")
@bootstrap_option
@click.option("--replication", is_flag=True, help="Each voter's and observer's log end offset, lag and timestamps "
              "(kafka-metadata-quorum.sh describe --replication) instead of the summary (--status).")
@click.option("--status", is_flag=True, help="The summary (the default).")
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True,
              help="Seconds to find the metadata leader.")
def cluster_describe_quorum(bootstrap, replication, status, timeout_s) -> None:
    """The __cluster_metadata Raft quorum (DescribeQuorum, KIP-595), as kafka-metadata-quorum.sh describe."""
    resp, cl = _describe_quorum(bootstrap, timeout_s)
    part = resp.topics[0].partitions[0]
    leader_end = next((v.log_end_offset for v in part.current_voters if v.replica_id == part.leader_id), -1)
    if replication:
        table = make_table("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                           "LastCaughtUpTimestamp", "Status")
        for kind, rows in (("Follower", part.current_voters), ("Observer", part.observers)):
            for r in rows:
                role = "Leader" if r.replica_id == part.leader_id else kind
                lag = max(0, leader_end - r.log_end_offset) if r.log_end_offset >= 0 else -1
                table.add_row(str(r.replica_id), _kafka_uuid(r.replica_directory_id), str(r.log_end_offset), str(lag),
                              str(r.last_fetch_timestamp), str(r.last_caught_up_timestamp), role)
        console.print(table)
        return
    now_ms = int(time.time() * 1000)
    followers = [v for v in part.current_voters if v.replica_id != part.leader_id]
    ends = [v.log_end_offset for v in followers if v.log_end_offset >= 0]
    listeners = {n.node_id: [f"{ep.name}://{ep.host}:{ep.port}" for ep in n.listeners] for n in resp.nodes}

    def replicas(rows) -> str:
        return json.dumps([{"id": r.replica_id, "directoryId": _kafka_uuid(r.replica_directory_id),
                            **({"endpoints": listeners[r.replica_id]} if r.replica_id in listeners else {})}
                           for r in rows])
    for key, value in (("ClusterId", cl.cluster_id), ("LeaderId", part.leader_id), ("LeaderEpoch", part.leader_epoch),
                       ("HighWatermark", part.high_watermark),
                       ("MaxFollowerLag", max((leader_end - e for e in ends), default=0)),
                       ("MaxFollowerLagTimeMs", _lag_ms(followers, now_ms)),
                       ("CurrentVoters", replicas(part.current_voters)),
                       ("CurrentObservers", replicas(part.observers))):
        click.echo(f"{key + ':':<24}{value}")


@cluster.command("unregister")
@bootstrap_option
@click.argument("broker_id", type=int)
def cluster_unregister(bootstrap, broker_id) -> None:
    """Remove broker BROKER_ID's registration (UnregisterBroker, KIP-631), as
    kafka-cluster.sh unregister --id; a broker still running stays out until it restarts."""
    unregister_broker(bootstrap, broker_id)
    click.echo(f"Broker {broker_id} is no longer registered.")


def unregister_broker(bootstrap: str, broker_id: int) -> None:
    """UnregisterBroker v0 (KIP-631) for ``broker_id`` through ``bootstrap``.

    Raises:
        CliError: an error answer (e.g. BROKER_ID_NOT_REGISTERED, CLUSTER_AUTHORIZATION_FAILED).
    """
    from litemq.cli.config_commands import _wire, ask
    from litemq.protocol.errors import ErrorCode

    with _wire(bootstrap) as w:
        resp = ask(w, UNREGISTER_BROKER, 0, {"broker_id": broker_id})
    if resp.error_code:
        raise CliError(f"unregistering broker {broker_id} failed: {ErrorCode(resp.error_code).name}: "
                       f"{resp.error_message or ''}")


def _directory_option(f):
    return click.option("--controller-directory-id", "directory_id", default=None, metavar="ID",
                         help="Its directory.id (meta.properties; 22-character Kafka Uuid text or a UUID); by default "
                              "the one DescribeQuorum shows for it.")(f)


def _parse_directory_id(text: str) -> uuid.UUID:
    """``--controller-directory-id``: Kafka's 22-character Uuid text or a UUID. Raises CliError."""
    parsed = directory_uuid(text.strip())
    if parsed.int == 0:
        raise CliError(f"--controller-directory-id: {text!r} is not a directory id (22 base64 characters as "
                       "'litemq cluster describe-quorum' prints it, or a UUID)")
    return parsed


def _quorum_directory_id(bootstrap: str, node_id: int) -> uuid.UUID:
    """Node ``node_id``'s directory id as DescribeQuorum shows it among the voters and observers
    (a voter named to add-controller, or an observer to remove-controller, is sent on: the
    broker's DUPLICATE_VOTER or VOTER_NOT_FOUND says why, as Kafka's).

    Raises:
        CliError: the node is neither, its directory id is unknown, DescribeQuorum failed.
    """
    part = _describe_quorum(bootstrap, 10.0)[0].topics[0].partitions[0]
    for rows in (part.current_voters, part.observers):
        for row in rows:
            if row.replica_id == node_id:
                if row.replica_directory_id.int == 0:
                    raise CliError(f"node {node_id}'s directory id is unknown; give --controller-directory-id")
                return row.replica_directory_id
    raise CliError(f"node {node_id} is neither a voter nor an observer of the metadata quorum (voters: "
                   f"{_ids(v.replica_id for v in part.current_voters)}, observers: "
                   f"{_ids(o.replica_id for o in part.observers)})")


def _voter_request(bootstrap: str, api_key: int, body: dict, wait_s: float):
    """One AddRaftVoter / RemoveRaftVoter v0 through ``bootstrap``, waiting ``wait_s`` seconds
    for the answer; the response. Raises CliError (unreachable, authentication)."""
    from litemq.cli.config_commands import _wire

    with _wire(bootstrap) as w:
        w.sock.settimeout(wait_s)
        try:
            return w.request(api_key, 0, body, client_id="litemq-cli")
        except TimeoutError:
            raise CliError(f"no answer from {w.address} within {wait_s:g}s") from None
        except ConnectionError as exc:
            raise CliError(f"the broker at {w.address} closed the connection ({exc})") from None


def _voter_failed(what: str, resp) -> CliError:
    from litemq.protocol.errors import ErrorCode

    try:
        name = ErrorCode(resp.error_code).name
    except ValueError:
        name = f"error {resp.error_code}"
    return CliError(f"{what} failed: {name}: {resp.error_message or ''}".rstrip(": "))


@cluster.command("add-controller")
@bootstrap_option
@click.option("--controller-id", "node_id", type=click.IntRange(0), required=True,
              help="Node id of the broker to make a metadata voter (it runs, joined with --join, as an observer).")
@_directory_option
@click.option("--timeout-ms", type=click.IntRange(1, VOTER_CHANGE_MAX_TIMEOUT_MS), default=VOTER_CHANGE_TIMEOUT_MS,
              show_default=True, help="How long the metadata leader may take to catch it up and promote it.")
def cluster_add_controller(bootstrap, node_id, directory_id, timeout_ms) -> None:
    """Make broker --controller-id a voter of the metadata quorum (AddRaftVoter, KIP-853), as
    kafka-metadata-quorum.sh add-controller: it joins as a learner and votes once caught up."""
    directory = (_parse_directory_id(directory_id) if directory_id is not None
                 else _quorum_directory_id(bootstrap, node_id))
    resp = _voter_request(bootstrap, ADD_RAFT_VOTER, {"cluster_id": None, "timeout_ms": timeout_ms,
                                                      "voter_id": node_id, "voter_directory_id": directory,
                                                      "listeners": []}, timeout_ms / 1000 + CLIENT_TIMEOUT_S)
    if resp.error_code:
        raise _voter_failed(f"adding controller {node_id}", resp)
    click.echo(f"Added controller {node_id} with directory id {_kafka_uuid(directory)}")


@cluster.command("remove-controller")
@bootstrap_option
@click.option("--controller-id", "node_id", type=click.IntRange(0), required=True,
              help="Node id of the metadata voter to remove (it goes on as an observer while it runs).")
@_directory_option
def cluster_remove_controller(bootstrap, node_id, directory_id) -> None:
    """Remove voter --controller-id from the metadata quorum (RemoveRaftVoter, KIP-853), as
    kafka-metadata-quorum.sh remove-controller."""
    directory = (_parse_directory_id(directory_id) if directory_id is not None
                 else _quorum_directory_id(bootstrap, node_id))
    resp = _voter_request(bootstrap, REMOVE_RAFT_VOTER, {"cluster_id": None, "voter_id": node_id,
                                                         "voter_directory_id": directory},
                          VOTER_CHANGE_TIMEOUT_MS / 1000 + CLIENT_TIMEOUT_S)
    if resp.error_code:
        raise _voter_failed(f"removing controller {node_id}", resp)
    click.echo(f"Removed controller {node_id} with directory id {_kafka_uuid(directory)}")


def register(main: click.Group) -> None:
    main.add_command(cluster, "cluster")
