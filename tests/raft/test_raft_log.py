"""EntrySeq / MemoryLog (the in-memory LogView) against a simple model, plus value types."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litemq.raft import Entry, EntryKind, EntrySeq, MemoryLog, Snapshot, decode_voters, encode_voters


def _model_terms(entries):
    return {o: e.term for e in entries for o in range(e.offset, e.end_offset)}


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=4)),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("compact"), st.integers(0, 40)),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_memory_log_matches_a_model(ops_):
    log = MemoryLog()
    model: list[Entry] = []  # entries after the snapshot
    snap = Snapshot()
    term = 1
    for op, arg in ops_:
        if op == "append":
            new = []
            off = log.log_end_offset
            for count, bump in arg:
                term += bump
                new.append(Entry(off, term, b"x" * count, count))
                off += count
            log.append(new)
            model.extend(new)
        elif op == "truncate":
            starts = [e.offset for e in model]
            if not starts:
                continue
            cut = starts[arg % len(starts)]
            log.truncate_to(cut)
            model = [e for e in model if e.offset < cut]
            term = max([snap.term] + [e.term for e in model]) if model else max(term, snap.term)
        else:
            if not model:
                continue
            e = model[arg % len(model)]
            snap = Snapshot(e.last_offset, e.term, frozenset({1}), None)
            log.compact(snap)
            model = [x for x in model if x.offset > e.last_offset]
        terms = _model_terms(model)
        assert log.log_start_offset == snap.offset + 1
        assert log.log_end_offset == (model[-1].end_offset if model else snap.offset + 1)
        assert log.term_at(snap.offset) == snap.term
        for o in range(snap.offset + 1, log.log_end_offset):
            assert log.term_at(o) == terms[o]
        assert log.term_at(log.log_end_offset) is None
        for t in range(0, term + 2):
            want = next((o for o in sorted(terms) if terms[o] > t), log.log_end_offset)
            if snap.term > t:
                want = log.log_start_offset
            assert log.end_offset_for_epoch(t) == want
        if model:
            mid = model[len(model) // 2]
            got = log.entries(mid.last_offset, 1 << 40, 1 << 40)
            assert got == model[len(model) // 2:]
            assert log.entries(mid.offset, 1 << 40, 1) == [mid]  # always at least one entry


def test_entry_seq_rejects_gaps_and_splits():
    seq = EntrySeq(10)
    seq.extend([Entry(10, 1, count=3), Entry(13, 1)])
    with pytest.raises(ValueError):
        seq.extend([Entry(20, 1)])
    with pytest.raises(ValueError):
        seq.truncate_from(11)  # inside an entry
    assert seq.term_at(12) == 1 and seq.entry_at(12).offset == 10 and seq.end == 14
    seq.truncate_from(13)
    assert seq.end == 13


def test_entries_budget_and_end():
    log = MemoryLog(entries=[Entry(i, 1, b"abcd") for i in range(10)])
    assert len(log.entries(0, 100, 8)) == 2
    assert len(log.entries(0, 3, 1 << 30)) == 3
    with pytest.raises(ValueError):
        MemoryLog(Snapshot(4, 1)).entries(2, 10, 10)


def test_voters_codec_round_trip_and_bounds():
    assert decode_voters(encode_voters({3, 1, 2})) == {1, 2, 3}
    with pytest.raises(ValueError):
        decode_voters(b"\x00\x00\x00\x05\x00")
    with pytest.raises(ValueError):
        decode_voters(b"\xff\xff\xff\xff")


def test_entry_properties():
    e = Entry(100, 3, b"batch", 7, EntryKind.DATA)
    assert (e.last_offset, e.end_offset, e.size) == (106, 107, 5)
    assert Entry(0, 1, object()).size == 0
