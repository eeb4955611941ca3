"""The web console: one static page (``static/console.html``, ``.js``, ``.css``; vanilla JS and
SVG, nothing fetched from elsewhere) and the JSON endpoints it polls.

- ``GET /console/api/overview``: cluster id, brokers, topics with per-partition leader, replicas,
  ISR, log start offset and high watermark, consumer groups (state, coordinator, total lag).
- ``GET /console/api/groups/{group}``: one group's members and per-partition lag.
- ``GET /console/api/throughput``: cumulative per-topic bytes in/out and messages in summed
  over every live broker, with the time, and their ``rates`` per second (:func:`counter_rates`:
  per broker, so a broker that is missing from a sample, rejoins or restarts neither adds a
  spike nor drops the chart to zero), or null until a second sample is there.
- ``GET /console/api/reassignments``: partition reassignments in progress (ListPartitionReassignments:
  replicas, target, adding and removing replicas), each with its leader and how far each adding
  replica has caught up (the leader's Raft match offset against its log end), and the replication
  throttles in effect (:mod:`litemq.broker.http.reassignments`).
- ``GET /console/api/schemas``: the schema registry's subjects with their live versions, the
  latest one's id and type, and each subject's compatibility level (and the global one).

The message browser reads records through the REST API's records endpoint
(:mod:`litemq.broker.http.rest`, ``format=schema``: values in the schema registry's wire format
shown decoded). Everything is subject to the caller's ACLs.
"""

from __future__ import annotations

import asyncio
import collections
import time
from importlib import resources
from typing import TYPE_CHECKING

from aiohttp import web

from litemq import limits
from litemq.broker.http import reassignments, views
from litemq.broker.http.inproc import peer_counters
from litemq.broker.http.rest import caller_of

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

STATIC_FILES = {"console.html": "text/html", "console.js": "text/javascript", "console.css": "text/css"}
"""The console's files (package data of ``litemq.broker.http``) and their content types."""

COUNTER_KINDS = ("bytes_in", "bytes_out", "messages_in")


def counter_rates(prev: dict[int, dict], cur: dict[int, dict]) -> dict[str, dict[str, float]]:
    """Per-topic rates (per second) between two samples of every broker's cumulative counters
    (node id -> :meth:`BrokerMetrics.throughput`): topic -> kind -> rate, summed over the
    brokers present in both samples, each over its own ``time_ms`` interval. A counter lower
    than before is a broker restart: it counts from zero (Prometheus' ``rate()``). A broker in
    one sample only adds nothing (adding its lifetime counters was a spike of gigabytes per
    second when it came back)."""
    out: dict[str, dict[str, float]] = {}
    for node, now in cur.items():
        then = prev.get(node)
        if then is None:
            continue
        dt_s = (int(now.get("time_ms", 0)) - int(then.get("time_ms", 0))) / 1000
        if dt_s <= 0:
            continue
        for kind in COUNTER_KINDS:
            before = then.get(kind) or {}
            for topic, n in (now.get(kind) or {}).items():
                n, old = int(n), int(before.get(topic, 0))
                rate = (n - old if n >= old else n) / dt_s
                out.setdefault(topic, dict.fromkeys(COUNTER_KINDS, 0.0))[kind] += rate
    return out


class Console:
    """The console routes of one broker's HTTP port."""

    def __init__(self, runtime: "HttpRuntime") -> None:
        self.runtime = runtime
        root = resources.files("litemq.broker.http") / "static"
        self._files = {name: (root / name).read_bytes() for name in STATIC_FILES}
        self._samples: collections.deque[tuple[float, dict[int, dict]]] = collections.deque(
            maxlen=limits.CONSOLE_RATE_SAMPLES)
        """(monotonic seconds, node id -> counters) of the last throughput requests."""

    def routes(self) -> list:
        return [web.get("/", self.root), web.get("/console", self.root), web.get("/console/", self.page),
                web.get("/console/static/{name}", self.static),
                web.get("/console/api/overview", self.overview), web.get("/console/api/groups/{group}", self.group),
                web.get("/console/api/throughput", self.throughput),
                web.get("/console/api/reassignments", self.reassignments),
                web.get("/console/api/schemas", self.schemas)]

    async def root(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/console/")

    async def page(self, request: web.Request) -> web.Response:
        return self._file("console.html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return self._file(name)

    def _file(self, name: str) -> web.Response:
        return web.Response(body=self._files[name], content_type=STATIC_FILES[name], charset="utf-8",
                            headers={"Cache-Control": "no-cache"})

    async def overview(self, request: web.Request) -> web.Response:
        runtime = self.runtime
        caller = caller_of(request)
        topics = views.describable_topics(runtime, caller)
        layout = {info.name: views.partitions(runtime, info) for info in topics}
        tps = [(name, p["partition_index"]) for name, parts in layout.items() for p in parts]
        offsets, groups = await asyncio.gather(views.partition_offsets(runtime, caller, tps),
                                               views.list_groups(runtime, caller))
        out_topics = []
        for info in topics:
            parts = []
            for p in layout[info.name]:
                o = offsets[(info.name, p["partition_index"])]
                hw, start = o["high_watermark"], o["log_start_offset"]
                parts.append({"partition": p["partition_index"], "leader": p["leader_id"],
                              "replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"]),
                              "log_start_offset": start, "high_watermark": hw,
                              "messages": max(0, hw - start) if hw >= 0 and start >= 0 else None})
            out_topics.append({"name": info.name, "internal": info.internal, "partitions": parts,
                               "replication_factor": runtime.metadata.replication_factor(info.name),
                               "messages": sum(p["messages"] or 0 for p in parts)})
        lags = await asyncio.gather(*(views.describe_group(runtime, caller, g["group_id"]) for g in groups))
        for g, d in zip(groups, lags):
            g["members"] = len(d["members"])
            g["lag"] = sum(o["lag"] for o in d["offsets"] if o["lag"] >= 0)
        return web.json_response({"cluster_id": str(getattr(runtime.metadata, "cluster_id", "") or ""),
                                  "node_id": runtime.config.node_id, "controller": runtime.controller_id(),
                                  "brokers": views.brokers(runtime), "topics": out_topics, "groups": groups})

    async def group(self, request: web.Request) -> web.Response:
        g = await views.describe_group(self.runtime, caller_of(request), request.match_info["group"])
        g["lag"] = sum(o["lag"] for o in g["offsets"] if o["lag"] >= 0)
        return web.json_response(g)

    async def throughput(self, request: web.Request) -> web.Response:
        per_broker = await peer_counters(self.runtime)
        visible = {info.name for info in views.describable_topics(self.runtime, caller_of(request))}
        topics: dict[str, dict[str, int]] = {}
        totals = dict.fromkeys(COUNTER_KINDS, 0)
        for counters in per_broker.values():
            for kind in totals:
                for topic, n in (counters.get(kind) or {}).items():
                    if topic not in visible:
                        continue
                    topics.setdefault(topic, {k: 0 for k in totals})[kind] += int(n)
                    totals[kind] += int(n)
        now = max((int(c.get("time_ms", 0)) for c in per_broker.values()), default=0)
        return web.json_response({"time_ms": now, "brokers": sorted(per_broker), "topics": topics, "totals": totals,
                                  "rates": self._rates(per_broker, visible)})

    def _rates(self, per_broker: dict[int, dict], visible: set[str]) -> dict | None:
        """The rates of :func:`counter_rates` against the oldest kept sample within
        ``limits.CONSOLE_RATE_WINDOW_MS``, else the last one (then this sample is kept), for the topics in
        ``visible``: ``{"bytes_in", "bytes_out", "messages_in", "topics": {name: {...}}}``, or
        None when there is no earlier sample in the window."""
        now_s = time.monotonic()
        window_s = limits.CONSOLE_RATE_WINDOW_MS / 1000
        prev = next((c for t, c in self._samples if now_s - t <= window_s), None)
        if prev is None and self._samples:  # polled less often than the window: the last sample
            prev = self._samples[-1][1]
        self._samples.append((now_s, per_broker))
        if prev is None:
            return None
        topics = {t: r for t, r in counter_rates(prev, per_broker).items() if t in visible}
        out: dict = {kind: sum(r[kind] for r in topics.values()) for kind in COUNTER_KINDS}
        out["topics"] = topics
        return out

    async def schemas(self, request: web.Request) -> web.Response:
        """``{"compatibility", "subjects": [{"subject", "versions", "latest", "id", "type",
        "compatibility"}]}`` of the schema registry (:mod:`litemq.cluster.schema_registry`)."""
        store = self.runtime.metadata.schema_registry
        subjects = []
        for subject in store.subject_names():
            versions = store.live_versions(subject)
            schema_id = store.subjects[subject][versions[-1]].schema_id
            subjects.append({"subject": subject, "versions": len(versions), "latest": versions[-1], "id": schema_id,
                             "type": store.schemas[schema_id].schema_type, "compatibility": store.level(subject)})
        return web.json_response({"compatibility": store.level(None), "subjects": subjects})

    async def reassignments(self, request: web.Request) -> web.Response:
        """``{"error_code", "reassignments": [{"topic", "partition", "leader", "replicas", "target",
        "adding_replicas", "removing_replicas", "progress"}], "throttles"}``: ``error_code`` is
        ListPartitionReassignments' (CLUSTER_AUTHORIZATION_FAILED: no moves shown); ``progress``
        is :func:`~litemq.broker.http.reassignments.local_progress` of the leader, or None."""
        runtime = self.runtime
        caller = caller_of(request)
        code, moves = await reassignments.list_reassignments(runtime, caller)
        progress = await reassignments.reassignment_progress(runtime, moves)
        for m in moves:
            m["leader"] = views.leader_of(runtime, m["topic"], m["partition"])
            m["progress"] = progress[(m["topic"], m["partition"])]
        return web.json_response({"error_code": code, "reassignments": moves,
                                  "throttles": reassignments.replication_throttles(runtime, caller)})
