"""Decode Kafka record batches (magic 2) straight into Arrow columns.

This is the read fast path of the Spark source: no per-record Python objects are built for
keys and values. One pass in Python walks each record's varints and notes where its key and
value lie; numpy then gathers all key bytes and all value bytes with one boolean mask each,
and the Arrow ``binary`` arrays are assembled from (validity, int32 offsets, data) buffers.

Input: the ``records`` blob of one Fetch response partition (a sequence of whole batches, the
last one possibly cut short by ``max_bytes``: it is ignored). Output: a ``pyarrow.RecordBatch``
whose schema is exactly Spark's Arrow conversion of the Kafka source schema
(:data:`ARROW_SCHEMA` / :data:`ARROW_SCHEMA_HEADERS`): key binary, value binary, topic string,
partition int32, offset int64, timestamp ``timestamp[us, tz=UTC]``, timestampType int32
[, headers list<struct<key string, value binary>>].

Source: Kafka record batch format v2 (KIP-98, ``DefaultRecordBatch``/``DefaultRecord``),
control batches (attribute bit 5) are skipped as Kafka consumers do; with read_committed,
aborted transactional batches are dropped using the Fetch response's ``aborted_transactions``
exactly as Kafka's ``Fetcher`` does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from litemq.protocol import records as R
from litemq.protocol.primitives import read_varlong as _varint
from litemq.protocol.errors import CorruptRecordError, DecodeError

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
"""Arrow schema of the output without headers (``includeHeaders=false``)."""
ARROW_SCHEMA_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", HEADERS_TYPE)])
"""Arrow schema of the output with ``includeHeaders=true``."""

_CONTROL = R.CONTROL_FLAG
_TXN = R.TRANSACTIONAL_FLAG
_TS_TYPE = R.TIMESTAMP_TYPE_MASK
_CODEC = R.COMPRESSION_MASK
_HDR = R.BATCH_HEADER_BYTES
_OVERHEAD = R.LOG_OVERHEAD_BYTES


class ColumnBuilder:
    """Accumulates decoded records of one topic-partition; :meth:`flush` emits a RecordBatch.

    Args:
        topic, partition: constant columns.
        start, end: only records with ``start <= offset < end`` are kept (offsets int64).
        include_headers: build the ``headers`` column (slower: one Python tuple per header).
        read_committed: drop aborted transactional data (needs :meth:`add_aborted`).
    """

    def __init__(self, topic: str, partition: int, start: int, end: int,
                 include_headers: bool = False, read_committed: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.include_headers = include_headers
        self.read_committed = read_committed
        self._aborted: list[tuple[int, int]] = []  # (first_offset, producer_id), sorted
        self._aborting: set[int] = set()
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._offsets: list[int] = []
        self._ts: list[int] = []
        self._tstype: list[int] = []  # per record
        self._kpos: list[int] = []
        self._klen: list[int] = []
        self._vpos: list[int] = []
        self._vlen: list[int] = []
        self._headers: list = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add_aborted(self, aborted) -> None:
        """Register a Fetch response's aborted transactions (``producer_id``, ``first_offset``)."""
        for a in aborted or ():
            self._aborted.append((a.first_offset, a.producer_id))
        self._aborted.sort()

    def add_records(self, blob) -> int:
        """Decode every whole batch of a Fetch ``records`` blob.

        Returns the offset right after the last whole batch seen (control and aborted batches
        included), or -1 if the blob holds no whole batch. Raises CorruptRecordError.
        """
        if not blob:
            return -1
        mv = blob if type(blob) is memoryview else memoryview(blob)
        next_offset = -1
        for pos, h in R.iter_batches(mv, allow_trailing_partial=True):
            next_offset = h.base_offset + h.last_offset_delta + 1
            attrs = h.attributes
            if self.read_committed and attrs & _TXN:
                while self._aborted and self._aborted[0][0] <= h.last_offset:
                    self._aborting.add(self._aborted.pop(0)[1])
                if attrs & _CONTROL:
                    self._aborting.discard(h.producer_id)
                    continue
                if h.producer_id in self._aborting:
                    continue
            if attrs & _CONTROL:
                continue
            if next_offset <= self.start or h.base_offset >= self.end or h.records_count == 0:
                continue
            end = pos + h.batch_length + _OVERHEAD
            codec = attrs & _CODEC
            if codec == R.COMPRESSION_NONE:
                data = mv[pos + _HDR:end]
            else:
                data = R._decompress(codec, mv[pos + _HDR:end], R.MAX_DECOMPRESSED_BATCH_BYTES)
            try:
                self._parse(data, h)
            except (IndexError, DecodeError):
                raise CorruptRecordError(
                    f"{self.topic}-{self.partition}: record truncated in batch at offset {h.base_offset}") from None
        return next_offset

    def _parse(self, data, h) -> None:
        buf = self._buf
        base = len(buf)
        buf += data
        d = buf
        p = base
        e = len(buf)
        start, end = self.start, self.end
        base_off = h.base_offset
        base_ts = h.base_timestamp
        log_append = h.attributes & _TS_TYPE
        offs, tss = self._offsets, self._ts
        kpos, klen, vpos, vlen = self._kpos, self._klen, self._vpos, self._vlen
        want_headers = self.include_headers
        hdrs = self._headers
        rv = _varint
        n0 = len(offs)
        for _ in range(h.records_count):
            b = d[p]
            if b < 0x80:
                ln = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ln, p = rv(d, p)
            rend = p + ln
            if ln < 6 or rend > e:
                raise CorruptRecordError(f"record length {ln} with {e - p} bytes left")
            p += 1  # attributes
            b = d[p]
            if b < 0x80:
                tsd = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                tsd, p = rv(d, p)
            b = d[p]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                od, p = rv(d, p)
            o = base_off + od
            if o < start or o >= end:
                p = rend
                continue
            b = d[p]
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                kl, p = rv(d, p)
            kpos.append(p)
            klen.append(kl)
            if kl > 0:
                p += kl
            b = d[p]
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                vl, p = rv(d, p)
            vpos.append(p)
            vlen.append(vl)
            if vl > 0:
                p += vl
            offs.append(o)
            tss.append(base_ts + tsd)
            if want_headers:
                hc, p = rv(d, p)
                hl = []
                for _h in range(hc):
                    hk, p = rv(d, p)
                    key = str(d[p:p + hk], "utf-8", "replace")
                    p += hk
                    hv, p = rv(d, p)
                    if hv < 0:
                        val = None
                    else:
                        val = bytes(d[p:p + hv])
                        p += hv
                    hl.append((key, val))
                hdrs.append(hl)
                if p != rend:
                    raise CorruptRecordError("record length does not match its fields")
            elif p > rend:
                raise CorruptRecordError("record fields run past the record's length")
            p = rend
        if p != e:
            raise CorruptRecordError(f"{e - p} bytes left after the last record of a batch")
        n = len(offs) - n0
        if log_append and n:
            tss[n0:] = [h.max_timestamp] * n
        self._tstype.extend([1 if log_append else 0] * n)

    def flush(self) -> pa.RecordBatch | None:
        """The accumulated records as one RecordBatch (None if none), then start over."""
        n = len(self._offsets)
        if n == 0:
            self._buf = bytearray()
            return None
        src = np.frombuffer(self._buf, dtype=np.uint8)
        keys = _binary_column(src, self._kpos, self._klen)
        values = _binary_column(src, self._vpos, self._vlen)
        cols = [
            keys,
            values,
            _constant_string(self.topic, n),
            pa.array(np.full(n, self.partition, np.int32)),
            pa.array(np.asarray(self._offsets, np.int64)),
            pa.array(np.asarray(self._ts, np.int64) * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(np.asarray(self._tstype, np.int32)),
        ]
        if self.include_headers:
            cols.append(pa.array(self._headers, HEADERS_TYPE))
            schema = ARROW_SCHEMA_HEADERS
        else:
            schema = ARROW_SCHEMA
        self._reset()
        return pa.RecordBatch.from_arrays(cols, schema=schema)


def _binary_column(src: np.ndarray, pos: list[int], lens: list[int]) -> pa.Array:
    """Arrow ``binary`` array of ``src[pos[i]:pos[i]+lens[i]]`` (null where ``lens[i] < 0``)."""
    n = len(pos)
    L = np.asarray(lens, dtype=np.int64)
    valid = L >= 0
    all_valid = bool(valid.all())
    Lc = L if all_valid else np.where(valid, L, 0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(Lc, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise ValueError("more than 2 GiB of keys or values in one Arrow batch")
    if total == 0:
        data = np.zeros(0, np.uint8)
    elif total == len(src):
        data = src
    else:
        S = np.asarray(pos, dtype=np.int64)
        if not all_valid:
            S = S[Lc > 0]
            Lnz = Lc[Lc > 0]
        else:
            nz = Lc > 0
            S, Lnz = (S, Lc) if nz.all() else (S[nz], Lc[nz])
        delta = np.zeros(len(src) + 1, dtype=np.int8)
        delta[S] = 1
        delta[S + Lnz] -= 1
        mask = np.cumsum(delta[:-1], dtype=np.int8).view(np.bool_)
        data = src[mask]
    validity = None if all_valid else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n,
                                 [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
                                 null_count=-1 if validity is not None else 0)


def _constant_string(text: str, n: int) -> pa.Array:
    """Arrow ``string`` array of ``n`` copies of ``text``."""
    tb = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(tb)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(tb * n)], null_count=0)
