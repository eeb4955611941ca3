"""A local replicated LiteMQ cluster of real broker processes, for tests and tools.

``LocalCluster`` runs ``n`` :class:`~litemq.testing.process.BrokerProcess` children with node
ids ``1..n`` on loopback, every one a metadata voter (``--peers``), and offers the faults the
fault tests need (SIGKILL, SIGSTOP/SIGCONT, restart) plus questions answered by the brokers'
``status`` RPC: is there a metadata leader, which node leads a partition. More brokers join the
running cluster as KRaft observers (``--join``, Kafka's ``controller.quorum.bootstrap.servers``)
with :meth:`LocalCluster.add_broker`.

The module-level helpers (:func:`cluster_args`, :func:`join_args`, :func:`ask_status`,
:func:`wait_cluster_ready`, :func:`claimed_leaders`) are shared with ``litemq cluster start|status``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from litemq.testing.process import HARNESS_OVERRIDES, BrokerProcess, claim_ports, distinct_free_port, worker_port_range

HOST = "127.0.0.1"
STATUS_TIMEOUT_S = 1.0
"""How long one ``status`` RPC may take before that node counts as not answering (seconds)."""
POLL_INTERVAL_S = 0.1


def wait_for(pred: Callable[[], object], timeout_s: float, what: str | Callable[[], str],
             interval_s: float = POLL_INTERVAL_S):
    """Call ``pred`` every ``interval_s`` seconds until it returns something true; return that.

    Raises:
        TimeoutError: still false after ``timeout_s`` seconds; the message is ``what`` (or what
            ``what()`` returns then) followed by the timeout.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what() if callable(what) else what} (waited {timeout_s}s)")
        time.sleep(interval_s)


def peers_arg(rpc_ports: dict[int, int], host: str = HOST) -> str:
    """The ``--peers`` value: ``1@host:rpc1,2@host:rpc2,...`` in node id order."""
    return ",".join(f"{nid}@{host}:{rpc_ports[nid]}" for nid in sorted(rpc_ports))


def cluster_args(node_id: int, rpc_ports: dict[int, int], host: str = HOST) -> list[str]:
    """The cluster options of ``litemq serve`` for node ``node_id`` (every node a voter)."""
    return ["--node-id", str(node_id), "--rpc-listen", f"{host}:{rpc_ports[node_id]}",
            "--peers", peers_arg(rpc_ports, host)]


def join_args(node_id: int, rpc_port: int, join_rpc_ports: Iterable[int], host: str = HOST) -> list[str]:
    """The cluster options of ``litemq serve`` for broker ``node_id`` joining a running cluster as
    an observer: ``--join host:port,...`` (Kafka's ``controller.quorum.bootstrap.servers``) names
    the RPC ports ``join_rpc_ports`` of running brokers, in the order given; no ``--peers``."""
    return ["--node-id", str(node_id), "--rpc-listen", f"{host}:{rpc_port}",
            "--join", ",".join(f"{host}:{p}" for p in join_rpc_ports)]


def free_base_port(n: int, rpc_offset: int = 100, lo: int = 15000, hi: int = 32000) -> int:
    """A base port B with B..B+n-1 and B+rpc_offset..B+rpc_offset+n-1 all free a moment ago
    (looked for below Linux's usual ephemeral range, 32768 up, which outgoing connections use;
    in a parallel test run, in this worker's :func:`worker_port_range`).

    Raises:
        RuntimeError: no such block found after 200 tries.
    """
    import random

    lo, hi = worker_port_range() or (lo, hi)
    for _ in range(200):
        base = random.randrange(lo, hi - rpc_offset - n)
        if claim_ports([base + i for i in range(n)] + [base + rpc_offset + i for i in range(n)]):
            return base
    raise RuntimeError(f"no block of {n} free ports (+{rpc_offset}) found in {lo}..{hi}")


def ask_status(host: str, rpc_port: int, timeout_s: float = STATUS_TIMEOUT_S, ssl_context=None) -> dict | None:
    """The ``status`` RPC answer of the broker at ``host:rpc_port``, or None when it does not
    answer within ``timeout_s`` seconds (down, paused, still starting, or a malformed answer).
    ``ssl_context``: an ``ssl.SSLContext`` when the RPC port runs inter-broker TLS."""
    from litemq.cluster.codec import rpc_call

    try:
        answer = rpc_call(host, rpc_port, {"op": "status"}, timeout_s=timeout_s, ssl_context=ssl_context)
    except Exception:  # noqa: BLE001 - any failure means "no answer from that node"
        return None
    return answer if isinstance(answer, dict) else None


def ready_view(statuses: Iterable[dict], n: int) -> dict | None:
    """The first status in ``statuses`` that names a metadata leader and ``n`` live brokers."""
    for st in statuses:
        md = st.get("metadata") or {}
        live = [b for b in st.get("brokers") or [] if b.get("live")]
        if md.get("leader_id") is not None and len(live) >= n:
            return st
    return None


def wait_cluster_ready(rpc_addrs: Callable[[], dict[int, tuple[str, int]]], n: int, timeout_s: float = 30.0,
                       check: Callable[[], None] | None = None, ssl_context=None) -> dict:
    """Poll ``status`` until some node reports a metadata leader and ``n`` live brokers.

    Args:
        rpc_addrs: returns node id -> (host, rpc port) of the nodes worth asking now.
        n: live brokers required.
        timeout_s: seconds to wait.
        check: called every round; may raise to give up early (e.g. a process exited).
        ssl_context: an ``ssl.SSLContext`` when the RPC ports run inter-broker TLS.
    Returns:
        the status answer that showed readiness.
    Raises:
        TimeoutError: not ready within ``timeout_s`` (the message says what was last seen).
    """
    last: dict[int, dict | None] = {}

    def ready():
        nonlocal last
        if check is not None:
            check()
        last = {nid: ask_status(h, p, ssl_context=ssl_context) for nid, (h, p) in rpc_addrs().items()}
        return ready_view((st for st in last.values() if st), n)

    return wait_for(ready, timeout_s, lambda: f"cluster not ready (want a metadata leader and {n} live brokers); "
                                              f"last status per node: {_summary(last)}")


def _summary(statuses: dict[int, dict | None]) -> str:
    parts = []
    for nid, st in sorted(statuses.items()):
        if st is None:
            parts.append(f"{nid}: no answer")
            continue
        md = st.get("metadata") or {}
        live = sorted(b.get("node_id") for b in st.get("brokers") or [] if b.get("live"))
        parts.append(f"{nid}: metadata leader {md.get('leader_id')} term {md.get('term')}, live brokers {live}")
    return "; ".join(parts) or "no node to ask"


def claimed_leaders(statuses: Iterable[dict]) -> dict[tuple[str, int], dict]:
    """Per (topic, partition), the status entry of the node claiming leadership with the
    highest ``leader_epoch`` (a deposed leader that has not noticed yet has a lower one);
    ``entry["leader_id"]`` is set to the claiming node. Partitions nobody leads are absent."""
    best: dict[tuple[str, int], dict] = {}
    for st in statuses:
        nid = st.get("node_id")
        for p in st.get("partitions") or []:
            if p.get("role") != "leader":
                continue
            key = (p["topic"], int(p["partition"]))
            cur = best.get(key)
            if cur is None or p.get("leader_epoch", -1) > cur.get("leader_epoch", -1):
                best[key] = dict(p, leader_id=nid)
    return best


class LocalCluster:
    """``n`` ``litemq serve`` processes forming one replicated cluster on 127.0.0.1.

    Args:
        base_dir: parent of the data dirs ``base_dir/node-<id>`` (each broker's stdout and
            stderr go to ``base_dir/node-<id>/broker.log``).
        n: number of brokers (node ids 1..n, all metadata voters).
        overrides: broker settings by Kafka name, given to every broker
            (``{"broker.session.timeout.ms": "2000"}``) over
            :data:`litemq.testing.process.HARNESS_OVERRIDES`.
        base_port: 0 = free ports picked once; otherwise node i listens for clients on
            ``base_port + i - 1`` and for RPC on ``base_port + 100 + i - 1``.
        listeners: listener names, e.g. ``{"PLAINTEXT": 0, "SSL": 0}`` (ports must be 0: each
            node gets free ones, see :meth:`bootstrap`); replaces the one PLAINTEXT listener.
            TLS listeners need ``ssl.*`` in ``overrides``; with
            ``security.inter.broker.protocol=SSL`` the RPC ports run mutual TLS and this harness
            asks ``status`` with the brokers' keystore (``rpc_ssl``).
        http: give every broker an HTTP port (``/metrics``, console, REST API) on a free
            loopback port (:meth:`http_url`); off otherwise.
        node_overrides: node id -> settings for that broker only, over ``overrides``
            (``{1: {"broker.rack": "a"}, 2: {"broker.rack": "b"}}``).

    Ports and data dirs are kept across restarts. Use as a context manager or call
    :meth:`start` and :meth:`stop`. :meth:`add_broker` adds brokers to the running cluster
    (``n`` counts them too).
    """

    def __init__(self, base_dir: str | Path, n: int = 3, overrides: dict[str, str] | None = None,
                 base_port: int = 0, listeners: dict[str, int] | None = None, http: bool = False,
                 node_overrides: dict[int, dict[str, str]] | None = None) -> None:
        from litemq.config import BrokerConfig
        from litemq.security.tls import rpc_client_context

        if n < 1:
            raise ValueError(f"a cluster needs at least one broker, not {n}")
        if listeners and any(listeners.values()):
            raise ValueError("LocalCluster listeners take port 0 (each node gets free ports)")
        self.base_dir = Path(base_dir)
        self.n = n
        self._overrides = dict(overrides or {})
        self._listener_names = [name.upper() for name in listeners] if listeners else None
        self._http = http
        self._joined: set[int] = set()
        """Ids of the brokers started by :meth:`add_broker` (they run with ``--join``)."""
        ids = range(1, n + 1)
        if base_port:
            client_ports = {i: base_port + i - 1 for i in ids}
            self.rpc_ports = {i: base_port + 100 + i - 1 for i in ids}
        else:
            taken: set[int] = set()
            client_ports = {i: distinct_free_port(taken) for i in ids}
            self.rpc_ports = {i: distinct_free_port(taken) for i in ids}
        node_listeners = {i: None for i in ids}
        if listeners:
            taken = set(client_ports.values()) | set(self.rpc_ports.values())
            for i in ids:
                names = [name.upper() for name in listeners]
                node_listeners[i] = {name: client_ports[i] if k == 0 else distinct_free_port(taken)
                                     for k, name in enumerate(names)}
        self.brokers: dict[int, BrokerProcess] = {
            i: BrokerProcess(self.base_dir / f"node-{i}", port=client_ports[i],
                             overrides={**(overrides or {}), **(node_overrides or {}).get(i, {})},
                             log_path=self.base_dir / f"node-{i}" / "broker.log",
                             extra_args=cluster_args(i, self.rpc_ports), listeners=node_listeners[i],
                             http_port=0 if http else None)
            for i in ids
        }
        harness_config = BrokerConfig.from_sources(overrides={**HARNESS_OVERRIDES, **(overrides or {})})
        self.rpc_ssl = rpc_client_context(harness_config)
        """The ``ssl.SSLContext`` the harness asks ``status`` with (None without inter-broker TLS)."""
        self._paused: set[int] = set()

    # ------------------------------------------------------------------ processes
    def start(self, timeout_s: float = 30.0) -> "LocalCluster":
        """Start every broker (all at once: none can finish starting without a quorum), then
        :meth:`wait_ready`.

        Raises:
            RuntimeError: a broker did not open its client port within 30 s (its log tail is
                in the message); the started brokers are killed.
            TimeoutError: no metadata leader with ``n`` live brokers within ``timeout_s`` s.
        """
        with ThreadPoolExecutor(self.n) as pool:
            futures = [pool.submit(b.start) for b in self.brokers.values()]
            errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            self.kill_all()
            raise errors[0]
        self.wait_ready(timeout_s)
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        """Clean shutdown (SIGTERM) of every running broker in parallel; a paused one is
        resumed first, one still running after ``timeout_s`` seconds is SIGKILLed."""
        for nid in list(self._paused):
            self.resume(nid)

        def stop_one(b: BrokerProcess) -> None:
            try:
                b.stop(timeout_s=timeout_s)
            except subprocess.TimeoutExpired:
                b.kill()

        running = [b for b in self.brokers.values() if b.proc is not None]
        if running:
            with ThreadPoolExecutor(len(running)) as pool:
                list(pool.map(stop_one, running))

    def kill_all(self) -> None:
        """SIGKILL every broker that runs (paused ones too)."""
        for b in self.brokers.values():
            b.kill()
        self._paused.clear()

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def node(self, node_id: int) -> BrokerProcess:
        """The process of broker ``node_id``. Raises KeyError for an unknown id."""
        return self.brokers[node_id]

    def http_url(self, node_id: int) -> str:
        """``http://127.0.0.1:PORT`` of broker ``node_id``'s HTTP port.

        Raises:
            KeyError: unknown node id. RuntimeError: the cluster was made without ``http=True``.
        """
        return self.node(node_id).http_url

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.brokers)

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's client address, comma-separated (dead ones included)."""
        return ",".join(self.brokers[i].bootstrap_servers for i in self.node_ids)

    def bootstrap(self, listener: str | None = None) -> str:
        """Every broker's address on ``listener`` (the first one when None), comma-separated."""
        return ",".join(self.brokers[i].bootstrap(listener) for i in self.node_ids)

    def live_ids(self) -> list[int]:
        """Ids of brokers whose process runs and is not paused."""
        return [i for i in self.node_ids if self.brokers[i].alive() and i not in self._paused]

    def kill(self, node_id: int) -> None:
        """SIGKILL broker ``node_id`` (no clean shutdown) and reap it."""
        self.node(node_id).kill()
        self._paused.discard(node_id)

    def pause(self, node_id: int) -> None:
        """SIGSTOP broker ``node_id``: it keeps its sockets but answers nothing."""
        self.node(node_id).pause()
        self._paused.add(node_id)

    def resume(self, node_id: int) -> None:
        """SIGCONT broker ``node_id`` after :meth:`pause`."""
        self.node(node_id).resume()
        self._paused.discard(node_id)

    def add_broker(self, node_id: int | None = None, overrides: dict[str, str] | None = None,
                   timeout_s: float = 30.0) -> BrokerProcess:
        """Start one more broker that joins the running cluster without a restart of the others,
        as a KRaft observer: ``--join`` names the RPC ports of the cluster's other brokers
        (:func:`join_args`), there are no ``--peers``. It registers, follows the metadata group
        as a learner and can then host replicas (``litemq partition reassign``); it votes in the
        metadata group only once ``litemq cluster add-controller`` made it a voter (KIP-853).

        It gets its own free client, RPC (and, with ``http=True``, HTTP) ports, the data dir
        ``base_dir/node-<id>`` and the cluster's ``overrides`` (with ``listeners``, the same
        listener names), and counts in :attr:`n`; :meth:`kill`, :meth:`pause`,
        :meth:`restart` (again with ``--join``), :meth:`status`, :meth:`wait_live` and
        :meth:`bootstrap` work for it as for the first ``n``.

        Args:
            node_id: its id (None: one above the highest id of the cluster).
            overrides: settings for this broker only, over the cluster's ``overrides``.
            timeout_s: seconds to wait until the metadata leader reports it live.
        Returns:
            its process.
        Raises:
            ValueError: ``node_id`` is already one of the cluster's brokers.
            RuntimeError: it did not open its ports within 30 s (its log tail is in the message).
            TimeoutError: the metadata leader did not report it live (registered and heartbeating)
                within ``timeout_s`` seconds; its process keeps running (:meth:`stop` ends it).
        """
        node_id = max(self.brokers, default=0) + 1 if node_id is None else node_id
        if node_id in self.brokers:
            raise ValueError(f"broker {node_id} is already one of the cluster's brokers {self.node_ids}")
        taken = set(self.rpc_ports.values())
        for b in self.brokers.values():
            taken |= set(b.ports.values()) | ({b.http_port} if b.http_port else set())
        client_port = distinct_free_port(taken)
        self.rpc_ports[node_id] = distinct_free_port(taken)
        listeners = None
        if self._listener_names:
            listeners = {name: client_port if k == 0 else distinct_free_port(taken)
                         for k, name in enumerate(self._listener_names)}
        proc = BrokerProcess(self.base_dir / f"node-{node_id}", port=client_port,
                             overrides={**self._overrides, **(overrides or {})},
                             log_path=self.base_dir / f"node-{node_id}" / "broker.log",
                             extra_args=self._join_args(node_id), listeners=listeners,
                             http_port=distinct_free_port(taken) if self._http else None)
        try:
            proc.start()
        except RuntimeError:
            del self.rpc_ports[node_id]
            raise
        self.brokers[node_id] = proc
        self._joined.add(node_id)
        self.n = len(self.brokers)
        wait_for(lambda: self._leader_reports_live(node_id), timeout_s,
                 lambda: f"joined broker {node_id} not reported live by the metadata leader; "
                         f"statuses: {_summary(self.statuses())}")
        return proc

    def _join_args(self, node_id: int) -> list[str]:
        """``litemq serve``'s cluster options for joined broker ``node_id``: ``--join`` with the
        RPC ports of every other broker of the harness (some may be down, as in any bootstrap list)."""
        return join_args(node_id, self.rpc_ports[node_id], [self.rpc_ports[i] for i in self.node_ids if i != node_id])

    def _leader_reports_live(self, node_id: int) -> bool:
        """True when the metadata leader's own ``status`` lists ``node_id`` as a live broker."""
        views = self.statuses()
        for st in views.values():
            leader = (st.get("metadata") or {}).get("leader_id")
            view = views.get(leader) if leader is not None else None
            if view is not None and (view.get("metadata") or {}).get("leader_id") == leader:
                return any(b.get("node_id") == node_id and b.get("live") for b in view.get("brokers") or [])
        return False

    def restart(self, node_id: int, timeout_s: float = 30.0) -> BrokerProcess:
        """Start broker ``node_id`` again on its data dir and ports (SIGTERM first if it still
        runs) and wait until the metadata leader reports it live. A broker added with
        :meth:`add_broker` starts with ``--join`` again, naming the other brokers' RPC ports.

        Raises:
            RuntimeError: it did not open its client port within 30 s.
            TimeoutError: not reported live within ``timeout_s`` seconds.
        """
        if node_id in self._paused:
            self.resume(node_id)
        if node_id in self._joined:
            self.node(node_id).extra_args = self._join_args(node_id)
        proc = self.node(node_id).restart()
        self.wait_live(node_id, timeout_s)
        return proc

    # ------------------------------------------------------------------ questions
    def status(self, node_id: int, timeout_s: float = 5.0) -> dict:
        """The ``status`` RPC answer of broker ``node_id`` (see ``litemq.cluster``).

        Raises:
            whatever ``litemq.cluster.codec.rpc_call`` raises when the node does not answer
            within ``timeout_s`` seconds (OSError, TimeoutError, ...).
        """
        from litemq.cluster.codec import rpc_call

        return rpc_call(HOST, self.rpc_ports[node_id], {"op": "status"}, timeout_s=timeout_s, ssl_context=self.rpc_ssl)

    def statuses(self, exclude: Iterable[int] = ()) -> dict[int, dict]:
        """Status answers of the live brokers not in ``exclude`` that answer within 1 s."""
        skip = set(exclude)
        out = {}
        for nid in self.live_ids():
            if nid in skip:
                continue
            st = ask_status(HOST, self.rpc_ports[nid], ssl_context=self.rpc_ssl)
            if st is not None:
                out[nid] = st
        return out

    def wait_ready(self, timeout_s: float = 30.0) -> dict:
        """Wait until some live broker reports a metadata leader and ``n`` live brokers.

        Returns:
            that broker's status answer.
        Raises:
            TimeoutError: not within ``timeout_s`` seconds (the last statuses are in the message).
        """
        return wait_cluster_ready(lambda: {i: (HOST, self.rpc_ports[i]) for i in self.live_ids()},
                                  self.n, timeout_s, ssl_context=self.rpc_ssl)

    def metadata_leader(self, timeout_s: float = 10.0) -> int:
        """Id of the metadata leader (as the live brokers' highest term reports it).

        Raises:
            TimeoutError: no live broker names one within ``timeout_s`` seconds.
        """
        def leader():
            best = None
            for st in self.statuses().values():
                md = st.get("metadata") or {}
                if md.get("leader_id") is not None and (best is None or md.get("term", -1) > best[0]):
                    best = (md.get("term", -1), md["leader_id"])
            return best[1] if best is not None and best[1] in self.live_ids() else None

        return wait_for(leader, timeout_s, lambda: f"no metadata leader among live brokers {self.live_ids()}")

    def wait_live(self, node_id: int, timeout_s: float = 30.0) -> None:
        """Wait until the metadata leader itself reports ``node_id`` live: liveness is the
        leader's soft state, which is what CreateTopics' replica placement counts (another
        broker's view can be older; a restarted broker's own can be from before its kill).

        Raises:
            TimeoutError: not within ``timeout_s`` seconds.
        """
        wait_for(lambda: self._leader_reports_live(node_id), timeout_s,
                 lambda: f"broker {node_id} not reported live by the metadata leader; statuses: "
                         f"{_summary(self.statuses())}")

    def leaders(self, exclude: Iterable[int] = ()) -> dict[tuple[str, int], dict]:
        """Per (topic, partition), the status entry of its current leader as the live brokers
        not in ``exclude`` claim it (highest leader epoch wins; see :func:`claimed_leaders`)."""
        return claimed_leaders(self.statuses(exclude).values())

    def leader_of(self, topic: str, partition: int, timeout_s: float = 10.0) -> int:
        """Id of the live broker leading ``topic``/``partition`` (highest leader epoch claimed).

        Raises:
            TimeoutError: no live broker claims it within ``timeout_s`` seconds.
        """
        entry = wait_for(lambda: self.leaders().get((topic, partition)), timeout_s,
                         lambda: f"no leader of {topic}-{partition} among live brokers {self.live_ids()}")
        return entry["leader_id"]

    def wait_leaders(self, topic: str, num_partitions: int, exclude: Iterable[int] = (),
                     timeout_s: float = 15.0) -> dict[int, int]:
        """Wait until partitions ``0..num_partitions-1`` of ``topic`` each have a leader that is
        live and not in ``exclude``.

        Returns:
            partition -> leader id.
        Raises:
            TimeoutError: not within ``timeout_s`` seconds (the message lists the leaderless ones).
        """
        skip = set(exclude)
        found: dict[int, int] = {}

        def all_led():
            nonlocal found
            leaders = self.leaders(exclude=skip)
            found = {p: leaders[(topic, p)]["leader_id"] for p in range(num_partitions) if (topic, p) in leaders}
            return len(found) == num_partitions

        wait_for(all_led, timeout_s, lambda: f"{topic}: partitions {sorted(set(range(num_partitions)) - set(found))} "
                                             f"have no leader outside {sorted(skip)} (leaders so far: {found})")
        return found

