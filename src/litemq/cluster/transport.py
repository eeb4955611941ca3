"""Broker-to-broker transport: one TCP connection per broker pair, coalesced Raft traffic.

Every broker listens on its RPC address (``--rpc-listen``). For each pair of brokers the one
with the lower node id dials the other and both use that single connection in both
directions; a lost connection is redialled every ``RECONNECT_BACKOFF_MS``. The first frame
on a connection is HELLO (node id, -1 for tools such as ``litemq cluster status``, and cluster
id). A broker whose HELLO names another cluster id than this broker's (a data dir of another
cluster) is refused: the accepting side answers with its own HELLO and closes, and neither side
delivers anything of the link (a broker not knowing its cluster id yet is accepted).

Raft messages of *all* groups bound for the same peer are queued and written as one RAFT
frame at the end of the event-loop turn (``loop.call_soon``), so a burst of produce requests
over many partitions costs one write per peer. Raft tolerates loss, so messages for a peer
that is not connected, or whose socket buffer is full (a paused broker), are dropped rather
than queued without bound.

RPC frames carry JSON requests with a correlation id: metadata proposals forwarded to the
metadata leader, broker heartbeats, and ``status`` for tools. Frame layout:
:mod:`litemq.cluster.codec`.

When the inter-broker security protocol is SSL or SASL_SSL (``security.inter.broker.protocol`` or
``inter.broker.listener.name``), the RPC port runs mutual TLS (:mod:`litemq.security.tls`): both
sides present the broker keystore's certificate and verify the other's against the truststore;
the dialling side also checks the peer's certificate names the host it dialled
(``ssl.endpoint.identification.algorithm=https``, Kafka's default). Tools need a certificate the
truststore accepts too.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Container
from typing import TYPE_CHECKING, Protocol

from litemq import limits
from litemq.cluster.codec import (
    FRAME_HELLO,
    FRAME_RAFT,
    FRAME_RPC_REQUEST,
    FRAME_RPC_RESPONSE,
    CodecError,
    FrameDecoder,
    decode_hello,
    decode_raft_batch,
    decode_rpc,
    encode_frame,
    encode_hello,
    encode_raft_batch,
    encode_rpc,
)

if TYPE_CHECKING:
    from litemq.config import BrokerConfig
    from litemq.raft.messages import Message


class TransportOwner(Protocol):
    """What the transport delivers to and reads from its owner (the
    :class:`~litemq.cluster.manager.ClusterManager`): a Protocol here, so this module does not
    import the manager, which imports it.

    Attributes:
        node_id: this broker's id; voters: the metadata voter ids (peers that may connect);
        loop: the running event loop; config: the broker config (TLS of the RPC port).
    """

    node_id: int
    voters: Container[int]
    loop: asyncio.AbstractEventLoop
    config: "BrokerConfig"

    def on_raft(self, peer_id: int, items: "list[tuple[str, Message]]") -> None:
        """Raft messages from ``peer_id``: (group id, message) pairs, in arrival order."""

    async def on_rpc(self, peer_id: int | None, req: dict) -> dict:
        """Answer one RPC request from ``peer_id`` (exceptions become an error answer)."""

    def on_peer_connected(self, peer_id: int) -> None:
        """A link to ``peer_id`` is up (either side dialled)."""

    def local_cluster_id(self) -> str:
        """The cluster id this broker sends in its HELLO ("" while it does not know it yet)."""

    def on_foreign_cluster(self, peer_id: int, cluster_id: str) -> None:
        """Broker ``peer_id`` names another cluster (``cluster_id``) than this broker's: the
        link was refused (both sides refuse it)."""

log = logging.getLogger(__name__)

RECONNECT_BACKOFF_MS = 200
_KEEPALIVE = encode_frame(FRAME_RAFT, encode_raft_batch([]))
"""An empty RAFT frame, the broker-pair heartbeat (encoded once)."""
CONNECT_TIMEOUT_MS = 1000
TLS_CONNECT_TIMEOUT_MS = 3000
"""Dialling a peer over TLS: TCP connect plus handshake (both sides run a busy event loop)."""


class PeerLink(asyncio.Protocol):
    """One broker-to-broker (or tool) connection."""

    def __init__(self, owner: "Transport", peer_id: int | None = None) -> None:
        self.owner = owner
        self.peer_id = peer_id  # known up front when we dialled; from HELLO when accepted
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.closed = owner.loop.create_future()
        self._hello_seen = False
        self.pending_rpcs: set[int] = set()
        """Correlation ids of our RPCs sent on this link and not answered yet."""

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.peer_id is not None:
            transport.writelines(encode_frame(FRAME_HELLO, [encode_hello(self.owner.node_id,
                                                                         self.owner.manager.local_cluster_id())]))
            self._hello_seen = True
            self.owner._register(self)

    def connection_lost(self, exc) -> None:
        self.owner._unregister(self)
        # Answers to RPCs sent here can no longer arrive: their callers learn it now (and
        # retry elsewhere) instead of at their timeout.
        for cid in self.pending_rpcs:
            fut = self.owner._pending.pop(cid, None)
            if fut is not None and not fut.done():
                fut.set_exception(ConnectionError(f"connection to broker {self.peer_id} lost"))
        self.pending_rpcs.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    def write(self, parts) -> bool:
        t = self.transport
        if t is None or t.is_closing():
            return False
        if t.get_write_buffer_size() > limits.MAX_PEER_WRITE_BUFFER_BYTES:
            return False
        t.writelines(parts)
        return True

    def data_received(self, data: bytes) -> None:
        if self.peer_id is not None:
            self.owner.last_heard[self.peer_id] = self.owner.loop.time()
        try:
            frames = self.decoder.feed(data)
            for kind, body in frames:
                if self.transport is not None and self.transport.is_closing():
                    return  # refused (another cluster's broker): nothing more of it is read
                self._on_frame(kind, body)
        except CodecError as exc:
            log.warning("closing broker connection from %s: %s", self.peer_id, exc)
            if self.transport is not None:
                self.transport.close()

    def _on_frame(self, kind: int, body) -> None:
        owner = self.owner
        if not self._hello_seen:
            if kind != FRAME_HELLO:
                raise CodecError("first frame is not HELLO")
            node_id, cluster_id = decode_hello(body)
            self._hello_seen = True
            self.peer_id = node_id
            if node_id >= 0 and self._foreign(cluster_id):
                # tell the dialler which cluster this is, so it can tell which side is foreign
                self.transport.writelines(encode_frame(FRAME_HELLO, [encode_hello(
                    owner.node_id, owner.manager.local_cluster_id())]))
                self.transport.close()
                return
            if node_id >= 0:
                if node_id not in owner.manager.voters and node_id != owner.node_id:
                    log.info("connection from broker %d, which is not a metadata voter", node_id)
                owner._register(self)
            return
        if kind == FRAME_HELLO:  # the side we dialled refuses us: it belongs to another cluster
            _, cluster_id = decode_hello(body)
            if not self._foreign(cluster_id):
                raise CodecError("a second HELLO on the connection")
            self.transport.close()
        elif kind == FRAME_RAFT:
            if self.peer_id is None or self.peer_id < 0:
                raise CodecError("RAFT frame from a tool connection")
            owner.frames_received += 1
            owner.manager.on_raft(self.peer_id, decode_raft_batch(body))
        elif kind == FRAME_RPC_REQUEST:
            cid, req = decode_rpc(body)
            owner.loop.create_task(self._answer(cid, req))
        elif kind == FRAME_RPC_RESPONSE:
            cid, resp = decode_rpc(body)
            fut = owner._pending.pop(cid, None)
            if fut is not None and not fut.done():
                fut.set_result(resp)
        else:
            raise CodecError(f"unexpected frame kind {kind}")

    def _foreign(self, cluster_id: str) -> bool:
        """True (and the owner told) when the peer's HELLO names another cluster than ours;
        either side not knowing its cluster id yet (a new broker, a tool) is never foreign."""
        own = self.owner.manager.local_cluster_id()
        if not cluster_id or not own or cluster_id == own:
            return False
        self.owner.manager.on_foreign_cluster(self.peer_id, cluster_id)
        return True

    async def _answer(self, cid: int, req: dict) -> None:
        try:
            resp = await self.owner.manager.on_rpc(self.peer_id, req)
        except Exception as exc:  # a bad request must not take the broker down
            log.warning("RPC %r from %s failed: %s", req.get("op"), self.peer_id, exc)
            resp = {"error": 2, "message": str(exc)}
        self.write(encode_frame(FRAME_RPC_RESPONSE, [encode_rpc(cid, resp)]))


class Transport:
    """All connections of one broker to its peers, plus the RPC listener."""

    def __init__(self, manager: TransportOwner, listen_host: str, listen_port: int,
                 peers: dict[int, tuple[str, int]]) -> None:
        self.manager = manager
        self.node_id = manager.node_id
        self.loop = manager.loop
        self.listen_host, self.listen_port = listen_host, listen_port
        self.peers = {n: a for n, a in peers.items() if n != self.node_id}
        self.links: dict[int, PeerLink] = {}
        self._outbox: dict[int, list] = {}
        self._flush_scheduled = False
        self._pending: dict[int, asyncio.Future] = {}
        self._cids = itertools.count(1)
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self.dropped_messages = 0
        self.frames_received = 0
        self.last_heard: dict[int, float] = {}
        """Peer id -> loop time of the last bytes received from it (broker-pair liveness)."""
        from litemq.security.tls import rpc_client_context, rpc_server_context

        self.server_ssl = rpc_server_context(manager.config)
        self.client_ssl = rpc_client_context(manager.config)
        """Mutual TLS contexts when the inter-broker protocol is SSL/SASL_SSL, else None."""

    async def start(self) -> None:
        tls = {} if self.server_ssl is None else {
            "ssl": self.server_ssl, "ssl_handshake_timeout": limits.TLS_HANDSHAKE_TIMEOUT_MS / 1000}
        self._server = await self.loop.create_server(lambda: PeerLink(self), self.listen_host, self.listen_port,
                                                     reuse_address=True, **tls)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        for peer_id in self.peers:
            if self.node_id < peer_id:
                self._tasks.append(self.loop.create_task(self._dial_loop(peer_id)))

    def add_peer(self, peer_id: int, addr: tuple[str, int]) -> None:
        """Learn (or update) the RPC address of broker ``peer_id`` (a broker that joined the
        cluster, from its registration): this broker dials it when its id is the lower one,
        else waits for it to dial. Idempotent; no-op for this broker's own id."""
        if peer_id == self.node_id or self._stopping:
            return
        addr = (str(addr[0]), int(addr[1]))
        known = self.peers.get(peer_id)
        self.peers[peer_id] = addr
        if known is None and self.node_id < peer_id and self._server is not None:
            self._tasks.append(self.loop.create_task(self._dial_loop(peer_id)))
        elif known is not None and known != addr:
            link = self.links.get(peer_id)  # it moved: the dial loop redials the new address
            if link is not None and link.transport is not None and self.node_id < peer_id:
                link.transport.close()
            log.info("broker %d's RPC address is now %s:%d", peer_id, *addr)

    async def stop(self) -> None:
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        if self._server is not None:
            self._server.close()
        for link in list(self.links.values()):
            if link.transport is not None:
                link.transport.close()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("broker stopping"))

    async def _dial_loop(self, peer_id: int) -> None:
        timeout_s = (CONNECT_TIMEOUT_MS if self.client_ssl is None else TLS_CONNECT_TIMEOUT_MS) / 1000
        while not self._stopping:
            host, port = self.peers[peer_id]  # read each time: add_peer may change it
            tls = {} if self.client_ssl is None else {"ssl": self.client_ssl, "server_hostname": host}
            try:
                _, link = await asyncio.wait_for(
                    self.loop.create_connection(lambda: PeerLink(self, peer_id), host, port, **tls), timeout_s)
                await link.closed
            except (OSError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(RECONNECT_BACKOFF_MS / 1000)

    def _register(self, link: PeerLink) -> None:
        old = self.links.get(link.peer_id)
        self.links[link.peer_id] = link
        if old is not None and old is not link and old.transport is not None:
            old.transport.close()
        log.info("connected to broker %d", link.peer_id)
        self.manager.on_peer_connected(link.peer_id)

    def _unregister(self, link: PeerLink) -> None:
        if link.peer_id is not None and self.links.get(link.peer_id) is link:
            del self.links[link.peer_id]
            log.info("connection to broker %d lost", link.peer_id)

    def connected(self, peer_id: int) -> bool:
        return peer_id in self.links

    # ------------------------------------------------------------ raft
    def send(self, peer_id: int, group_id: str, msg) -> None:
        """Queue one Raft message; all queued messages go out at the end of this loop turn."""
        box = self._outbox.get(peer_id)
        if box is None:
            box = self._outbox[peer_id] = []
        box.append((group_id, msg))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        boxes, self._outbox = self._outbox, {}
        for peer_id, items in boxes.items():
            link = self.links.get(peer_id)
            if link is None:
                self.dropped_messages += len(items)
                continue
            for i in range(0, len(items), limits.MAX_RAFT_MESSAGES_PER_FRAME):
                chunk = items[i:i + limits.MAX_RAFT_MESSAGES_PER_FRAME]
                if not link.write(encode_frame(FRAME_RAFT, encode_raft_batch(chunk))):
                    self.dropped_messages += len(chunk)

    def keepalive(self) -> None:
        """Broker-pair heartbeat: an empty RAFT frame to every connected peer (once per tick),
        so followers of quiescent partitions know the leader's broker is alive."""
        for link in list(self.links.values()):
            link.write(_KEEPALIVE)

    # ------------------------------------------------------------ rpc
    async def rpc(self, peer_id: int, body: dict, timeout_s: float) -> dict:
        """Send a JSON request to a peer and wait for its answer.

        Raises:
            ConnectionError: not connected to ``peer_id``, or the connection was lost before
                the answer came (at once, not at the timeout).
            asyncio.TimeoutError: no answer within ``timeout_s``.
        """
        link = self.links.get(peer_id)
        if link is None:
            raise ConnectionError(f"not connected to broker {peer_id}")
        cid = next(self._cids) & 0x7FFFFFFF
        fut = self.loop.create_future()
        self._pending[cid] = fut
        if not link.write(encode_frame(FRAME_RPC_REQUEST, [encode_rpc(cid, body)])):
            self._pending.pop(cid, None)
            raise ConnectionError(f"connection to broker {peer_id} is congested")
        link.pending_rpcs.add(cid)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(cid, None)
            link.pending_rpcs.discard(cid)
