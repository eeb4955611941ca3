"""The schema registry's state as every broker applies it (pure): ids and versions decided when
a record is applied (so racing registrations never share an id), records applied twice change
nothing, transitive compatibility levels check every version, and the bounds hold."""

from __future__ import annotations

import json

import pytest

from litemq import limits
from litemq.cluster import schema_registry as sr
from litemq.protocol.errors import KafkaError


def _record(name: str, *fields: tuple[str, str, object]) -> str:
    out = []
    for fname, ftype, default in fields:
        field = {"name": fname, "type": ftype}
        if default is not None:
            field["default"] = default
        out.append(field)
    return json.dumps({"type": "record", "name": name, "fields": out})


def _register(store, subject: str, text: str) -> tuple[dict | None, dict]:
    rec, reply = sr.plan(store, "register_schema", {"subject": subject, "body": {"schema": text}})
    if rec is not None:
        sr.apply(store, rec)
    return rec, reply


def test_racing_registrations_get_ids_when_applied():
    store = sr.SchemaRegistryStore()
    a = sr.plan(store, "register_schema", {"subject": "a", "body": {"schema": _record("A", ("x", "int", None))}})[0]
    b = sr.plan(store, "register_schema", {"subject": "b", "body": {"schema": _record("B", ("x", "int", None))}})[0]
    for rec in (a, b, a):  # both planned against the same state; the first applied twice
        sr.apply(store, rec)
    assert {s: store.live_versions(s) for s in ("a", "b")} == {"a": [1], "b": [1]}
    assert sorted(store.schemas) == [1, 2]
    assert store.version("a", "latest") == (1, 1) and store.version("b", 1) == (1, 2)
    copy = sr.SchemaRegistryStore.from_json(store.to_json())
    assert copy.to_json() == store.to_json() and copy.bytes == store.bytes


def test_transitive_levels_check_every_version():
    store = sr.SchemaRegistryStore()
    _register(store, "s", _record("R", ("a", "int", None)))
    _register(store, "s", _record("R", ("a", "int", None), ("b", "string", "x")))
    _register(store, "s", _record("R", ("b", "string", "x")))  # BACKWARD with the latest only: fine
    assert store.live_versions("s") == [1, 2, 3]
    newest = sr.Schema(sr.AVRO, json.dumps(json.loads(_record("R", ("a", "int", None), ("b", "string", "x"))),
                                           separators=(",", ":")))
    assert sr.incompatibilities(store, "s", newest, "BACKWARD") != []  # v3 has no a: a has no default
    assert sr.incompatibilities(store, "s", newest, "FORWARD") == []
    assert len(sr.incompatibilities(store, "s", newest, "FULL_TRANSITIVE")) == 1  # the backward one with v3
    rec, reply = sr.plan(store, "set_compatibility", {"subject": "s", "level": "BACKWARD_TRANSITIVE"})
    sr.apply(store, rec)
    _, reply = _register(store, "s", _record("R", ("c", "long", None)))
    assert reply["registry_error"][:2] == [409, 409]
    assert sr.plan(store, "set_compatibility", {"subject": None, "level": "SIDEWAYS"})[1]["registry_error"][1] == 42203


def test_bounds():
    store = sr.SchemaRegistryStore()
    huge = json.dumps({"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(limits.MAX_SCHEMA_BYTES // 4)]})
    _, reply = _register(store, "s", huge)
    assert reply["registry_error"][:2] == [422, 42201]
    _, reply = sr.plan(store, "register_schema", {"subject": "", "body": {"schema": '"int"'}})
    assert reply["registry_error"][1] == 42208
    store.subjects["full"] = {n: sr.Version(1) for n in range(1, limits.MAX_SCHEMA_VERSIONS + 1)}
    with pytest.raises(KafkaError):
        sr.apply(store, {"type": "register_schema", "subject": "t", "schema_type": "AVRO", "schema": '"int"',
                         "references": []})
    assert "t" not in store.subjects
