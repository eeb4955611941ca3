"""Format detection and per-line parsing (litemq.pipeline.formats).

Ground truth: the loghub 2k samples, read in place from the ``loghub_dir`` fixture's folder
(``LITEMQ_LOGHUB_DIR``, default ``<repo>/../shared/data``; see ``conftest.py``: loghub is
research-use-only and never copied into the repo; without it these tests skip, under ``CI=true``
they fail). The access-log checks use the bundled demo file.
"""

from __future__ import annotations

import pickle
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from litemq.pipeline import demo_data
from litemq.pipeline.accuracy import FIELD_CHECKS, SYSTEMS, YEARS, read_csv, read_lines
from litemq.pipeline.formats import (
    FORMATS,
    FormatSpec,
    ParsedLine,
    detect_format,
    normalise_level,
    parse_line,
)


def _load(loghub_dir: Path, system: str) -> tuple[list[str], list[dict]]:
    base = loghub_dir / "loghub" / system
    return read_lines(base / f"{system}_2k.log"), read_csv(base / f"{system}_2k.log_structured.csv")


@pytest.fixture(scope="module")
def loghub_parsed(loghub_dir) -> dict[str, tuple[list[ParsedLine], list[dict], list[str]]]:
    out = {}
    for system, fmt in SYSTEMS.items():
        lines, rows = _load(loghub_dir, system)
        out[system] = ([parse_line(ln, fmt, year=YEARS.get(system)) for ln in lines], rows, lines)
    return out


# ---------------------------------------------------------------------------------------------
# Ground truth: header fields and content


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_fields_match_loghub_ground_truth(system, loghub_parsed):
    parsed, rows, _ = loghub_parsed[system]
    assert len(parsed) == len(rows) == 2000
    assert all(p.matched for p in parsed)
    for chk in FIELD_CHECKS[system]:
        bad = [(i, chk.actual(p), chk.expected(r))
               for i, (p, r) in enumerate(zip(parsed, rows)) if chk.actual(p) != chk.expected(r)]
        rate = 1 - len(bad) / len(rows)
        assert rate >= 0.99, f"{system} {chk.label}: {rate:.2%} equal; first mismatches {bad[:3]}"
    content_eq = sum(p.message == r["Content"] for p, r in zip(parsed, rows)) / len(rows)
    assert content_eq >= 0.99, f"{system} Content: {content_eq:.2%}"


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_level_and_component_columns_are_checked(system, loghub_dir):
    """Every loghub system with a Level/Component column has a check for it (by its meaning)."""
    lines, rows = _load(loghub_dir, system)
    labels = {c.label for c in FIELD_CHECKS[system]}
    for col in ("Level", "Component"):
        if col in rows[0]:
            assert col in labels


def _gt_ts(system: str, r: dict) -> int:
    """Ground-truth timestamp (UTC ms) from the structured CSV's own columns, via datetime."""
    def dt(s: str, f: str) -> int:
        d = datetime.strptime(s, f).replace(tzinfo=timezone.utc)
        return int(d.timestamp() * 1000 + 0.5)

    y = YEARS.get(system)
    match system:
        case "HDFS":
            return dt(f"{r['Date']} {r['Time']}", "%y%m%d %H%M%S")
        case "Hadoop" | "Zookeeper":
            return dt(f"{r['Date']} {r['Time']}", "%Y-%m-%d %H:%M:%S,%f")
        case "Spark":
            return dt(f"{r['Date']} {r['Time']}", "%y/%m/%d %H:%M:%S")
        case "BGL":
            return int(r["Timestamp"]) * 1000 + int(r["Time"][20:23])
        case "HPC":
            return int(r["Time"]) * 1000
        case "Thunderbird":
            return int(r["Timestamp"]) * 1000
        case "Windows":
            return dt(f"{r['Date']} {r['Time']}", "%Y-%m-%d %H:%M:%S")
        case "Linux" | "Mac":
            return dt(f"{y} {r['Month']} {r['Date']} {r['Time']}", "%Y %b %d %H:%M:%S")
        case "OpenSSH":
            return dt(f"{y} {r['Date']} {r['Day']} {r['Time']}", "%Y %b %d %H:%M:%S")
        case "Android":
            return dt(f"{y}-{r['Date']} {r['Time']}", "%Y-%m-%d %H:%M:%S.%f")
        case "HealthApp":
            d, _, t = r["Time"].partition("-")
            h, mi, s, ms = (int(x) for x in t.split(":"))
            return dt(f"{d} {h}:{mi}:{s}", "%Y%m%d %H:%M:%S") + ms
        case "Apache":
            return dt(r["Time"], "%a %b %d %H:%M:%S %Y")
        case "Proxifier":
            return dt(f"{y}.{r['Time']}", "%Y.%m.%d %H:%M:%S")
        case "OpenStack":
            return dt(f"{r['Date']} {r['Time']}", "%Y-%m-%d %H:%M:%S.%f")
    raise AssertionError(system)


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_timestamps_match_ground_truth_columns(system, loghub_parsed):
    parsed, rows, _ = loghub_parsed[system]
    bad = [(i, p.timestamp_ms, _gt_ts(system, r))
           for i, (p, r) in enumerate(zip(parsed, rows)) if p.timestamp_ms != _gt_ts(system, r)]
    assert not bad, bad[:3]


# ---------------------------------------------------------------------------------------------
# Detection


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_detect_format_from_first_50_lines(system, loghub_dir):
    lines, _ = _load(loghub_dir, system)
    assert detect_format(lines[:50]) == SYSTEMS[system]


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_detect_format_from_other_windows(system, loghub_dir):
    lines, _ = _load(loghub_dir, system)
    for start in (500, 1000, 1950):
        assert detect_format(lines[start:start + 50]) == SYSTEMS[system], start


def test_detect_format_tolerates_continuation_lines(loghub_dir):
    """Stack-trace / continuation lines mixed in (a third of the sample) do not change the answer."""
    lines, _ = _load(loghub_dir, "Hadoop")
    junk = ["\tat org.apache.hadoop.ipc.Client.call(Client.java:1468)", "java.io.IOException: x"]
    mixed = []
    for i, ln in enumerate(lines[:40]):
        mixed += [ln, junk[i % 4 // 2]] if i % 2 else [ln]
    assert len(mixed) == 60
    assert detect_format(mixed) == "hadoop"


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_levels_are_normalised(system, loghub_parsed):
    parsed, _, _ = loghub_parsed[system]
    assert {p.level for p in parsed} <= {None, "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}


def test_detect_format_access_log_and_unknown():
    lines = list(demo_data.iter_access_log_lines())
    assert detect_format(lines[:50]) == "apache_access"
    assert detect_format([]) == "unknown"
    assert detect_format(["", "   "]) == "unknown"
    assert detect_format(["hello world", "just some text", "no format here"]) == "unknown"


def test_format_examples_parse_and_detect():
    """Every FORMATS entry's example line matches its own regex and is detected as itself."""
    assert {s.name for s in FORMATS.values()} == set(FORMATS)
    for name, spec in FORMATS.items():
        assert isinstance(spec, FormatSpec) and spec.description
        p = parse_line(spec.example, name, year=2020)
        assert p.matched, name
        assert p.timestamp_ms is not None, name
        assert detect_format([spec.example]) == name, name


# ---------------------------------------------------------------------------------------------
# parse_line behaviour


def test_unknown_format_name_raises():
    with pytest.raises(ValueError, match="unknown log format"):
        parse_line("x", "nope")


def test_unmatched_line_is_kept_as_message():
    p = parse_line("  not an hdfs line\r\n", "hdfs")
    assert p == ParsedLine("hdfs", "not an hdfs line", False)
    q = parse_line("anything at all\n", "unknown")
    assert (q.format, q.message, q.matched, q.timestamp_ms) == ("unknown", "anything at all", False, None)


def test_crlf_and_year_handling():
    line = "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass; user unknown \r\n"
    p = parse_line(line, "linux", year=2005)
    assert (p.host, p.component, p.pid, p.message) == ("combo", "sshd(pam_unix)", "19939",
                                                       "check pass; user unknown")
    assert p.timestamp_ms == int(datetime(2005, 6, 14, 15, 16, 1, tzinfo=timezone.utc).timestamp() * 1000)



def _latest_not_after(month: int, day: int, tm: tuple[int, int, int], bound: datetime) -> datetime:
    """The latest ``month``/``day`` ``tm`` (UTC) at or before ``bound``, by walking back years."""
    for year in range(bound.year + 1, bound.year - 9, -1):
        try:
            d = datetime(year, month, day, *tm, tzinfo=timezone.utc)
        except ValueError:  # Feb 29 of a common year
            continue
        if d <= bound:
            return d
    raise AssertionError("no such date")


@pytest.mark.parametrize("days_from_now", [-400, -200, -40, -1, 0, 0.5, 2, 40, 200])
def test_yearless_timestamps_are_never_dated_more_than_a_day_ahead(days_from_now):
    """Without ``year``, a syslog, Android or Proxifier line is dated in the latest year that
    does not put it more than a day after now (a December line read in January is last year's;
    the demo dated loghub's OpenSSH "Dec 10" lines 2 weeks into the future on Nov 26)."""
    when = datetime.now(timezone.utc) + timedelta(days=days_from_now)
    tm = (when.hour, when.minute, when.second)
    lines = {
        "linux": f"{when:%b} {when.day:2d} {when:%H:%M:%S} combo sshd(pam_unix)[19939]: check pass",
        "openssh": f"{when:%b} {when.day:2d} {when:%H:%M:%S} LabSZ sshd[24200]: reverse mapping checking",
        "android": f"{when:%m-%d %H:%M:%S}.123  1702  2395 D WindowManager: printFreezingDisplayLogs",
        "proxifier": f"[{when:%m.%d %H:%M:%S}] chrome.exe - proxy.cse.cuhk.edu.hk:5070 open through proxy",
    }
    bound = datetime.now(timezone.utc) + timedelta(days=1)
    expected = _latest_not_after(when.month, when.day, tm, bound)
    for fmt, line in lines.items():
        p = parse_line(line, fmt)
        assert p.matched, (fmt, line)
        got = datetime.fromtimestamp(p.timestamp_ms // 1000, timezone.utc)
        assert got == expected, (fmt, line, got, expected)
        assert p.timestamp_ms <= (datetime.now(timezone.utc) + timedelta(days=1)).timestamp() * 1000
    if not (when.month == 2 and when.day == 29):  # an explicit year always wins
        assert parse_line(lines["linux"], "linux", year=2005).timestamp_ms == int(
            datetime(2005, when.month, when.day, *tm, tzinfo=timezone.utc).timestamp() * 1000)


def test_yearless_feb_29_is_dated_in_the_latest_leap_year():
    p = parse_line("Feb 29 10:00:00 h prog[1]: x", "linux")
    got = datetime.fromtimestamp(p.timestamp_ms // 1000, timezone.utc)
    assert (got.month, got.day) == (2, 29)
    assert got <= datetime.now(timezone.utc) + timedelta(days=1)
    assert got.year > datetime.now(timezone.utc).year - 5
    assert parse_line("Feb 30 10:00:00 h prog[1]: x", "linux").timestamp_ms is None


def test_invalid_date_gives_none_timestamp():
    p = parse_line("Feb 30 10:00:00 h prog[1]: x", "linux", year=2021)
    assert p.matched and p.timestamp_ms is None
    assert parse_line("Feb 29 10:00:00 h prog[1]: x", "linux", year=2020).timestamp_ms is not None
    assert parse_line("Feb 29 10:00:00 h prog[1]: x", "linux", year=2021).timestamp_ms is None


def test_zookeeper_component_is_the_class():
    line = ("2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:"
            "FastLeaderElection@774] - Notification time out: 3200")
    p = parse_line(line, "zookeeper")
    assert (p.component, p.thread, p.level, p.extra) == (
        "FastLeaderElection", "QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181", "INFO", {"line": "774"})


def test_apache_error_24_style():
    line = ("[Wed Oct 11 14:32:52.123456 2000] [core:error] [pid 35708:tid 4328636416] "
            "[client 72.15.99.187] File does not exist: /usr/local/apache2/htdocs/favicon.ico")
    p = parse_line(line, "apache_error")
    assert (p.level, p.level_raw, p.component, p.pid) == ("ERROR", "error", "core", "35708")
    assert p.message.startswith("[client 72.15.99.187] File does not exist")
    assert p.timestamp_ms == int(datetime(2000, 10, 11, 14, 32, 52, tzinfo=timezone.utc).timestamp()) * 1000 + 123


@pytest.mark.parametrize("raw,norm", [
    ("INFO", "INFO"), ("Info", "INFO"), ("notice", "INFO"), ("I", "INFO"), ("D", "DEBUG"),
    ("V", "TRACE"), ("W", "WARN"), ("WARNING", "WARN"), ("E", "ERROR"), ("SEVERE", "ERROR"),
    ("error", "ERROR"), ("FATAL", "FATAL"), ("crit", "FATAL"), ("weird", "WEIRD"), (None, None),
])
def test_normalise_level(raw, norm):
    assert normalise_level(raw) == norm


def test_parsed_line_pickles_and_to_dict():
    p = parse_line("081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1", "hdfs")
    assert pickle.loads(pickle.dumps(p)) == p
    assert pickle.loads(pickle.dumps(parse_line)) is parse_line
    d = p.to_dict()
    assert d["level"] == "INFO" and d["component"] == "dfs.DataNode$PacketResponder" and d["pid"] == "148"


# ---------------------------------------------------------------------------------------------
# Access log (bundled demo file)


@pytest.fixture(scope="module")
def access_lines() -> list[str]:
    return list(demo_data.iter_access_log_lines())


def test_demo_data_is_bundled_with_attribution():
    p = demo_data.access_log_path()
    assert p.stat().st_size == 2_370_789
    here = p.parent
    assert (here / "LICENSE.elastic-examples.txt").is_file()
    assert "elastic/examples" in (here / "README.md").read_text()


def test_access_log_every_line_parses(access_lines):
    assert len(access_lines) == 10_000
    parsed = [parse_line(ln, "apache_access") for ln in access_lines]
    assert all(p.matched and p.timestamp_ms and p.method and p.path and p.status for p in parsed)
    # Independent plain-Python count: status and bytes are the 2 fields after the request quote.
    status, total_bytes = Counter(), 0
    for ln in access_lines:
        st, b = ln.split('"')[2].split()[:2]
        status[int(st)] += 1
        total_bytes += 0 if b == "-" else int(b)
    assert Counter(p.status for p in parsed) == status
    assert sum(p.bytes for p in parsed) == total_bytes
    assert Counter(p.client_ip for p in parsed) == Counter(ln.split(" ", 1)[0] for ln in access_lines)
    t = [p.timestamp_ms for p in parsed]
    lo, hi = (datetime.fromtimestamp(x / 1000, timezone.utc) for x in (min(t), max(t)))
    assert (lo.date().isoformat(), hi.date().isoformat()) == ("2015-05-17", "2015-05-20")


def test_access_log_first_line_fields(access_lines):
    p = parse_line(access_lines[0], "apache_access")
    assert p.client_ip == "83.149.9.216"
    assert p.timestamp_ms == int(datetime(2015, 5, 17, 10, 5, 3, tzinfo=timezone.utc).timestamp()) * 1000
    assert (p.method, p.protocol, p.status, p.bytes) == ("GET", "HTTP/1.1", 200, 203023)
    assert p.path == "/presentations/logstash-monitorama-2013/images/kibana-search.png"
    assert p.referrer == "http://semicomplete.com/presentations/logstash-monitorama-2013/"
    assert p.user_agent.startswith("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1)")
    assert (p.level, p.level_raw, p.message) == ("INFO", None, f"GET {p.path} HTTP/1.1")


def test_access_log_variants():
    common = '10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 503 -'
    p = parse_line(common, "apache_access")
    assert (p.status, p.bytes, p.level, p.referrer, p.user_agent) == (503, 0, "ERROR", None, None)
    assert p.timestamp_ms == int(datetime(2000, 10, 10, 20, 55, 36, tzinfo=timezone.utc).timestamp()) * 1000
    assert p.extra == {"ident": "-", "user": "frank"}
    odd = '1.2.3.4 - - [17/May/2015:10:05:03 +0000] "\\x16\\x03\\x01" 400 0 "-" "-"'
    q = parse_line(odd, "apache_access")
    assert q.matched and q.method is None and q.status == 400 and q.level == "WARN"


# Lines built to trigger regex backtracking (repeated brackets, separators without the expected
# follow-up, long whitespace runs). With linear regexes each takes milliseconds; the quadratic
# versions these guard against took seconds at 40k characters and minutes at 100k, which the
# generous timeout catches. It is a hang guard, not a speed benchmark.
_N = 100_000
_ADVERSARIAL = [
    "Jun 14 15:16:01 combo " + "[a" * (_N // 2),
    "Jun 14 15:16:01 combo " + "[a] (" * (_N // 5),
    "2015-07-29 17:41:44,747 - INFO  [" + ":a@" * (_N // 3),
    "081109 203615 148 INFO" + " " * _N + "x",
    "2015-10-18 18:01:47,978 INFO [" + "] " * (_N // 2),
    '1.2.3.4 - - [17/May/2015:10:05:03 +0000] "' + '\\"' * (_N // 2),
    "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 " + "[x]" * (_N // 3),
    "[10.30 16:49:06] a" + " " * _N + "b",
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("idx", range(len(_ADVERSARIAL)))
def test_no_catastrophic_backtracking(idx):
    line = _ADVERSARIAL[idx]
    for name in FORMATS:
        parse_line(line, name)
    detect_format([line] * 3)
