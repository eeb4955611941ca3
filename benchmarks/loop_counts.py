"""Event-loop turns and callbacks per record in benchmark child processes (issue 19).

``enable()`` puts a ``sitecustomize`` on the ``PYTHONPATH`` of every process this one starts
afterwards (brokers, floor nodes). In each, it counts ``BaseEventLoop._run_once`` calls (event-loop
turns) and ``Handle._run`` calls (callbacks, timer callbacks included), and a daemon thread writes
``<wall time> <turns> <callbacks>`` to ``<dir>/<pid>.txt`` every ``SAMPLE_S``. ``per_record()``
interpolates each process's counters at the start and end of a measured window and returns the
turns and callbacks per record over all of them. The counting costs a Python call per turn and per
callback (well under 1 % of a broker's CPU per record).

Used by ``bench_rate_cpu.py --loop-counts`` and ``bench_replication_floor.py --loop-counts``;
figures in docs/benchmarks-cluster.md ("Eleventh round").
"""

from __future__ import annotations

import bisect
import os
import tempfile
import time
from pathlib import Path

SAMPLE_S = 0.1
ENV = "LITEMQ_LOOP_COUNTS_DIR"

_SITECUSTOMIZE = f'''
import os
import threading
import time

_dir = os.environ.get({ENV!r})
if _dir:
    import asyncio.base_events as _be
    import asyncio.events as _ev

    _counts = [0, 0]
    _run_once = _be.BaseEventLoop._run_once
    _run = _ev.Handle._run

    def _counted_run_once(self):
        _counts[0] += 1
        return _run_once(self)

    def _counted_run(self):
        _counts[1] += 1
        return _run(self)

    _be.BaseEventLoop._run_once = _counted_run_once
    _ev.Handle._run = _counted_run

    def _write():
        with open(os.path.join(_dir, "%d.txt" % os.getpid()), "w", buffering=1) as f:
            while True:
                f.write("%.4f %d %d\\n" % (time.time(), _counts[0], _counts[1]))
                time.sleep({SAMPLE_S})

    threading.Thread(target=_write, name="loop-counts", daemon=True).start()
'''


def enable() -> Path:
    """Count in every process started from now on; returns the directory of their counters."""
    d = Path(tempfile.mkdtemp(prefix="loop-counts-"))
    (d / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    os.environ[ENV] = str(d)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(d), os.environ.get("PYTHONPATH")) if p)
    return d


def await_last_sample() -> None:
    """Wait until every counting process has written a sample after now (call at the end of a
    measured window, before the processes stop: :func:`per_record` interpolates between samples)."""
    time.sleep(2 * SAMPLE_S)


def _at(rows: list[tuple[float, int, int]], t: float) -> tuple[float, float]:
    """(turns, callbacks) at wall time ``t``, interpolated between the samples around it."""
    times = [r[0] for r in rows]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return float(rows[0][1]), float(rows[0][2])
    if i >= len(rows):
        return float(rows[-1][1]), float(rows[-1][2])
    (t0, a0, b0), (t1, a1, b1) = rows[i - 1], rows[i]
    w = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
    return a0 + (a1 - a0) * w, b0 + (b1 - b0) * w


def per_record(d: Path, pids, start: float, end: float, records: int) -> tuple[float, float]:
    """Event-loop turns and callbacks per record over processes ``pids`` between wall times
    ``start`` and ``end`` (``time.time()``). Raises ValueError if a process wrote no counters."""
    turns = callbacks = 0.0
    for pid in pids:
        path = d / f"{pid}.txt"
        rows = [(float(t), int(a), int(b)) for t, a, b in (line.split() for line in path.read_text().splitlines()
                                                           if line.count(" ") == 2)] if path.exists() else []
        if not rows:
            raise ValueError(f"process {pid} wrote no loop counters to {path}")
        a0, b0 = _at(rows, start)
        a1, b1 = _at(rows, end)
        turns += a1 - a0
        callbacks += b1 - b0
    return turns / max(records, 1), callbacks / max(records, 1)
