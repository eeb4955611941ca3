"""The record set every client test produces and the checks applied to what is read back.

Record ``i``: key ``k{i % 97}`` (None every 50th), value ``v{i}`` padded (None when i % 70 == 1, never together with a None key),
headers ``[("idx", str(i)), ("src", client)]``, timestamp ``BASE_TS_MS + i``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

BASE_TS_MS = 1_700_000_000_000
N_RECORDS = 20_000


def key_of(i: int) -> bytes | None:
    return None if i % 50 == 0 else b"k%d" % (i % 97)


def value_of(i: int) -> bytes | None:
    return None if i % 70 == 1 else b"v%d-" % i + b"x" * (i % 40)


def headers_of(i: int, client: str) -> list[tuple[str, bytes]]:
    return [("idx", str(i).encode()), ("src", client.encode())]


@dataclass
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


def check(got: list[Got], n: int, client: str) -> None:
    """Every record once, per-partition order, key -> one partition, fields preserved."""
    assert len(got) == n, f"read {len(got)} records, produced {n}"
    by_idx = {}
    key_partition: dict[bytes, int] = {}
    last = defaultdict(lambda: (-1, -1))
    for g in got:
        hdrs = dict(g.headers)
        i = int(hdrs["idx"])
        assert i not in by_idx, f"record {i} read twice"
        by_idx[i] = g
        assert hdrs["src"] == client.encode()
        assert g.key == key_of(i), (i, g.key)
        assert g.value == value_of(i), (i, g.value)
        assert g.timestamp_ms == BASE_TS_MS + i, (i, g.timestamp_ms)
        if g.key is not None:
            assert key_partition.setdefault(g.key, g.partition) == g.partition, f"key {g.key!r} in two partitions"
        prev_offset, prev_i = last[g.partition]
        assert g.offset > prev_offset and i > prev_i, f"order broken in partition {g.partition}"
        last[g.partition] = (g.offset, i)
    assert sorted(by_idx) == list(range(n))
    assert len(last) == 3, f"records landed in partitions {sorted(last)}, expected 0..2"
