"""A new broker joins a running cluster as an observer (KRaft's
``controller.quorum.bootstrap.servers``, KIP-853; ``litemq serve --join``).

A broker that is not one of the static metadata voters (``--peers``) asks the brokers it was
given, one after the other, with the RPC ``join``: its registration (node id, listeners,
``directory.id``, rack, RPC address, ``process.roles``). The broker asked registers it through
the metadata leader (a ``register_broker`` record carrying the RPC address, so every broker
learns how to reach it) and answers the cluster id, the metadata voters and the RPC address of
every broker it knows. The metadata leader then adds the new broker to the metadata group as
a learner (an observer: it receives the log, never votes) and the broker serves like any other;
``AddRaftVoter`` (``litemq cluster add-controller``) can make it a voter later.

Blocking RPCs run on an executor thread; the whole join is bounded by ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from litemq import limits
from litemq.cluster.codec import rpc_call

log = logging.getLogger(__name__)

__all__ = ["JOIN_RETRY_BACKOFF_S", "JoinRefused", "Joined", "join_cluster", "parse_join_answer"]

JOIN_RETRY_BACKOFF_S = 0.5


class JoinRefused(ValueError):
    """A bootstrap broker refused this broker for good (another cluster id, a bad request)."""


@dataclass(frozen=True)
class Joined:
    """The answer of a ``join``: ``cluster_id``, the metadata ``voters`` (node ids), ``peers``
    (node id -> (host, RPC port) of every broker the answering broker knows) and ``via``
    (``host:port`` of the broker that answered)."""

    cluster_id: str
    voters: frozenset[int]
    peers: dict[int, tuple[str, int]]
    via: str


def parse_join_answer(answer: dict, via: str) -> Joined:
    """Check and convert a ``join`` answer. Raises ``ValueError`` when malformed."""
    voters = frozenset(int(v) for v in answer["voters"])
    if not voters:
        raise ValueError("the answer names no metadata voter")
    peers = {int(n): (str(a[0]), int(a[1])) for n, a in dict(answer.get("peers") or {}).items()}
    return Joined(str(answer.get("cluster_id") or ""), voters, peers, via)


async def join_cluster(servers: list[tuple[str, int]], registration: dict, ssl_context,
                       loop: asyncio.AbstractEventLoop, timeout_s: float) -> Joined:
    """Ask ``servers`` (host, RPC port) in turn to register this broker until one does (one
    round only when ``timeout_s`` <= 0).

    Raises:
        JoinRefused: a broker refused the registration for good (e.g. another cluster id).
        ValueError: none answered within ``timeout_s`` seconds (the last error in the message).
    """
    deadline = loop.time() + timeout_s
    last = "no bootstrap server"
    while True:
        for host, port in servers:
            via = f"{host}:{port}"
            try:
                answer = await loop.run_in_executor(None, lambda: rpc_call(
                    host, port, {"op": "join", **registration}, timeout_s=limits.JOIN_RPC_TIMEOUT_MS / 1000,
                    ssl_context=ssl_context))
            except Exception as exc:  # down, refusing, timed out: ask the next one
                last = f"{via}: {exc}"
                continue
            if answer.get("error"):
                last = f"{via}: {answer.get('message') or answer['error']}"
                if answer.get("fatal"):
                    raise JoinRefused(f"joining the cluster failed: {last}")
                continue
            try:
                joined = parse_join_answer(answer, via)
            except (KeyError, TypeError, ValueError) as exc:
                last = f"{via}: malformed answer: {exc}"
                continue
            log.info("joined the cluster %s through %s: metadata voters %s", joined.cluster_id, via,
                     sorted(joined.voters))
            return joined
        if loop.time() >= deadline:
            raise ValueError(f"could not join the cluster within {timeout_s:.0f}s (controller.quorum.bootstrap."
                             f"servers): {last}")
        log.info("joining the cluster: %s; retrying", last)
        await asyncio.sleep(JOIN_RETRY_BACKOFF_S)
