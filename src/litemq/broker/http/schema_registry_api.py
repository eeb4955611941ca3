"""The schema registry on the broker's HTTP port: Confluent Schema Registry's REST API (v1), so
confluent-kafka's ``SchemaRegistryClient`` and its Avro, JSON Schema and Protobuf serializers
work with ``{"url": "http://<broker>:<http port>"}`` and no other service.

Endpoints (Confluent's paths and answers; errors ``{"error_code", "message"}`` with Confluent's
codes): ``GET /schemas``, ``GET /contexts``, ``GET /schemas/types``, ``GET /schemas/ids/{id}`` (``/schema``, ``/subjects``,
``/versions``), ``GET /subjects``, ``GET|DELETE /subjects/{subject}`` and ``POST`` (look a schema
up), ``GET|POST /subjects/{subject}/versions``, ``GET|DELETE /subjects/{subject}/versions/{version}``
(``/schema``, ``/referencedby``), ``POST /compatibility/subjects/{subject}/versions[/{version}]``,
``GET|PUT /config``, ``GET|PUT|DELETE /config/{subject}``, ``GET /mode``. The state is cluster
metadata (:mod:`litemq.cluster.schema_registry`): a change made through any broker is answered once
this broker has applied it, so every broker serves the same ids.

Access: when the Kafka listeners need authentication, so does this API (``Authorization:
Basic``, a SASL/PLAIN or SCRAM user); any authenticated user may read and change the registry
(no per-subject ACLs).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

from litemq.broker.http.rest import RestError
from litemq.cluster import schema_registry as sr
from litemq.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
PATH_PREFIXES = ("/schemas", "/subjects", "/config", "/compatibility", "/mode", "/contexts")
"""The paths this API answers under (JSON errors, authentication as the REST API)."""


def _json(body, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def _error(exc: sr.RegistryError) -> RestError:
    return RestError(exc.status, str(exc), exc.error_code)


async def _body(request: web.Request) -> dict:
    try:
        body = json.loads(await request.text() or "{}")
    except ValueError:
        raise RestError(422, "Unrecognized field: the body is not JSON", 422) from None
    if not isinstance(body, dict):
        raise RestError(422, "the body must be a JSON object", 422)
    return body


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class SchemaRegistryApi:
    """The routes (see the module docstring) over one broker runtime."""

    def __init__(self, runtime: "HttpRuntime") -> None:
        self.runtime = runtime

    def routes(self) -> list:
        s, v = "/subjects/{subject}", "/subjects/{subject}/versions/{version}"
        return [web.get("/schemas", self.all_schemas), web.get("/contexts", self.contexts),
                web.get("/schemas/types", self.types), web.get("/schemas/ids/{id}", self.schema_by_id),
                web.get("/schemas/ids/{id}/schema", self.raw_schema_by_id),
                web.get("/schemas/ids/{id}/subjects", self.subjects_of_id),
                web.get("/schemas/ids/{id}/versions", self.versions_of_id),
                web.get("/subjects", self.subjects), web.post(s, self.lookup), web.delete(s, self.delete_subject),
                web.get(s + "/versions", self.versions), web.post(s + "/versions", self.register),
                web.get(v, self.version), web.delete(v, self.delete_version), web.get(v + "/schema", self.raw_version),
                web.get(v + "/referencedby", self.referenced_by),
                web.post("/compatibility" + v, self.compatibility),
                web.post("/compatibility" + s + "/versions", self.compatibility),
                web.get("/config", self.get_config), web.put("/config", self.put_config),
                web.get("/config/{subject}", self.get_config), web.put("/config/{subject}", self.put_config),
                web.delete("/config/{subject}", self.delete_config), web.get("/mode", self.mode)]

    @property
    def store(self) -> sr.SchemaRegistryStore:
        return self.runtime.metadata.schema_registry

    async def _change(self, action: str, **args) -> dict:
        """Plan and apply a registry change (through the metadata leader in a cluster) and
        return its reply once this broker has applied it."""
        runtime = self.runtime
        try:
            if runtime.cluster is not None:
                reply = await runtime.cluster.admin(action, **args)
            else:
                rec, reply = sr.plan(self.store, action, args)
                if rec is not None:
                    runtime.metadata.apply_registry_record(rec)
        except KafkaError as exc:
            if exc.code == ErrorCode.REQUEST_TIMED_OUT:  # no metadata leader committed it in time
                raise RestError(500, f"Operation timed out: {exc}", 50002) from None
            raise RestError(500, f"Error in the backend data store: {exc}", 50001) from None
        if reply.get("registry_error"):
            status, code, message = reply["registry_error"]
            raise RestError(int(status), str(message), int(code))
        return reply

    def _schema_id(self, request: web.Request) -> int:
        try:
            schema_id = int(request.match_info["id"])
        except ValueError:
            schema_id = -1
        if schema_id not in self.store.schemas:
            raise RestError(404, f"Schema {request.match_info['id']} not found", 40403)
        return schema_id

    def _version(self, request: web.Request, deleted: bool = False) -> tuple[str, int, int]:
        subject = unquote(request.match_info["subject"])
        try:
            n, schema_id = self.store.version(subject, request.match_info["version"], deleted=deleted)
        except sr.RegistryError as exc:
            raise _error(exc) from None
        return subject, n, schema_id

    def _entry(self, subject: str, n: int, schema_id: int) -> dict:
        return {"subject": subject, "version": n, "id": schema_id, **self.store.schemas[schema_id].to_json()}

    # ------------------------------------------------------------ schemas
    async def all_schemas(self, request: web.Request) -> web.Response:
        """Every subject version (``?subjectPrefix=``, ``?deleted=true``, ``?latestOnly=true``)."""
        store, prefix = self.store, request.query.get("subjectPrefix", "")
        deleted, latest_only = _flag(request, "deleted"), _flag(request, "latestOnly")
        out = []
        for subject in store.subject_names(deleted):
            if not subject.startswith(prefix):
                continue
            versions = store.live_versions(subject, deleted)
            for n in versions[-1:] if latest_only else versions:
                out.append(self._entry(subject, n, store.subjects[subject][n].schema_id))
        return _json(out)

    async def contexts(self, request: web.Request) -> web.Response:
        return _json(["."])  # the default context only (schema contexts are not built)

    async def types(self, request: web.Request) -> web.Response:
        return _json(list(sr.SCHEMA_TYPES))

    async def schema_by_id(self, request: web.Request) -> web.Response:
        return _json(self.store.schemas[self._schema_id(request)].to_json())

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        return web.Response(text=self.store.schemas[self._schema_id(request)].text, content_type=CONTENT_TYPE)

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        return _json(sorted({s for s, _ in self.store.versions_of_id(self._schema_id(request))}))

    async def versions_of_id(self, request: web.Request) -> web.Response:
        return _json([{"subject": s, "version": v} for s, v in self.store.versions_of_id(self._schema_id(request))])

    # ------------------------------------------------------------ subjects
    async def subjects(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        return _json([s for s in self.store.subject_names(_flag(request, "deleted")) if s.startswith(prefix)])

    async def versions(self, request: web.Request) -> web.Response:
        subject = unquote(request.match_info["subject"])
        versions = self.store.live_versions(subject, _flag(request, "deleted"))
        if not versions:
            raise _error(sr.subject_not_found(subject))
        return _json(versions)

    async def version(self, request: web.Request) -> web.Response:
        return _json(self._entry(*self._version(request, _flag(request, "deleted"))))

    async def raw_version(self, request: web.Request) -> web.Response:
        _, _, schema_id = self._version(request, _flag(request, "deleted"))
        return web.Response(text=self.store.schemas[schema_id].text, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        subject, n, _ = self._version(request)
        return _json(self.store.referencing(subject, n))

    async def register(self, request: web.Request) -> web.Response:
        subject = unquote(request.match_info["subject"])
        body = await _body(request)
        reply = await self._change("register_schema", subject=subject, body=body)
        schema_id = reply.get("id")
        if schema_id is None:  # a new version: applied here before the change was answered
            schema_id = self.store.schema_id(self._parsed(body))
        return _json({"id": schema_id})

    def _parsed(self, body: dict) -> sr.Schema:
        try:
            return sr.parse(self.store, body)
        except sr.RegistryError as exc:
            raise _error(exc) from None

    async def lookup(self, request: web.Request) -> web.Response:
        subject = unquote(request.match_info["subject"])
        body = await _body(request)
        if subject not in self.store.subject_names(deleted=_flag(request, "deleted")):
            raise _error(sr.subject_not_found(subject))
        schema = self._parsed(body)
        schema_id = self.store.schema_id(schema)
        for n, e in sorted(self.store.subjects[subject].items()):
            if e.schema_id == schema_id and (not e.deleted or _flag(request, "deleted")):
                return _json(self._entry(subject, n, schema_id))
        raise RestError(404, "Schema not found", 40403)

    async def delete_subject(self, request: web.Request) -> web.Response:
        reply = await self._change("delete_versions", subject=unquote(request.match_info["subject"]), version=None,
                                   permanent=_flag(request, "permanent"))
        return _json(reply.get("versions", []))

    async def delete_version(self, request: web.Request) -> web.Response:
        reply = await self._change("delete_versions", subject=unquote(request.match_info["subject"]),
                                   version=request.match_info["version"], permanent=_flag(request, "permanent"))
        return _json((reply.get("versions") or [0])[0])

    # ------------------------------------------------------------ compatibility
    async def compatibility(self, request: web.Request) -> web.Response:
        subject = unquote(request.match_info["subject"])
        body = await _body(request)
        store = self.store
        if "version" in request.match_info:
            if not store.live_versions(subject) and request.match_info["version"] in ("latest", "-1"):
                return _json({"is_compatible": True})
            _, n, _ = self._version(request)
            against = [n]
        else:
            against = None
        schema = self._parsed(body)
        level = store.level(subject)
        try:
            why = sr.incompatibilities(store, subject, schema, level if against is None else
                                       level.replace("_TRANSITIVE", ""), against)
        except sr.RegistryError as exc:
            raise _error(exc) from None
        out: dict = {"is_compatible": not why}
        if _flag(request, "verbose"):
            out["messages"] = why
        return _json(out)

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is not None:
            subject = unquote(subject)
            if subject not in self.store.levels and not _flag(request, "defaultToGlobal"):
                raise RestError(404, f"Subject '{subject}' does not have subject-level compatibility configured",
                                40408)
        return _json({"compatibilityLevel": self.store.level(subject)})

    async def put_config(self, request: web.Request) -> web.Response:
        body = await _body(request)
        level = str(body.get("compatibility", "")).upper()
        subject = request.match_info.get("subject")
        await self._change("set_compatibility", subject=unquote(subject) if subject else None, level=level)
        return _json({"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = unquote(request.match_info["subject"])
        if subject not in self.store.levels:
            raise RestError(404, f"Subject '{subject}' does not have subject-level compatibility configured", 40408)
        previous = self.store.levels[subject]
        await self._change("set_compatibility", subject=subject, level=None)
        return _json({"compatibilityLevel": previous})

    async def mode(self, request: web.Request) -> web.Response:
        return _json({"mode": "READWRITE"})

