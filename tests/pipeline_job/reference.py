"""Plain-Python reference counts of a log file, independent of litemq.pipeline.formats: what the
job's aggregates must equal."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import datetime, timezone

_ACCESS = re.compile(r'^\S+ \S+ \S+ \[([^\]]+)\] "(?:\S+) (\S+)[^"]*" (\d{3}) (\d+|-)')
_HDFS = re.compile(r"^(\d{6}) (\d{6}) \d+ (\w+) ")


def access_counts(path) -> dict:
    """Per minute (UTC, ``datetime``): lines, status classes, bytes, 5xx; plus path totals."""
    per = defaultdict(lambda: Counter())
    paths = Counter()
    with open(path, "rb") as fh:
        for raw in fh:
            line = raw.rstrip(b"\r\n").decode("utf-8", "replace")
            if not line.strip():
                continue
            m = _ACCESS.match(line)
            assert m, line
            t = datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S %z").astimezone(timezone.utc)
            minute = t.replace(second=0, tzinfo=None)
            c = per[minute]
            status = int(m.group(3))
            c["lines"] += 1
            c[f"status_{status // 100}xx"] += 1
            c["bytes"] += 0 if m.group(4) == "-" else int(m.group(4))
            c["errors"] += status >= 500
            c["warns"] += 400 <= status < 500
            paths[m.group(2).split("?")[0]] += 1
    return {"per_minute": dict(per), "paths": paths}


def hdfs_counts(path) -> dict:
    per = defaultdict(lambda: Counter())
    with open(path, "rb") as fh:
        for raw in fh:
            line = raw.rstrip(b"\r\n").decode()
            m = _HDFS.match(line)
            t = datetime.strptime(m.group(1) + m.group(2), "%y%m%d%H%M%S")
            c = per[t.replace(second=0)]
            c["lines"] += 1
            c["errors"] += m.group(3) in ("ERROR", "FATAL")
            c["warns"] += m.group(3) in ("WARN", "WARNING")
    return {"per_minute": dict(per)}
