"""Hypothesis round trips for every request and response schema at every valid version.

Random dicts are generated from the schema (only fields present in the version), encoded,
decoded and compared field by field; the decoded object must re-encode to the same bytes.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litemq.protocol.messages import API_KEYS, request_spec, response_spec
from litemq.protocol.schema import FieldDef, MessageSpec, StructDef

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_bin = st.binary(max_size=12)
_uuid = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())


def _scalar(t: str):
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return _text
    if t == "bytes":
        return _bin
    if t == "records":
        return _bin
    if t == "uuid":
        return _uuid
    raise AssertionError(t)


def struct_strategy(sd: StructDef, v: int, depth: int = 0):
    fields = {}
    for f in sd.fields:
        if f.present(v):
            fields[f.attr] = field_strategy(f, v, depth)
    return st.fixed_dictionaries({}, optional=fields)


def field_strategy(f: FieldDef, v: int, depth: int):
    if f.is_array:
        if f.struct is not None:
            elem = struct_strategy(f.struct, v, depth + 1)
        else:
            elem = _scalar(f.elem)
        s = st.lists(elem, max_size=3 if depth < 2 else 1)
    elif f.struct is not None:
        s = struct_strategy(f.struct, v, depth + 1)
    else:
        s = _scalar(f.elem)
    if f.is_nullable(v):
        s = st.one_of(st.none(), s)
    return s


def _same(expected, actual, path: str) -> None:
    if isinstance(expected, dict):
        for k, ev in expected.items():
            _same(ev, getattr(actual, k), f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            _same(e, a, f"{path}[{i}]")
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


def _cases():
    for name, key in sorted(API_KEYS.items()):
        for kind, getter in (("req", request_spec), ("resp", response_spec)):
            spec = getter(key)
            yield pytest.param(spec, id=f"{name}-{kind}")


_strategies: dict = {}


def _roundtrip(spec: MessageSpec, v: int, value: dict) -> None:
    data = spec.encode(value, v)
    msg, end = spec.decode(data, v)
    assert end == len(data)
    _same(value, msg, spec.name)
    assert spec.encode(msg, v) == data
    # trailing bytes are tolerated and not consumed
    msg2, end2 = spec.decode(data + b"\x01\x02\x03", v)
    assert end2 == len(data) and msg2 == msg


@pytest.mark.parametrize("spec", list(_cases()))
def test_roundtrip_all_versions(spec: MessageSpec):
    versions = list(range(spec.min_version, spec.max_version + 1))

    @settings(
        max_examples=10 * len(versions),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data):
        v = data.draw(st.sampled_from(versions), label="version")
        key = (spec.name, v)
        if key not in _strategies:
            _strategies[key] = struct_strategy(spec._msg.root, v)
        _roundtrip(spec, v, data.draw(_strategies[key], label="message"))

    # defaults encode/decode at every version (deterministic sweep)
    for v in versions:
        data = spec.encode({}, v)
        msg, end = spec.decode(data, v)
        assert end == len(data) and msg == spec.cls()
    run()
