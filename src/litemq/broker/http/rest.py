"""REST API in the style of Confluent REST Proxy v3, so ``curl`` can produce and read records.

Paths (``{cid}`` is the cluster id that ``GET /v3/clusters`` lists):

- ``GET /v3/clusters``, ``GET /v3/clusters/{cid}``, ``GET .../brokers``, ``GET .../brokers/{id}``
- ``GET .../topics``, ``GET .../topics/{topic}``, ``GET .../topics/{topic}/partitions``,
  ``GET .../topics/{topic}/partitions/{p}``
- ``POST .../topics/{topic}/records``: produce (Confluent's request and delivery-report bodies)
- ``GET .../consumer-groups``, ``GET .../consumer-groups/{g}``, ``GET .../consumer-groups/{g}/lags``,
  ``GET .../consumer-groups/{g}/lag-summary``, ``GET .../consumer-groups/{g}/consumers``,
  ``GET .../consumer-groups/{g}/consumers/{consumer_id}``
- ``GET .../topics/{topic}/configs[/{name}]``, ``GET .../brokers/{id}/configs[/{name}]``,
  ``GET .../broker-configs[/{name}]`` (the cluster-wide dynamic broker configs): DescribeConfigs
  v4, a broker's own configs asked of that broker
- ``GET .../topics/{topic}/partitions/{p}/replicas[/{broker_id}]``,
  ``GET .../brokers/{id}/partition-replicas``: the replicas, the leader and the ISR from metadata
- ``GET .../acls?resource_type=&resource_name=&pattern_type=&principal=&host=&operation=&permission=``:
  DescribeAcls v3 (Confluent's names for the filters, each ANY when absent)
- ``GET .../topics/-/partitions/-/reassignment`` (every reassignment in progress),
  ``GET .../topics/{topic}/partitions/-/reassignment`` (a topic's),
  ``GET .../topics/{topic}/partitions/{p}/reassignment`` (one; 404 when none is in progress):
  Confluent's ``KafkaReassignment`` (``adding_replicas``, ``removing_replicas``) from
  ListPartitionReassignments, plus ``replica_ids`` and ``target_replica_ids``
  (:mod:`litemq.broker.http.reassignments`)
- ``GET .../topics/{topic}/partitions/{p}/records?offset=N&max_count=M`` (or ``timestamp=MS``):
  read records. REST v3 has no consume API; this LiteMQ extension answers a ``KafkaRecordList``
  whose ``metadata.next`` continues where it stopped (see docs/operations.md).

Produce body: one JSON object per record, several concatenated in one request allowed:
``{"partition_id": 0, "headers": [{"name": "h", "value": "<base64>"}], "key": {"type": "STRING",
"data": "k"}, "value": {"type": "JSON", "data": {...}}, "timestamp": "2024-01-01T00:00:00Z"}``.
Types: ``BINARY`` (base64 data; the default when ``type`` is absent, as in Confluent's proxy),
``STRING`` (UTF-8), ``JSON`` (any JSON value, written compactly), and with the broker's schema
registry ``AVRO`` (Avro's JSON encoding) and ``JSONSCHEMA``, written in the registry's wire format
with the schema ``schema_id`` or ``schema_version`` (of ``subject``, default
``<topic>-<key|value>``; default version: the latest) names (:mod:`~litemq.broker.http.schema_serde`;
PROTOBUF answers 400). Without ``partition_id`` a keyed record goes to Kafka's
default partition (murmur2 of the key, :mod:`litemq.protocol.partitioner`), an unkeyed one
round robin. Records go through the broker's Produce handler with acks=all on the partition
leader (any broker accepts the request).

Errors answer ``{"error_code": N, "message": "..."}`` with HTTP status ``N`` (``N`` = 40301 with
status 403 for a refused ACL, as Confluent does). A request with several records answers 200 with
one delivery report per line, each with its own ``error_code`` (200 = written).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aiohttp import web

from litemq import limits
from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.config_types import ConfigSource, config_source_name
from litemq.broker.handlers.admin import BROKER_RESOURCE, TOPIC_RESOURCE
from litemq.broker.http import reassignments, schema_serde, views
from litemq.broker.http.inproc import DESCRIBE_ACLS, DESCRIBE_CONFIGS, PRODUCE, HttpCaller, PeerUnavailable, call_api
from litemq.protocol.errors import ErrorCode
from litemq.protocol.partitioner import partition_for_key
from litemq.protocol.records import build_batch
from litemq.security.acls import AclPermissionType, PatternType
from litemq.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

AUTHORIZATION_ERROR_CODE = 40301
"""Confluent REST's error code for a request the ACLs refuse (HTTP 403)."""
RETRIABLE_KAFKA_ERRORS = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NETWORK_EXCEPTION})
CLIENT_KAFKA_ERRORS = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.INVALID_TIMESTAMP, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.OFFSET_OUT_OF_RANGE,
    ErrorCode.SECURITY_DISABLED})
EMBEDDED_TYPES = ("BINARY", "STRING", "JSON")
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSONSCHEMA")

RUNTIME_KEY: "web.AppKey[HttpRuntime]" = web.AppKey("runtime")
"""The aiohttp application key holding the broker runtime an HTTP request is served by."""


class RestError(Exception):
    """An error answer: HTTP ``status`` and Confluent ``error_code`` (= status unless given)."""

    def __init__(self, status: int, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = status if error_code is None else error_code

    def response(self) -> web.Response:
        return web.json_response({"error_code": self.error_code, "message": str(self)}, status=self.status)


def kafka_error(code: int, what: str) -> RestError:
    """The REST error for a Kafka error code ``code`` met while doing ``what``."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = str(code)
    if code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        return RestError(403, f"Request is not authorized: {what}: {name}", AUTHORIZATION_ERROR_CODE)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, f"This server does not host this topic-partition: {what}")
    if code in CLIENT_KAFKA_ERRORS:
        return RestError(400, f"{what}: {name}")
    if code in RETRIABLE_KAFKA_ERRORS:
        return RestError(503, f"Retriable Kafka error: {what}: {name}", 50003)
    return RestError(500, f"Kafka error: {what}: {name}", 50002)


# ------------------------------------------------------------------ helpers
def iso_time(ms: int) -> str | None:
    """``2024-01-01T00:00:00.123Z`` for a time in ms since the epoch (None when negative)."""
    if ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_time(text: str) -> int:
    """ISO-8601 (``Z`` or an offset) -> ms since the epoch. Raises RestError(400)."""
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise RestError(400, f"bad timestamp {text!r}: expected ISO-8601 such as 2024-01-01T00:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _int_param(request: web.Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise RestError(400, f"query parameter {name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise RestError(400, f"query parameter {name}={value} outside {lo}..{hi}")
    return value


def caller_of(request: web.Request) -> HttpCaller:
    """The principal of an HTTP request (``User:ANONYMOUS``, or the user HTTP Basic
    authentication proved, see :func:`litemq.broker.http.web_app.authenticate`) and its address."""
    return HttpCaller(request.app[RUNTIME_KEY], request.get("principal", ANONYMOUS), client_host=request.remote or "?")


# ------------------------------------------------------------------ resources
class RestApi:
    """The v3 routes of one broker's HTTP port (see the module docstring)."""

    def __init__(self, runtime: "HttpRuntime") -> None:
        self.runtime = runtime
        self._round_robin: dict[str, itertools.count] = {}

    def routes(self) -> list:
        r = "/v3/clusters/{cid}"
        return [web.get("/v3/clusters", self.list_clusters), web.get(r, self.get_cluster),
                web.get(r + "/brokers", self.list_brokers), web.get(r + "/brokers/{broker_id}", self.get_broker),
                web.get(r + "/topics", self.list_topics), web.get(r + "/topics/{topic}", self.get_topic),
                web.get(r + "/topics/{topic}/partitions", self.list_partitions),
                web.get(r + "/topics/{topic}/partitions/{partition}", self.get_partition),
                web.get(r + "/topics/{topic}/partitions/{partition}/records", self.read_records),
                web.get(r + "/topics/{topic}/partitions/{partition}/reassignment", self.reassignments),
                web.post(r + "/topics/{topic}/records", self.produce),
                web.get(r + "/consumer-groups", self.list_groups), web.get(r + "/consumer-groups/{group}", self.get_group),
                web.get(r + "/consumer-groups/{group}/lags", self.group_lags),
                web.get(r + "/consumer-groups/{group}/lag-summary", self.group_lag_summary),
                web.get(r + "/consumer-groups/{group}/consumers", self.group_consumers),
                web.get(r + "/consumer-groups/{group}/consumers/{consumer}", self.group_consumer),
                web.get(r + "/topics/{topic}/configs", self.topic_configs),
                web.get(r + "/topics/{topic}/configs/{name}", self.topic_configs),
                web.get(r + "/brokers/{broker_id}/configs", self.broker_configs),
                web.get(r + "/brokers/{broker_id}/configs/{name}", self.broker_configs),
                web.get(r + "/broker-configs", self.cluster_configs),
                web.get(r + "/broker-configs/{name}", self.cluster_configs),
                web.get(r + "/topics/{topic}/partitions/{partition}/replicas", self.partition_replicas),
                web.get(r + "/topics/{topic}/partitions/{partition}/replicas/{broker_id}", self.partition_replicas),
                web.get(r + "/brokers/{broker_id}/partition-replicas", self.broker_replicas),
                web.get(r + "/acls", self.list_acls)]

    # ---------------------------------------------------------------- shapes
    @property
    def cluster_id(self) -> str:
        return str(getattr(self.runtime.metadata, "cluster_id", "") or "")

    def _cid(self, request: web.Request) -> str:
        cid = request.match_info["cid"]
        if cid != self.cluster_id:
            raise RestError(404, f"Cluster {cid} cannot be found.")
        return cid

    @staticmethod
    def _base(request: web.Request) -> str:
        return str(request.url.origin())

    def _cluster_url(self, request: web.Request) -> str:
        return f"{self._base(request)}/v3/clusters/{self.cluster_id}"

    def _crn(self, *parts: str) -> str:
        return "crn:///kafka=" + self.cluster_id + "".join("/" + p for p in parts)

    @staticmethod
    def _list(kind: str, url: str, data: list) -> dict:
        return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}

    def _cluster(self, request: web.Request) -> dict:
        url = self._cluster_url(request)
        return {"kind": "KafkaCluster", "metadata": {"self": url, "resource_name": self._crn()},
                "cluster_id": self.cluster_id, "controller": {"related": f"{url}/brokers/{self.runtime.controller_id()}"},
                "acls": {"related": f"{url}/acls"}, "brokers": {"related": f"{url}/brokers"},
                "broker_configs": {"related": f"{url}/broker-configs"},
                "consumer_groups": {"related": f"{url}/consumer-groups"}, "topics": {"related": f"{url}/topics"},
                "partition_reassignments": {"related": f"{url}/topics/-/partitions/-/reassignment"}}

    def _broker(self, request: web.Request, b: dict) -> dict:
        url = f"{self._cluster_url(request)}/brokers/{b['broker_id']}"
        return {"kind": "KafkaBroker", "metadata": {"self": url, "resource_name": self._crn(f"broker={b['broker_id']}")},
                "cluster_id": self.cluster_id, "broker_id": b["broker_id"], "host": b["host"], "port": b["port"],
                "rack": b.get("rack"), "configs": {"related": f"{url}/configs"},
                "partition_replicas": {"related": f"{url}/partition-replicas"}}

    def _topic(self, request: web.Request, info) -> dict:
        url = f"{self._cluster_url(request)}/topics/{info.name}"
        rf = self.runtime.metadata.replication_factor(info.name)  # a move's adding replicas not counted
        return {"kind": "KafkaTopic", "metadata": {"self": url, "resource_name": self._crn(f"topic={info.name}")},
                "cluster_id": self.cluster_id, "topic_name": info.name, "is_internal": info.internal,
                "replication_factor": rf, "partitions_count": info.num_partitions,
                "partitions": {"related": f"{url}/partitions"}, "configs": {"related": f"{url}/configs"},
                "partition_reassignments": {"related": f"{url}/partitions/-/reassignment"}, "authorized_operations": []}

    def _partition(self, request: web.Request, topic: str, p: dict, offsets: dict | None) -> dict:
        url = f"{self._cluster_url(request)}/topics/{topic}/partitions/{p['partition_index']}"
        out = {"kind": "KafkaPartition",
               "metadata": {"self": url, "resource_name": self._crn(f"topic={topic}", f"partition={p['partition_index']}")},
               "cluster_id": self.cluster_id, "topic_name": topic, "partition_id": p["partition_index"],
               "leader": {"related": f"{url}/replicas/{p['leader_id']}"} if p["leader_id"] >= 0 else None,
               "replicas": {"related": f"{url}/replicas"}, "reassignment": {"related": f"{url}/reassignment"},
               # LiteMQ additions (not in Confluent's KafkaPartition):
               "leader_id": p["leader_id"], "leader_epoch": p["leader_epoch"], "replica_ids": list(p["replica_nodes"]),
               "isr_ids": list(p["isr_nodes"]), "records": {"related": f"{url}/records"}}
        if offsets is not None:
            out.update(log_start_offset=offsets["log_start_offset"], high_watermark=offsets["high_watermark"],
                       last_stable_offset=offsets["last_stable_offset"])
        return out

    def _describable(self, request: web.Request, topic: str):
        info = self.runtime.metadata.topics.get(topic)
        if info is None or not views.may(self.runtime, caller_of(request), AclOperation.DESCRIBE, ResourceType.TOPIC,
                                         topic):
            raise RestError(404, f"This server does not host this topic-partition: topic {topic} not found")
        return info

    @staticmethod
    def _partition_index(request: web.Request, info) -> int:
        raw = request.match_info["partition"]
        if not raw.isdigit() or int(raw) >= info.num_partitions:
            raise RestError(404, f"This server does not host this topic-partition: {info.name}-{raw}")
        return int(raw)

    # ---------------------------------------------------------------- GET handlers
    async def list_clusters(self, request: web.Request) -> web.Response:
        return web.json_response(self._list("KafkaClusterList", f"{self._base(request)}/v3/clusters",
                                            [self._cluster(request)]))

    async def get_cluster(self, request: web.Request) -> web.Response:
        self._cid(request)
        return web.json_response(self._cluster(request))

    async def list_brokers(self, request: web.Request) -> web.Response:
        self._cid(request)
        data = [self._broker(request, b) for b in views.brokers(self.runtime)]
        return web.json_response(self._list("KafkaBrokerList", f"{self._cluster_url(request)}/brokers", data))

    async def get_broker(self, request: web.Request) -> web.Response:
        self._cid(request)
        return web.json_response(self._broker(request, self._named_broker(request)))

    def _named_broker(self, request: web.Request) -> dict:
        """The broker the path's ``{broker_id}`` names (:func:`views.brokers`); 404 when none."""
        raw = request.match_info["broker_id"]
        for b in views.brokers(self.runtime):
            if str(b["broker_id"]) == raw:
                return b
        raise RestError(404, f"Broker {raw} cannot be found.")

    async def list_topics(self, request: web.Request) -> web.Response:
        self._cid(request)
        data = [self._topic(request, info) for info in views.describable_topics(self.runtime, caller_of(request))]
        return web.json_response(self._list("KafkaTopicList", f"{self._cluster_url(request)}/topics", data))

    async def get_topic(self, request: web.Request) -> web.Response:
        self._cid(request)
        return web.json_response(self._topic(request, self._describable(request, request.match_info["topic"])))

    async def list_partitions(self, request: web.Request) -> web.Response:
        self._cid(request)
        info = self._describable(request, request.match_info["topic"])
        parts = views.partitions(self.runtime, info)
        offsets = await views.partition_offsets(self.runtime, caller_of(request),
                                                [(info.name, p["partition_index"]) for p in parts], wait=True)
        data = [self._partition(request, info.name, p, offsets[(info.name, p["partition_index"])]) for p in parts]
        return web.json_response(self._list("KafkaPartitionList",
                                            f"{self._cluster_url(request)}/topics/{info.name}/partitions", data))

    async def get_partition(self, request: web.Request) -> web.Response:
        self._cid(request)
        info = self._describable(request, request.match_info["topic"])
        index = self._partition_index(request, info)
        p = views.partitions(self.runtime, info)[index]
        offsets = await views.partition_offsets(self.runtime, caller_of(request), [(info.name, index)], wait=True)
        return web.json_response(self._partition(request, info.name, p, offsets[(info.name, index)]))

    def _reassignment(self, request: web.Request, m: dict) -> dict:
        url = f"{self._cluster_url(request)}/topics/{m['topic']}/partitions/{m['partition']}"
        return {"kind": "KafkaReassignment",
                "metadata": {"self": f"{url}/reassignment",
                             "resource_name": self._crn(f"topic={m['topic']}", f"partition={m['partition']}",
                                                        "reassignment")},
                "cluster_id": self.cluster_id, "topic_name": m["topic"], "partition_id": m["partition"],
                "adding_replicas": m["adding_replicas"], "removing_replicas": m["removing_replicas"],
                "replicas": {"related": f"{url}/replicas"},
                # LiteMQ additions: the replicas during the move (Kafka's Replicas) and its target
                "replica_ids": m["replicas"], "target_replica_ids": m["target"]}

    async def reassignments(self, request: web.Request) -> web.Response:
        """Confluent's ListAllReassignments (topic and partition ``-``), SearchReassignmentsByTopic
        (partition ``-``) and GetReassignment; 403 when the caller may not DESCRIBE the cluster."""
        self._cid(request)
        topic, raw = request.match_info["topic"], request.match_info["partition"]
        if topic == "-" and raw == "-":
            wanted = None
        else:
            info = self._describable(request, topic)
            wanted = [(info.name, None if raw == "-" else [self._partition_index(request, info)])]
        code, moves = await reassignments.list_reassignments(self.runtime, caller_of(request), wanted)
        if code:
            raise kafka_error(code, "list partition reassignments")
        data = [self._reassignment(request, m) for m in moves]
        if raw != "-":
            if not data:
                raise RestError(404, f"No ongoing reassignment for partition {topic}-{raw}.")
            return web.json_response(data[0])
        return web.json_response(self._list("KafkaReassignmentList",
                                            f"{self._cluster_url(request)}/topics/{topic}/partitions/-/reassignment",
                                            data))

    async def list_groups(self, request: web.Request) -> web.Response:
        self._cid(request)
        url = f"{self._cluster_url(request)}/consumer-groups"
        data = [self._group(request, g) for g in await views.list_groups(self.runtime, caller_of(request))]
        return web.json_response(self._list("KafkaConsumerGroupList", url, data))

    def _group(self, request: web.Request, g: dict) -> dict:
        url = f"{self._cluster_url(request)}/consumer-groups/{g['group_id']}"
        return {"kind": "KafkaConsumerGroup",
                "metadata": {"self": url, "resource_name": self._crn(f"consumer-group={g['group_id']}")},
                "cluster_id": self.cluster_id, "consumer_group_id": g["group_id"],
                "is_simple": not g.get("protocol_type"), "partition_assignor": g.get("protocol", ""),
                "state": str(g.get("state", "")).upper(),
                "coordinator": {"related": f"{self._cluster_url(request)}/brokers/{g['coordinator']}"},
                "consumer": {"related": f"{url}/consumers"}, "lag_summary": {"related": f"{url}/lag-summary"},
                # LiteMQ addition: members with their assigned partitions
                "members": g.get("members", [])}

    async def _described_group(self, request: web.Request) -> dict:
        self._cid(request)
        group_id = request.match_info["group"]
        g = await views.describe_group(self.runtime, caller_of(request), group_id)
        if g["error_code"]:
            raise kafka_error(g["error_code"], f"group {group_id}")
        if g["state"] == "Dead" and not g["offsets"]:
            raise RestError(404, f"Consumer group {group_id} cannot be found.")
        return g

    async def get_group(self, request: web.Request) -> web.Response:
        return web.json_response(self._group(request, await self._described_group(request)))

    async def group_lags(self, request: web.Request) -> web.Response:
        g = await self._described_group(request)
        url = f"{self._cluster_url(request)}/consumer-groups/{g['group_id']}/lags"
        data = [{"kind": "KafkaConsumerLag",
                 "metadata": {"self": f"{url}/{o['topic']}/partitions/{o['partition']}",
                              "resource_name": self._crn(f"consumer-group={g['group_id']}", f"lag={o['topic']}",
                                                         f"partition={o['partition']}")},
                 "cluster_id": self.cluster_id, "consumer_group_id": g["group_id"], "topic_name": o["topic"],
                 "partition_id": o["partition"], "current_offset": o["current_offset"],
                 "log_end_offset": o["log_end_offset"], "lag": o["lag"], "consumer_id": o["consumer_id"],
                 "instance_id": o["instance_id"], "client_id": o["client_id"]} for o in g["offsets"]]
        return web.json_response(self._list("KafkaConsumerLagList", url, data))

    async def group_lag_summary(self, request: web.Request) -> web.Response:
        """Confluent's KafkaConsumerGroupLagSummary: the largest lag (its partition and consumer)
        and the sum of all lags of the group's committed partitions."""
        g = await self._described_group(request)
        url = f"{self._cluster_url(request)}/consumer-groups/{g['group_id']}"
        lags = [o for o in g["offsets"] if o["lag"] is not None and o["lag"] >= 0]  # -1: end unknown
        top = max(lags, key=lambda o: o["lag"], default=None)
        body = {"kind": "KafkaConsumerGroupLagSummary",
                "metadata": {"self": f"{url}/lag-summary",
                             "resource_name": self._crn(f"consumer-group={g['group_id']}", "lag-summary")},
                "cluster_id": self.cluster_id, "consumer_group_id": g["group_id"],
                "max_lag_consumer_id": top["consumer_id"] if top else "",
                "max_lag_instance_id": top["instance_id"] if top else None,
                "max_lag_client_id": top["client_id"] if top else "",
                "max_lag_topic_name": top["topic"] if top else "",
                "max_lag_partition_id": top["partition"] if top else 0,
                "max_lag": top["lag"] if top else 0, "total_lag": sum(o["lag"] for o in lags),
                "max_lag_consumer": ({"related": f"{url}/consumers/{top['consumer_id']}"}
                                     if top and top["consumer_id"] else None),
                "max_lag_partition": ({"related": f"{self._cluster_url(request)}/topics/{top['topic']}/partitions/"
                                                 f"{top['partition']}"} if top else None)}
        return web.json_response(body)

    def _consumer(self, request: web.Request, group_id: str, m: dict) -> dict:
        url = f"{self._cluster_url(request)}/consumer-groups/{group_id}/consumers/{m['member_id']}"
        return {"kind": "KafkaConsumer",
                "metadata": {"self": url, "resource_name": self._crn(f"consumer-group={group_id}",
                                                                     f"consumer={m['member_id']}")},
                "cluster_id": self.cluster_id, "consumer_group_id": group_id, "consumer_id": m["member_id"],
                "instance_id": m.get("instance_id"), "client_id": m.get("client_id", ""),
                # LiteMQ additions: the member's host and its partitions ({topic: [partition, ...]})
                "client_host": m.get("client_host", ""), "assignment": m.get("assignment", {})}

    async def group_consumers(self, request: web.Request) -> web.Response:
        g = await self._described_group(request)
        url = f"{self._cluster_url(request)}/consumer-groups/{g['group_id']}/consumers"
        return web.json_response(self._list("KafkaConsumerList", url,
                                            [self._consumer(request, g["group_id"], m) for m in g["members"]]))

    async def group_consumer(self, request: web.Request) -> web.Response:
        g = await self._described_group(request)
        for m in g["members"]:
            if m["member_id"] == request.match_info["consumer"]:
                return web.json_response(self._consumer(request, g["group_id"], m))
        raise RestError(404, f"Consumer {request.match_info['consumer']} cannot be found.")

    # ---------------------------------------------------------------- configs
    async def _describe_configs(self, request: web.Request, resource_type: int, resource_name: str,
                                node_id: int | None = None) -> list:
        """DescribeConfigs v4 of one resource (on broker ``node_id``): its config entries, with synonyms.

        Raises:
            RestError: the resource's error (403 refused, 404 unknown topic), or 503 when
                ``node_id`` does not answer.
        """
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name,
                               "configuration_keys": None}], "include_synonyms": True, "include_documentation": False}
        try:
            resp = await call_api(self.runtime, DESCRIBE_CONFIGS, body, node_id=node_id, caller=caller_of(request))
        except PeerUnavailable as exc:
            raise RestError(503, str(exc), 50003) from None
        [result] = resp.results
        if result.error_code:
            raise kafka_error(result.error_code, f"describe configs of {resource_name or 'the cluster'}")
        return list(result.configs)

    def _configs(self, request: web.Request, kind: str, url: str, entries: list, ids: dict) -> web.Response:
        """A config list of ``kind`` (``KafkaTopicConfig``...), or one config when the path names it."""
        def one(c) -> dict:
            return {"kind": kind, "metadata": {"self": f"{url}/{c.name}", "resource_name": None},
                    "cluster_id": self.cluster_id, **ids, "name": c.name, "value": c.value,
                    "is_default": c.config_source == ConfigSource.DEFAULT_CONFIG, "is_read_only": c.read_only,
                    "is_sensitive": c.is_sensitive, "source": config_source_name(c.config_source),
                    "synonyms": [{"name": y.name, "value": y.value, "source": config_source_name(y.source)}
                                 for y in (c.synonyms or [])]}
        name = request.match_info.get("name")
        if name is None:
            return web.json_response(self._list(kind + "List", url, [one(c) for c in entries]))
        for c in entries:
            if c.name == name:
                return web.json_response(one(c))
        raise RestError(404, f"Config {name} cannot be found.")

    async def topic_configs(self, request: web.Request) -> web.Response:
        self._cid(request)
        info = self._describable(request, request.match_info["topic"])
        entries = await self._describe_configs(request, TOPIC_RESOURCE, info.name)
        return self._configs(request, "KafkaTopicConfig", f"{self._cluster_url(request)}/topics/{info.name}/configs",
                             entries, {"topic_name": info.name})

    async def broker_configs(self, request: web.Request) -> web.Response:
        self._cid(request)
        broker_id = self._named_broker(request)["broker_id"]
        entries = await self._describe_configs(request, BROKER_RESOURCE, str(broker_id), node_id=broker_id)
        return self._configs(request, "KafkaBrokerConfig", f"{self._cluster_url(request)}/brokers/{broker_id}/configs",
                             entries, {"broker_id": broker_id})

    async def cluster_configs(self, request: web.Request) -> web.Response:
        """Confluent's cluster configs: the dynamic broker configs every broker takes
        (DescribeConfigs of the default BROKER resource, ``kafka-configs --entity-default``)."""
        self._cid(request)
        entries = await self._describe_configs(request, BROKER_RESOURCE, "")
        return self._configs(request, "KafkaClusterConfig", f"{self._cluster_url(request)}/broker-configs",
                             entries, {"config_type": "BROKER"})

    # ---------------------------------------------------------------- replicas
    def _replica(self, request: web.Request, topic: str, p: dict, broker_id: int) -> dict:
        url = f"{self._cluster_url(request)}/topics/{topic}/partitions/{p['partition_index']}/replicas/{broker_id}"
        return {"kind": "KafkaReplica",
                "metadata": {"self": url, "resource_name": self._crn(f"topic={topic}", f"partition={p['partition_index']}",
                                                                     f"replica={broker_id}")},
                "cluster_id": self.cluster_id, "topic_name": topic, "partition_id": p["partition_index"],
                "broker_id": broker_id, "is_leader": p["leader_id"] == broker_id,
                "is_in_sync": broker_id in p["isr_nodes"],
                "broker": {"related": f"{self._cluster_url(request)}/brokers/{broker_id}"}}

    async def partition_replicas(self, request: web.Request) -> web.Response:
        self._cid(request)
        info = self._describable(request, request.match_info["topic"])
        index = self._partition_index(request, info)
        p = views.partitions(self.runtime, info)[index]
        data = [self._replica(request, info.name, p, b) for b in p["replica_nodes"]]
        raw = request.match_info.get("broker_id")
        if raw is None:
            return web.json_response(self._list(
                "KafkaReplicaList", f"{self._cluster_url(request)}/topics/{info.name}/partitions/{index}/replicas", data))
        for r in data:
            if str(r["broker_id"]) == raw:
                return web.json_response(r)
        raise RestError(404, f"Replica {raw} of {info.name}-{index} cannot be found.")

    async def broker_replicas(self, request: web.Request) -> web.Response:
        """Every replica broker ``broker_id`` holds, of the topics the caller may describe."""
        self._cid(request)
        broker_id = self._named_broker(request)["broker_id"]
        data = [self._replica(request, info.name, p, broker_id)
                for info in views.describable_topics(self.runtime, caller_of(request))
                for p in views.partitions(self.runtime, info) if broker_id in p["replica_nodes"]]
        return web.json_response(self._list(
            "KafkaReplicaList", f"{self._cluster_url(request)}/brokers/{broker_id}/partition-replicas", data))

    # ---------------------------------------------------------------- ACLs
    async def list_acls(self, request: web.Request) -> web.Response:
        """Confluent's SearchClusterAcls: DescribeAcls v3 with the query's filters (Confluent's names
        and values, e.g. ``resource_type=TOPIC&operation=READ``; ANY when absent). 400 for an
        unknown value, 403 without DESCRIBE on the cluster."""
        self._cid(request)
        q = request.query

        def code(param: str, enum_cls) -> int:
            text = q.get(param, "ANY").upper()
            try:
                return int(enum_cls[text])
            except KeyError:
                raise RestError(400, f"{param}: unknown value {q.get(param)!r} (one of "
                                     f"{', '.join(m.name for m in enum_cls if m.name != 'UNKNOWN')})") from None

        body = {"resource_type_filter": code("resource_type", ResourceType),
                "resource_name_filter": q.get("resource_name"), "pattern_type_filter": code("pattern_type", PatternType),
                "principal_filter": q.get("principal"), "host_filter": q.get("host"),
                "operation": code("operation", AclOperation), "permission_type": code("permission", AclPermissionType)}
        resp = await call_api(self.runtime, DESCRIBE_ACLS, body, caller=caller_of(request))
        if resp.error_code:
            raise kafka_error(resp.error_code, "describe ACLs")
        data = [{"kind": "KafkaAcl", "metadata": {"self": None}, "cluster_id": self.cluster_id,
                 "resource_type": ResourceType(r.resource_type).name, "resource_name": r.resource_name,
                 "pattern_type": PatternType(r.pattern_type).name, "principal": a.principal, "host": a.host,
                 "operation": AclOperation(a.operation).name, "permission": AclPermissionType(a.permission_type).name}
                for r in resp.resources for a in r.acls]
        return web.json_response(self._list("KafkaAclDataList", f"{self._cluster_url(request)}/acls", data))

    # ---------------------------------------------------------------- read records
    async def read_records(self, request: web.Request) -> web.Response:
        """LiteMQ extension: ``?offset=N`` (default: the log start) or ``?timestamp=MS`` (first
        record at or after it), ``max_count`` (default 100), ``format`` auto|string|json|binary|schema
        (how keys and values are shown; auto = STRING when valid UTF-8, else BINARY; schema =
        the schema registry's wire format decoded, see :meth:`_render_schema`)."""
        self._cid(request)
        info = self._describable(request, request.match_info["topic"])
        index = self._partition_index(request, info)
        caller = caller_of(request)
        max_count = _int_param(request, "max_count", 100, 1, limits.HTTP_MAX_CONSUME_RECORDS)
        offset = _int_param(request, "offset", None, 0, 2**63 - 1)
        timestamp = _int_param(request, "timestamp", None, 0, 2**63 - 1)
        fmt = request.query.get("format", "auto").lower()
        if fmt not in ("auto", "string", "json", "binary", "schema"):
            raise RestError(400, f"format={fmt!r}: expected auto, string, json, binary or schema")
        tp = (info.name, index)
        if offset is None:
            err, found, _ = (await views.list_offsets(self.runtime, caller, [tp],
                                                      timestamp if timestamp is not None else views.EARLIEST,
                                                      wait=True))[tp]
            if err:
                raise kafka_error(err, f"{info.name}-{index}")
            if found < 0:  # no record at or after the timestamp: start at the end
                err, found, _ = (await views.list_offsets(self.runtime, caller, [tp], views.LATEST, wait=True))[tp]
                if err:
                    raise kafka_error(err, f"{info.name}-{index}")
            offset = found
        try:
            res = await views.read_records(self.runtime, caller, info.name, index, offset, max_count)
        except PeerUnavailable as exc:
            raise RestError(503, f"Retriable Kafka error: {exc}", 50003) from None
        if res.error_code and not res.records:
            raise kafka_error(res.error_code, f"read {info.name}-{index} at offset {offset}")
        base = f"{self._cluster_url(request)}/topics/{info.name}/partitions/{index}/records"
        render = self._render_schema if fmt == "schema" else lambda data: _render(data, fmt)
        data = [{"partition_id": index, "offset": r.offset, "timestamp": iso_time(r.timestamp),
                 "timestamp_ms": r.timestamp, "key": render(r.key), "value": render(r.value),
                 "headers": [{"name": k, "value": None if v is None else base64.b64encode(v).decode()}
                             for k, v in r.headers]} for r in res.records]
        body = {"kind": "KafkaRecordList",
                "metadata": {"self": str(request.url),
                             "next": f"{base}?offset={res.next_offset}&max_count={max_count}&format={fmt}"},
                "cluster_id": self.cluster_id, "topic_name": info.name, "partition_id": index,
                "next_offset": res.next_offset, "high_watermark": res.high_watermark,
                "log_start_offset": res.log_start_offset, "data": data}
        return web.json_response(body)

    def _render_schema(self, data: bytes | None) -> dict | None:
        """``format=schema``: wire-format bytes of a registered AVRO or JSON schema as
        ``{"type", "schema_id", "data"}``; anything else as ``format=auto`` shows it."""
        if data is None:
            return None
        return schema_serde.decode(self.runtime.metadata.schema_registry, data) or _render(data, "auto")

    # ---------------------------------------------------------------- produce
    async def produce(self, request: web.Request) -> web.Response:
        cid = self._cid(request)
        topic = request.match_info["topic"]
        info = self.runtime.metadata.topics.get(topic)
        caller = caller_of(request)
        if info is None:
            if not views.may(self.runtime, caller, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                raise kafka_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic {topic}")
            raise RestError(404, f"This server does not host this topic-partition: topic {topic} not found")
        raw = await request.read()
        items = _parse_concatenated(raw)
        prepared: list[dict | RestError] = []
        for item in items:
            try:
                prepared.append(self._prepare(item, info))
            except RestError as exc:
                prepared.append(exc)
        by_partition: dict[int, list[dict]] = {}
        for rec in prepared:
            if isinstance(rec, dict):
                by_partition.setdefault(rec["partition"], []).append(rec)
        await asyncio.gather(*(self._produce_partition(caller, topic, p, recs) for p, recs in by_partition.items()))
        reports = []
        for rec in prepared:
            err = rec if isinstance(rec, RestError) else rec.get("error")
            if err is not None:
                reports.append((err.status, {"error_code": err.error_code, "message": str(err)}))
                continue
            report = {"error_code": 200, "cluster_id": cid, "topic_name": topic, "partition_id": rec["partition"],
                      "offset": rec["offset"], "timestamp": iso_time(rec["timestamp"])}
            for part in ("key", "value"):
                if rec[part + "_type"] is not None:
                    size = rec[part]
                    report[part] = {"type": rec[part + "_type"], "size": 0 if size is None else len(size)}
            reports.append((200, report))
        if len(reports) == 1:
            status, body = reports[0]
            return web.json_response(body, status=status)
        text = "\r\n".join(json.dumps(body, separators=(",", ":")) for _, body in reports) + "\r\n"
        return web.Response(text=text, content_type="application/json")

    def _prepare(self, item, info) -> dict:
        """Validate one produce request object; returns the record to write (bytes, partition)."""
        if not isinstance(item, dict):
            raise RestError(400, "each record must be a JSON object")
        key, key_type = self._part(item.get("key"), "key", info.name)
        value, value_type = self._part(item.get("value"), "value", info.name)
        headers = []
        for h in item.get("headers") or []:
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                raise RestError(400, "each header needs a string name and a base64 value")
            v = h.get("value")
            headers.append((h["name"], None if v is None else _b64(v, f"header {h['name']}")))
        ts = item.get("timestamp")
        timestamp = parse_time(ts) if isinstance(ts, str) else None
        if ts is not None and not isinstance(ts, str):
            raise RestError(400, "timestamp must be an ISO-8601 string")
        pid = item.get("partition_id")
        if pid is not None:
            if not isinstance(pid, int) or isinstance(pid, bool) or not 0 <= pid < info.num_partitions:
                raise RestError(404, f"This server does not host this topic-partition: {info.name}-{pid}")
            partition = pid
        elif key is not None:
            partition = partition_for_key(key, info.num_partitions)
        else:
            counter = self._round_robin.setdefault(info.name, itertools.count())
            partition = next(counter) % info.num_partitions
        return {"partition": partition, "key": key, "value": value, "headers": headers, "timestamp": timestamp,
                "key_type": key_type, "value_type": value_type, "offset": -1, "error": None}

    def _part(self, spec, what: str, topic: str) -> tuple[bytes | None, str | None]:
        """(bytes or None, type or None) of a produce request's ``key``/``value`` object: an
        embedded type (:func:`_embedded`), or AVRO / JSONSCHEMA data written in the schema
        registry's wire format with the schema the spec names (``schema_id``,
        ``schema_version``, ``subject``; default: the latest of ``<topic>-<key|value>``)."""
        kind = str(spec.get("type") or "").upper() if isinstance(spec, dict) else ""
        if kind not in schema_serde.WIRE_TYPES:
            return _embedded(spec, what)
        store = self.runtime.metadata.schema_registry
        try:
            schema_id = schema_serde.schema_of(store, topic, what, spec)
            return schema_serde.encode(store, schema_id, spec.get("data")), kind
        except schema_serde.SerdeError as exc:
            raise RestError(400, f"{what}: {exc}", 42207) from None

    async def _produce_partition(self, caller: HttpCaller, topic: str, partition: int, recs: list[dict]) -> None:
        """Write ``recs`` as one batch with acks=all on the partition leader; fill in offsets,
        timestamps or errors."""
        now = int(datetime.now(tz=UTC).timestamp() * 1000)
        for r in recs:
            if r["timestamp"] is None:
                r["timestamp"] = now
        batch = build_batch([(r["key"], r["value"], r["headers"], r["timestamp"]) for r in recs])
        body = {"transactional_id": None, "acks": -1, "timeout_ms": self.runtime.config.request_timeout_ms,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
        leader = await views.find_leader(self.runtime, topic, partition)
        try:
            if leader < 0:
                raise PeerUnavailable(f"no leader for {topic}-{partition}")
            resp = await call_api(self.runtime, PRODUCE, body, node_id=leader, caller=caller)
            pr = resp.responses[0].partition_responses[0]
        except PeerUnavailable as exc:
            for r in recs:
                r["error"] = RestError(503, f"Retriable Kafka error: {exc}", 50003)
            return
        if pr.error_code:
            err = kafka_error(pr.error_code, f"produce to {topic}-{partition}" + (f": {pr.error_message}"
                                                                                 if pr.error_message else ""))
            for r in recs:
                r["error"] = err
            return
        for i, r in enumerate(recs):
            r["offset"] = pr.base_offset + i
            if pr.log_append_time_ms >= 0:
                r["timestamp"] = pr.log_append_time_ms


def _parse_concatenated(raw: bytes) -> list:
    """The JSON values of a body of concatenated JSON objects (Confluent's streaming form).

    Raises:
        RestError(400): not JSON, or more than :data:`limits.HTTP_MAX_RECORDS_PER_PRODUCE` values.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RestError(400, "request body is not UTF-8") from None
    decoder = json.JSONDecoder()
    out = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        if len(out) >= limits.HTTP_MAX_RECORDS_PER_PRODUCE:
            raise RestError(400, f"more than {limits.HTTP_MAX_RECORDS_PER_PRODUCE} records in one request")
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise RestError(400, f"request body is not JSON: {exc}") from None
        out.append(value)
    if not out:
        raise RestError(400, "empty request body: expected a JSON object per record")
    return out


def _b64(data, what: str) -> bytes:
    if not isinstance(data, str):
        raise RestError(400, f"{what}: BINARY data must be a base64 string")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RestError(400, f"{what}: BINARY data is not valid base64") from None


def _embedded(spec, what: str) -> tuple[bytes | None, str | None]:
    """(bytes or None, type or None) of a produce request's ``key``/``value`` object."""
    if spec is None:
        return None, None
    if not isinstance(spec, dict):
        raise RestError(400, f"{what} must be an object like {{\"type\": \"STRING\", \"data\": \"...\"}}")
    given = spec.get("type")
    kind = str(given or "BINARY").upper()
    if kind in SCHEMA_TYPES or any(k in spec for k in ("schema", "schema_id", "schema_version", "subject")):
        raise RestError(400, f"{what}: {kind} is not written by LiteMQ's REST API; use AVRO or JSONSCHEMA with "
                             f"a registered schema, or one of {', '.join(EMBEDDED_TYPES)}")
    if kind not in EMBEDDED_TYPES:
        raise RestError(400, f"{what}: unknown type {given!r}; expected one of {', '.join(EMBEDDED_TYPES)}")
    data = spec.get("data")
    if data is None:
        return None, kind if given else None
    if kind == "BINARY":
        out = _b64(data, what)
    elif kind == "STRING":
        if not isinstance(data, str):
            raise RestError(400, f"{what}: STRING data must be a JSON string")
        out = data.encode("utf-8")
    else:
        out = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return out, kind if given else None


def _render(data: bytes | None, fmt: str) -> dict | None:
    """A record's key or value as ``{"type", "data"}`` in ``fmt`` (see ``read_records``)."""
    if data is None:
        return None
    if fmt == "binary":
        return {"type": "BINARY", "data": base64.b64encode(data).decode()}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"type": "BINARY", "data": base64.b64encode(data).decode()}
    if fmt == "json":
        try:
            return {"type": "JSON", "data": json.loads(text)}
        except ValueError:
            pass
    return {"type": "STRING", "data": text}
