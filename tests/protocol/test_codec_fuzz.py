"""Fuzzing the decoders: random bytes and mutated valid encodings must raise only DecodeError.

Seeded (deterministic) and bounded so the whole file runs in a few seconds.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest

from litemq import limits
from litemq.protocol.errors import DecodeError
from litemq.protocol.frames import decode_request_header, decode_response
from litemq.protocol.messages import API_KEYS, request_spec, response_spec
from litemq.protocol.schema import FieldDef, StructDef

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _value(f: FieldDef, v: int, rnd: random.Random, depth: int):
    if f.is_nullable(v) and rnd.random() < 0.2:
        return None
    if f.is_array:
        n = rnd.randint(0, 3 if depth < 2 else 1)
        if f.struct is not None:
            return [_struct(f.struct, v, rnd, depth + 1) for _ in range(n)]
        return [_scalar(f.elem, rnd) for _ in range(n)]
    if f.struct is not None:
        return _struct(f.struct, v, rnd, depth + 1)
    return _scalar(f.elem, rnd)


def _scalar(t: str, rnd: random.Random):
    if t in _INT_BITS:
        b = _INT_BITS[t] - 1
        return rnd.randint(-(2**b), 2**b - 1)
    if t in ("uint16",):
        return rnd.randint(0, 65535)
    if t == "bool":
        return rnd.random() < 0.5
    if t == "float64":
        return rnd.random()
    if t == "string":
        return "".join(rnd.choice("ab-ü") for _ in range(rnd.randint(0, 5)))
    if t in ("bytes", "records"):
        return rnd.randbytes(rnd.randint(0, 8))
    if t == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    raise AssertionError(t)


def _struct(sd: StructDef, v: int, rnd: random.Random, depth: int = 0) -> dict:
    return {f.attr: _value(f, v, rnd, depth) for f in sd.fields if f.present(v)}


def _mutations(data: bytes, rnd: random.Random, n: int):
    for _ in range(n):
        b = bytearray(data)
        op = rnd.randrange(5)
        if op == 0 and b:  # flip bytes
            for _ in range(rnd.randint(1, 3)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
        elif op == 1 and b:  # truncate
            del b[rnd.randrange(len(b)) :]
        elif op == 2:  # insert
            pos = rnd.randint(0, len(b))
            b[pos:pos] = rnd.randbytes(rnd.randint(1, 4))
        elif op == 3 and b:  # huge / negative length-like values
            pos = rnd.randrange(len(b))
            b[pos : pos + 4] = rnd.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f"])
        else:  # splice in a varint-ish run
            pos = rnd.randint(0, len(b))
            b[pos:pos] = b"\xff" * rnd.randint(1, 12)
        yield bytes(b)


def _check(spec, data: bytes, v: int) -> None:
    try:
        spec.decode(data, v)
    except DecodeError:
        pass


def _cases():
    for name, key in sorted(API_KEYS.items()):
        yield pytest.param(request_spec(key), id=f"{name}-req")
        yield pytest.param(response_spec(key), id=f"{name}-resp")


@pytest.mark.parametrize("spec", list(_cases()))
def test_decode_raises_only_decode_error(spec):
    rnd = random.Random(spec.name)
    for v in range(spec.min_version, spec.max_version + 1):
        for _ in range(12):
            _check(spec, rnd.randbytes(rnd.randint(0, 40)), v)
        valid = [spec.encode({}, v)] + [spec.encode(_struct(spec._msg.root, v, rnd), v) for _ in range(3)]
        for data in valid:
            for m in _mutations(data, rnd, 8):
                _check(spec, m, v)


def test_huge_counts_rejected_before_allocation():
    spec = request_spec(API_KEYS["Metadata"])
    # v1: topics array of 2**31-1 elements in a 4-byte frame
    with pytest.raises(DecodeError, match="array length"):
        spec.decode(b"\x7f\xff\xff\xff", 1)
    # v9 (flexible): compact array count as a 5-byte varint, way beyond the bytes left
    with pytest.raises(DecodeError):
        spec.decode(b"\xff\xff\xff\xff\x07" + b"\x00" * 10, 9)
    # a count within the bytes left but above the limit
    n = limits.MAX_ARRAY_ELEMENTS + 1
    data = n.to_bytes(4, "big") + bytes(4 * n)
    t = time.perf_counter()
    with pytest.raises(DecodeError, match="limit"):
        request_spec(API_KEYS["DeleteGroups"]).decode(data, 0)
    assert time.perf_counter() - t < 1.0


def test_bad_varints_and_lengths():
    spec = request_spec(API_KEYS["ApiVersions"])
    with pytest.raises(DecodeError, match="varint"):
        spec.decode(b"\xff\xff\xff\xff\xff\xff\x01", 3)  # 6-byte varint
    with pytest.raises(DecodeError):
        spec.decode(b"\x00", 3)  # null compact string in non-nullable field
    produce = request_spec(0)
    with pytest.raises(DecodeError, match="invalid string length"):
        produce.decode(b"\xff\xfe" + bytes(20), 3)  # -2 length for nullable string
    with pytest.raises(DecodeError, match="records length"):
        produce.decode(b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01\x00", 3)
    with pytest.raises(DecodeError, match="malformed"):
        request_spec(API_KEYS["FindCoordinator"]).decode(b"\x00\x02\xff\xfe", 0)  # bad UTF-8


def test_header_fuzz_only_decode_error():
    rnd = random.Random(7)
    for _ in range(3000):
        frame = rnd.randbytes(rnd.randint(0, 30))
        try:
            decode_request_header(frame)
        except DecodeError:
            pass
        try:
            decode_response(rnd.choice([0, 1, 3, 18]), rnd.randint(0, 12), frame)
        except DecodeError:
            pass
