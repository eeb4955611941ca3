"""Log line formats: detection and per-line parsing for the log analytics pipeline.

Pure Python (``re`` + integer arithmetic), no third-party imports, so it is cheap to import and
safe to ship to Spark executors: everything here is a module-level function or an immutable
module-level constant, and :class:`ParsedLine` pickles.

Supported formats (``FORMATS`` keys):

=================  ==========================================================================
``apache_access``  Apache/Nginx *combined* (and *common*) access log
``hdfs``           Hadoop HDFS 0.x (``081109 203615 148 INFO dfs.DataNode: ...``)
``hadoop``         Hadoop MapReduce/YARN log4j (``2015-10-18 18:01:47,978 INFO [main] c.C: ...``)
``spark``          Spark log4j (``17/06/09 20:10:40 INFO spark.SecurityManager: ...``)
``zookeeper``      ZooKeeper log4j (``2015-07-29 17:41:44,747 - INFO  [thread:Class@123] - ...``)
``bgl``            Blue Gene/L RAS log
``hpc``            LANL HPC cluster log
``thunderbird``    Sandia Thunderbird syslog (with the BGL-style label/epoch prefix)
``windows``        Windows CBS log (``2016-09-28 04:30:30, Info   CBS    ...``)
``linux``          BSD syslog, ``/var/log/messages`` style
``android``        Android logcat ``threadtime`` format
``healthapp``      HealthApp (``20171223-22:15:29:606|Component|Pid|...``)
``apache_error``   Apache httpd error log (2.2 and 2.4 styles)
``proxifier``      Proxifier log
``openssh``        OpenSSH ``sshd`` lines of a syslog file
``openstack``      OpenStack (nova) oslo.log lines prefixed by the log file name
``mac``            macOS ``system.log`` (syslog with ``[pid]`` and optional ``(address)``)
``syslog_iso``     RFC 3339 syslog (rsyslog's default on Debian 12+) and ``journalctl -o short-iso``
``dpkg``           Debian ``/var/log/dpkg.log`` (``2025-06-24 14:36:25 status installed p:amd64 1.0``)
``alternatives``   Debian ``/var/log/alternatives.log`` (``update-alternatives 2025-06-24 14:36:53: ...``)
``apt_history``    ``/var/log/apt/history.log``: one record per multi-line ``Start-Date:`` stanza
``apt_term``       ``/var/log/apt/term.log``: ``Log started:`` headers, dpkg's terminal output between
=================  ==========================================================================

Multi-line records: an ``apt_history`` record is a whole stanza (its lines joined by ``\n``,
see :func:`join_records` and :data:`RECORD_START`). ``apt_history`` and ``apt_term`` are
detected by their first line (:data:`FIRST_LINE`), not by the fraction of matching lines: most
lines of ``term.log`` are free text that carries no timestamp (a line without one is dated by
the line before it, see ``litemq.pipeline.ingest``).

The header layouts are those of the loghub benchmark (https://github.com/logpai/loghub; the
``log_format`` strings of logpai/logparser's benchmark), so on the loghub 2k samples the parsed
fields reproduce loghub's ``*_structured.csv`` ground truth; see ``docs/log-parsing.md`` for the
field-by-field mapping and the measured match rates.

Timestamps: ``ParsedLine.timestamp_ms`` is an ``int`` of UTC epoch milliseconds. Lines that carry
an epoch (BGL, HPC, Thunderbird) use it. Lines with an explicit UTC offset (access logs) are
converted with it. **All other timestamps carry no zone and are taken as UTC** (a source in
another zone is shifted by its offset; the pipeline only needs a consistent event-time axis per
source). Formats without a year (linux, openssh, mac, android, proxifier) use the ``year``
argument; when it is ``None``, the latest year that does not put the timestamp more than a day
(``limits.YEARLESS_TIMESTAMP_FUTURE_TOLERANCE_MS``) after now, as syslog receivers date RFC 3164
lines. Two-digit years (hdfs, spark) are 20yy.
A timestamp that does not form a valid date gives ``timestamp_ms=None``; it never raises.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Iterator

from litemq import limits

__all__ = [
    "FIRST_LINE",
    "FORMATS",
    "FormatSpec",
    "RECORD_START",
    "RecordJoiner",
    "join_records",
    "ParsedLine",
    "detect_format",
    "normalise_level",
    "parse_line",
]


# --------------------------------------------------------------------------------------------
# Result type


@dataclass(slots=True)
class ParsedLine:
    """One parsed log line.

    Attributes:
        format: the format name used to parse (``FORMATS`` key, or ``"unknown"``).
        message: the content part of the line (the whole stripped line when it did not match).
        matched: ``True`` when the line matched the format's regex; ``False`` means only
            ``message`` is set (the line is kept, never dropped).
        timestamp_ms: event time, UTC epoch milliseconds, or ``None`` (see module docstring).
        level: normalised level, one of ``TRACE DEBUG INFO WARN ERROR FATAL`` (see
            :func:`normalise_level`), or ``None`` when the format has no level.
        level_raw: the level exactly as written in the line (``"Info"``, ``"D"``, ``"notice"``).
        component: the logging component (logger/class/program/tag), as written.
        host: the host (node) that wrote the line, when the format names one.
        pid: process id (or process/thread token) as written, when the format has one.
        thread: the thread name (hadoop ``[...]``, zookeeper ``[thread:...]``, android tid).
        method, path, protocol, status, bytes, client_ip, user_agent, referrer: access logs only
            (``status``/``bytes`` are ``int``; ``bytes`` is 0 for ``-``).
        extra: other format-specific header fields (``dict[str, str]``) or ``None``.
    """

    format: str
    message: str
    matched: bool = True
    timestamp_ms: int | None = None
    level: str | None = None
    level_raw: str | None = None
    component: str | None = None
    host: str | None = None
    pid: str | None = None
    thread: str | None = None
    method: str | None = None
    path: str | None = None
    protocol: str | None = None
    status: int | None = None
    bytes: int | None = None
    client_ip: str | None = None
    user_agent: str | None = None
    referrer: str | None = None
    extra: dict | None = None

    def to_dict(self) -> dict:
        """All fields as a plain ``dict`` (e.g. for a Spark ``Row`` or JSON)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """A supported format: ``name`` (``FORMATS`` key), ``description`` and the compiled ``regex``
    matched against the stripped line (named groups are the header fields)."""

    name: str
    description: str
    regex: re.Pattern
    example: str = ""


# --------------------------------------------------------------------------------------------
# Levels

_LEVELS = {
    "TRACE": "TRACE", "FINEST": "TRACE", "FINER": "TRACE", "V": "TRACE", "VERBOSE": "TRACE",
    "DEBUG": "DEBUG", "D": "DEBUG", "DBG": "DEBUG", "FINE": "DEBUG",
    "INFO": "INFO", "I": "INFO", "INF": "INFO", "INFORMATION": "INFO", "NOTICE": "INFO",
    "CONFIG": "INFO",
    "WARN": "WARN", "WARNING": "WARN", "W": "WARN",
    "ERROR": "ERROR", "ERR": "ERROR", "E": "ERROR", "SEVERE": "ERROR", "FAILURE": "ERROR",
    "FATAL": "FATAL", "F": "FATAL", "A": "FATAL", "ASSERT": "FATAL", "CRIT": "FATAL",
    "CRITICAL": "FATAL", "ALERT": "FATAL", "EMERG": "FATAL", "EMERGENCY": "FATAL",
    "PANIC": "FATAL",
}


def normalise_level(raw: str | None) -> str | None:
    """Map a raw level to ``TRACE``/``DEBUG``/``INFO``/``WARN``/``ERROR``/``FATAL``.

    Case-insensitive; log4j/java.util.logging/syslog/Android one-letter names are known
    (syslog ``notice`` -> INFO, ``crit``/``alert``/``emerg`` -> FATAL, JUL ``SEVERE`` -> ERROR,
    Android ``V`` -> TRACE, ``A`` (assert) -> FATAL). An unknown level is returned upper-cased;
    ``None``/empty gives ``None``.
    """
    if not raw:
        return None
    up = raw.upper()
    return _LEVELS.get(up, up)


# --------------------------------------------------------------------------------------------
# Timestamps (integer arithmetic: ~5x faster than datetime/calendar.timegm on this path)

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_DIM = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _epoch_ms(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, ms: int = 0) -> int | None:
    """UTC epoch milliseconds of a proleptic-Gregorian date-time; ``None`` if out of range."""
    if not (1 <= mo <= 12 and 1 <= d <= _DIM[mo] and h < 24 and mi < 60 and s < 61):
        return None
    if mo == 2 and d == 29 and not (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        return None
    # days_from_civil (H. Hinnant)
    y2 = y - (mo <= 2)
    era = y2 // 400
    yoe = y2 - era * 400
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return ((days * 24 + h) * 60 + mi) * 60000 + s * 1000 + ms


def _frac_ms(frac: str) -> int:
    """Milliseconds of a decimal fraction string (``"978"`` -> 978, ``"675872"`` -> 675)."""
    return int((frac + "00")[:3]) if frac else 0


def _yearless_epoch_ms(year: int | None, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0,
                       ms: int = 0) -> int | None:
    """Epoch ms of a timestamp whose line has no year: in ``year`` when given; otherwise in the
    latest year that does not put it more than ``limits.YEARLESS_TIMESTAMP_FUTURE_TOLERANCE_MS``
    after now (UTC), as syslog receivers date RFC 3164 lines: a December line read in January
    belongs to last year, a line from tomorrow's date (a source ahead of UTC) to this one.
    ``None`` when the date is invalid in every year tried (Feb 29: the last 8 years)."""
    if year is not None:
        return _epoch_ms(year, mo, d, h, mi, s, ms)
    now_ms = time.time_ns() // 1_000_000
    latest_ms = now_ms + limits.YEARLESS_TIMESTAMP_FUTURE_TOLERANCE_MS
    y = time.gmtime(latest_ms // 1000).tm_year
    for cand in range(y, y - 8, -1):
        ts = _epoch_ms(cand, mo, d, h, mi, s, ms)
        if ts is not None and ts <= latest_ms:
            return ts
        if ts is None and not (mo == 2 and d == 29):
            return None  # invalid in any year
    return None


def _ts_iso(date: str, tm: str) -> int | None:
    """``YYYY-MM-DD`` + ``HH:MM:SS[,.]fff`` -> epoch ms (UTC assumed)."""
    try:
        return _epoch_ms(int(date[0:4]), int(date[5:7]), int(date[8:10]),
                         int(tm[0:2]), int(tm[3:5]), int(tm[6:8]), _frac_ms(tm[9:]))
    except ValueError:
        return None


def _ts_syslog(mon: str, day: str, tm: str, year: int | None) -> int | None:
    """``Jun``, ``14``, ``15:16:01`` -> epoch ms in ``year`` (UTC assumed; no ``year``: the
    latest one not in the future, :func:`_yearless_epoch_ms`)."""
    mo = _MONTHS.get(mon)
    if mo is None:
        return None
    try:
        return _yearless_epoch_ms(year, mo, int(day), int(tm[0:2]), int(tm[3:5]), int(tm[6:8]))
    except ValueError:
        return None


def _ts_epoch(sec: str, frac_ms: int = 0) -> int | None:
    try:
        return int(sec) * 1000 + frac_ms
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Per-format builders: (match, year) -> ParsedLine.  Header-field regexes follow the loghub
# log_format layouts; non-greedy ``.*?`` is kept where loghub's ground truth depends on it.

_WS = r"\s+"


def _b_hdfs(m: re.Match, year: int | None) -> ParsedLine:
    d, t = m["date"], m["time"]
    try:
        ts = _epoch_ms(2000 + int(d[0:2]), int(d[2:4]), int(d[4:6]),
                       int(t[0:2]), int(t[2:4]), int(t[4:6]))
    except ValueError:
        ts = None
    lv = m["level"]
    return ParsedLine("hdfs", m["message"], True, ts, normalise_level(lv), lv, m["component"],
                      None, m["pid"])


def _b_hadoop(m: re.Match, year: int | None) -> ParsedLine:
    lv = m["level"]
    return ParsedLine("hadoop", m["message"], True, _ts_iso(m["date"], m["time"]),
                      normalise_level(lv), lv, m["component"], None, None, m["thread"])


def _b_spark(m: re.Match, year: int | None) -> ParsedLine:
    d, t = m["date"], m["time"]
    try:
        ts = _epoch_ms(2000 + int(d[0:2]), int(d[3:5]), int(d[6:8]),
                       int(t[0:2]), int(t[3:5]), int(t[6:8]))
    except ValueError:
        ts = None
    lv = m["level"]
    return ParsedLine("spark", m["message"], True, ts, normalise_level(lv), lv, m["component"])


def _b_zookeeper(m: re.Match, year: int | None) -> ParsedLine:
    # log4j pattern [%t:%C{1}@%L]: the class is after the LAST colon (thread names contain
    # colons: "QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181", "/10.10.34.11:3888").
    thread, _, cls = m["src"].rpartition(":")
    lv = m["level"]
    return ParsedLine("zookeeper", m["message"], True, _ts_iso(m["date"], m["time"]),
                      normalise_level(lv), lv, cls, None, None, thread,
                      extra={"line": m["line"]})


def _b_bgl(m: re.Match, year: int | None) -> ParsedLine:
    # The epoch column is UTC; the Time column is local time, used only for sub-second digits.
    t = m["time"]
    lv = m["level"]
    return ParsedLine("bgl", m["message"], True, _ts_epoch(m["epoch"], _frac_ms(t[20:])),
                      normalise_level(lv), lv, m["component"], m["node"],
                      extra={"label": m["label"], "type": m["type"], "node_repeat": m["node2"]})


def _b_hpc(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("hpc", m["message"], True, _ts_epoch(m["epoch"]), None, None,
                      m["component"], m["node"],
                      extra={"log_id": m["logid"], "state": m["state"], "flag": m["flag"]})


def _b_thunderbird(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("thunderbird", m["message"], True, _ts_epoch(m["epoch"]), None, None,
                      m["component"], m["host"], m["pid"],
                      extra={"label": m["label"], "location": m["location"]})


def _b_windows(m: re.Match, year: int | None) -> ParsedLine:
    lv = m["level"]
    return ParsedLine("windows", m["message"], True, _ts_iso(m["date"], m["time"]),
                      normalise_level(lv), lv, m["component"])


def _b_linux(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("linux", m["message"], True,
                      _ts_syslog(m["month"], m["day"], m["time"], year), None, None,
                      m["component"], m["host"], m["pid"])


def _b_android(m: re.Match, year: int | None) -> ParsedLine:
    d, t = m["date"], m["time"]
    try:
        ts = _yearless_epoch_ms(year, int(d[0:2]), int(d[3:5]),
                                int(t[0:2]), int(t[3:5]), int(t[6:8]), _frac_ms(t[9:]))
    except ValueError:
        ts = None
    lv = m["level"]
    return ParsedLine("android", m["message"], True, ts, normalise_level(lv), lv,
                      m["component"], None, m["pid"], m["tid"])


def _b_healthapp(m: re.Match, year: int | None) -> ParsedLine:
    # 20171223-22:15:29:606 (fields not zero-padded on every line)
    d, _, rest = m["time"].partition("-")
    parts = rest.split(":")
    try:
        ts = _epoch_ms(int(d[0:4]), int(d[4:6]), int(d[6:8]), int(parts[0]), int(parts[1]),
                       int(parts[2]), int(parts[3]) if len(parts) > 3 else 0)
    except (ValueError, IndexError):
        ts = None
    return ParsedLine("healthapp", m["message"], True, ts, None, None, m["component"], None,
                      m["pid"])


def _b_apache_error(m: re.Match, year: int | None) -> ParsedLine:
    # "Sun Dec 04 04:47:44 2005" or 2.4's "Sun Dec 04 04:47:44.123456 2005"
    parts = m["time"].split()
    try:
        tm = parts[3]
        ts = _epoch_ms(int(parts[4]), _MONTHS.get(parts[1], 0), int(parts[2]),
                       int(tm[0:2]), int(tm[3:5]), int(tm[6:8]), _frac_ms(tm[9:]))
    except (ValueError, IndexError):
        ts = None
    lv = m["level"]
    return ParsedLine("apache_error", m["message"], True, ts, normalise_level(lv), lv,
                      m["module"], None, m["pid"])


def _b_proxifier(m: re.Match, year: int | None) -> ParsedLine:
    t = m["time"]  # "10.30 16:49:06" = MM.DD HH:MM:SS
    try:
        ts = _yearless_epoch_ms(year, int(t[0:2]), int(t[3:5]),
                                int(t[6:8]), int(t[9:11]), int(t[12:14]))
    except ValueError:
        ts = None
    return ParsedLine("proxifier", m["message"], True, ts, None, None, m["component"])


def _b_openssh(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("openssh", m["message"], True,
                      _ts_syslog(m["month"], m["day"], m["time"], year), None, None,
                      m["component"], m["host"], m["pid"])


def _b_openstack(m: re.Match, year: int | None) -> ParsedLine:
    lv = m["level"]
    return ParsedLine("openstack", m["message"], True, _ts_iso(m["date"], m["time"]),
                      normalise_level(lv), lv, m["component"], None, m["pid"],
                      extra={"log_file": m["logrecord"], "request": m["request"]})


def _b_mac(m: re.Match, year: int | None) -> ParsedLine:
    addr = m["address"]
    return ParsedLine("mac", m["message"], True,
                      _ts_syslog(m["month"], m["day"], m["time"], year), None, None,
                      m["component"], m["host"], m["pid"],
                      extra={"address": addr} if addr is not None else None)


def _status_level(status: int | None) -> str | None:
    if status is None:
        return None
    return "ERROR" if status >= 500 else "WARN" if status >= 400 else "INFO"


def _b_apache_access(m: re.Match, year: int | None) -> ParsedLine:
    # [17/May/2015:10:05:03 +0000]
    t = m["time"]
    try:
        ts = _epoch_ms(int(t[7:11]), _MONTHS.get(t[3:6], 0), int(t[0:2]),
                       int(t[12:14]), int(t[15:17]), int(t[18:20]))
        tz = t[21:26]
        if ts is not None and len(tz) == 5 and tz[0] in "+-":
            off = (int(tz[1:3]) * 60 + int(tz[3:5])) * 60000
            ts = ts - off if tz[0] == "+" else ts + off
    except ValueError:
        ts = None
    request = m["request"]
    parts = request.split(" ")
    if len(parts) == 3:
        method, path, proto = parts
    elif len(parts) == 2:
        (method, path), proto = parts, None
    else:
        method = path = proto = None
    st = m["status"]
    status = int(st) if st != "-" else None
    b = m["bytes"]
    ref, ua = m["referrer"], m["user_agent"]
    return ParsedLine("apache_access", request, True, ts, _status_level(status), None, None,
                      None, None, None, method, path, proto, status,
                      int(b) if b != "-" else 0, m["client_ip"],
                      ua if ua not in (None, "-") else None,
                      ref if ref not in (None, "-") else None,
                      {"ident": m["ident"], "user": m["user"]}
                      if m["user"] != "-" or m["ident"] != "-" else None)


def _b_syslog_iso(m: re.Match, year: int | None) -> ParsedLine:
    ts = _ts_iso(m["date"], m["time"])
    tz = m["tz"]
    if ts is not None and tz and tz != "Z":
        off = (int(tz[1:3]) * 60 + int(tz[-2:])) * 60000
        ts = ts - off if tz[0] == "+" else ts + off
    return ParsedLine("syslog_iso", m["message"], True, ts, None, None, m["component"], m["host"],
                      m["pid"])


def _b_dpkg(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("dpkg", m["message"], True, _ts_iso(m["date"], m["time"]), None, None,
                      m["component"])


def _b_alternatives(m: re.Match, year: int | None) -> ParsedLine:
    return ParsedLine("alternatives", m["message"], True, _ts_iso(m["date"], m["time"]), None, None,
                      m["component"])


_APT_FIELD = re.compile(r"^([A-Z][A-Za-z-]*): ?(.*)$", re.M)
_APT_PKG = re.compile(r"[^\s,()]+ \([^()]*\)")
_APT_ACTIONS = ("Install", "Reinstall", "Upgrade", "Downgrade", "Remove", "Purge")


def _b_apt_history(m: re.Match, year: int | None) -> ParsedLine:
    # Start-Date: 2025-06-24  14:36:25 / Commandline: / Requested-By: / Install: p:amd64 (1.0,
    # automatic), ... / Error: ... / End-Date: ...  -> message "<command line> -> Install 3, ..."
    fields = dict(_APT_FIELD.findall(m["body"]))
    acts = [f"{a} {len(_APT_PKG.findall(fields[a]))}" for a in _APT_ACTIONS if a in fields]
    cmd = fields.get("Commandline", "(no command line)")
    message = cmd + (" -> " + ", ".join(acts) if acts else "")
    extra = {k: v for k, v in (("end", fields.get("End-Date")), ("requested_by", fields.get("Requested-By")),
                                ("error", fields.get("Error"))) if v}
    if "Error" in fields:
        message += " -> Error: " + fields["Error"]
    lv = "Error" if "Error" in fields else None
    return ParsedLine("apt_history", message, True, _ts_iso(m["date"], m["time"]),
                      normalise_level(lv), lv, "apt", extra=extra or None)


_TERM_ERROR = re.compile(r"^(?:E: |Errors were encountered|(?:[\w./+-]+: )?error[: ])", re.I)
_TERM_WARN = re.compile(r"^(?:W: |(?:[\w./+-]+: )?warning[: ]|Failed to )", re.I)


def _b_apt_term(m: re.Match, year: int | None) -> ParsedLine:
    mark = m["mark"]
    if mark is not None:
        return ParsedLine("apt_term", f"Log {mark}", True, _ts_iso(m["date"], m["time"]),
                          None, None, "apt")
    msg = m["message"]
    lv = "ERROR" if _TERM_ERROR.match(msg) else "WARN" if _TERM_WARN.match(msg) else None
    return ParsedLine("apt_term", msg, True, None, lv, lv)


_MON = r"(?P<month>[A-Z][a-z]{2})\s++(?P<day>\d{1,2})\s++(?P<time>\d{2}:\d{2}:\d{2})"
_QS = r'[^"\\]*+(?:\\.[^"\\]*+)*+'  # quoted-string body with backslash escapes (unrolled)

# name -> (description, regex, builder, example line)
_DEFS: dict[str, tuple[str, str, Callable[[re.Match, int | None], ParsedLine], str]] = {
    "apache_access": (
        "Apache/Nginx access log, combined or common format",
        r'^(?P<client_ip>\S+) (?P<ident>\S+) (?P<user>\S+) \[(?P<time>[^\]]+)\] '
        rf'"(?P<request>{_QS})" (?P<status>\d{{3}}|-) (?P<bytes>\d+|-)'
        rf'(?: "(?P<referrer>{_QS})" "(?P<user_agent>{_QS})")?.*$',
        _b_apache_access,
        '83.149.9.216 - - [17/May/2015:10:05:03 +0000] "GET /a.png HTTP/1.1" 200 203023 '
        '"http://semicomplete.com/" "Mozilla/5.0"'),
    "openstack": (
        "OpenStack oslo.log line prefixed by its log file name",
        r"^(?P<logrecord>\S+)\s++(?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2}\.\d+)"
        r"\s++(?P<pid>\d+)\s++(?P<level>[A-Z]+)\s++(?P<component>\S+)\s++\[(?P<request>[^\]]*)\]"
        r"\s++(?P<message>.*)$",
        _b_openstack,
        "nova-api.log.1.2017-05-16_13:53:08 2017-05-16 00:00:00.008 25746 INFO "
        "nova.osapi_compute.wsgi.server [req-1 - - - - -] 10.11.10.1 \"GET /v2 HTTP/1.1\""),
    "bgl": (
        "Blue Gene/L RAS log: label epoch date node time node type component level content",
        r"^(?P<label>\S+)\s++(?P<epoch>\d+)\s++(?P<date>\d{4}\.\d{2}\.\d{2})\s++(?P<node>\S+)\s++"
        r"(?P<time>\d{4}-\d{2}-\d{2}-\d{2}\.\d{2}\.\d{2}\.\d+)\s++(?P<node2>\S+)\s++(?P<type>\S+)"
        r"\s++(?P<component>\S+)\s++(?P<level>\S+)\s++(?P<message>.*)$",
        _b_bgl,
        "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 "
        "R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected"),
    "thunderbird": (
        "Thunderbird syslog with label/epoch/date/host prefix",
        r"^(?P<label>\S+)\s++(?P<epoch>\d+)\s++(?P<date>\d{4}\.\d{2}\.\d{2})\s++(?P<host>\S+)\s++"
        + _MON + r"\s++(?P<location>\S+)\s++(?P<component>.*?)(?:\[(?P<pid>[^\[\]]*)\])?:\s++"
        r"(?P<message>.*)$",
        _b_thunderbird,
        "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond[2916]: (root) CMD"),
    "hpc": (
        "LANL HPC log: logid node component state epoch flag content",
        r"^(?P<logid>\d+)\s++(?P<node>\S+)\s++(?P<component>\S+)\s++(?P<state>\S+)\s++"
        r"(?P<epoch>\d{9,})\s++(?P<flag>-?\d+)\s++(?P<message>.*)$",
        _b_hpc,
        "134681 node-246 unix.hw state_change.unavailable 1077804742 1 Component State Change"),
    "zookeeper": (
        "ZooKeeper log4j: date time - LEVEL [thread:Class@line] - content",
        r"^(?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2},\d{3})\s++-\s++"
        r"(?P<level>[A-Z]+)\s++\[(?P<src>[^@]*)@(?P<line>[^\]]*)\]\s++-\s++(?P<message>.*)$",
        _b_zookeeper,
        "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:"
        "FastLeaderElection@774] - Notification time out: 3200"),
    "hadoop": (
        "Hadoop log4j: date time,ms LEVEL [thread] component: content",
        r"^(?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2},\d{3})\s++(?P<level>[A-Z]+)"
        r"\s++\[(?P<thread>[^\]]*)\]\s++(?P<component>.*?):\s++(?P<message>.*)$",
        _b_hadoop,
        "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: "
        "Created MRAppMaster"),
    "hdfs": (
        "HDFS: yyMMdd HHmmss pid LEVEL component: content",
        r"^(?P<date>\d{6})\s++(?P<time>\d{6})\s++(?P<pid>\d+)\s++(?P<level>[A-Z]+)\s++"
        r"(?P<component>.*?):\s++(?P<message>.*)$",
        _b_hdfs,
        "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 terminating"),
    "spark": (
        "Spark log4j: yy/MM/dd HH:mm:ss LEVEL component: content",
        r"^(?P<date>\d{2}/\d{2}/\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2})\s++(?P<level>[A-Z]+)\s++"
        r"(?P<component>.*?):\s++(?P<message>.*)$",
        _b_spark,
        "17/06/09 20:10:40 INFO spark.SecurityManager: Changing view acls to: yarn,curi"),
    "windows": (
        "Windows CBS log: date time, Level  Component  content",
        r"^(?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2}),\s++(?P<level>[A-Za-z]+)"
        r"\s++(?P<component>\S+)\s++(?P<message>.*)$",
        _b_windows,
        "2016-09-28 04:30:30, Info                  CBS    Loaded Servicing Stack"),
    "android": (
        "Android logcat threadtime: MM-dd HH:mm:ss.SSS pid tid L tag: content",
        r"^(?P<date>\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2}\.\d{3})\s++(?P<pid>\d+)\s++"
        r"(?P<tid>\d+)\s++(?P<level>[VDIWEFAS])\s++(?P<component>.*?):\s++(?P<message>.*)$",
        _b_android,
        "03-17 16:13:38.819  1702  8671 D PowerManagerService: acquire lock=233570404"),
    "healthapp": (
        "HealthApp: yyyyMMdd-H:m:s:SSS|component|pid|content",
        r"^(?P<time>\d{8}-\d{1,2}:\d{1,2}:\d{1,2}:\d{1,3})\|(?P<component>[^|]*)\|"
        r"(?P<pid>[^|]*)\|(?P<message>.*)$",
        _b_healthapp,
        "20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579"),
    "apache_error": (
        "Apache httpd error log: [date] [level] or [module:level] [pid N] content",
        r"^\[(?P<time>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \d{4})\]"
        r"\s++\[(?:(?P<module>[\w-]+):)?(?P<level>[a-z]+\d?)\]"
        r"(?:\s++\[pid (?P<pid>\d+)(?::tid \d+)?\])?\s++(?P<message>.*)$",
        _b_apache_error,
        "[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6"),
    "proxifier": (
        "Proxifier: [MM.dd HH:mm:ss] program - content",
        r"^\[(?P<time>\d{2}\.\d{2} \d{2}:\d{2}:\d{2})\]\s++(?P<component>.*?\S)\s++-\s++"
        r"(?P<message>.*)$",
        _b_proxifier,
        "[10.30 16:49:06] chrome.exe - proxy.cse.cuhk.edu.hk:5070 open through proxy"),
    "openssh": (
        "syslog lines of sshd: Mon d HH:mm:ss host sshd[pid]: content",
        r"^" + _MON + r"\s++(?P<host>\S+)\s++(?P<component>sshd)\[(?P<pid>[^\[\]]*)\]:\s++"
        r"(?P<message>.*)$",
        _b_openssh,
        "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186"),
    "mac": (
        "macOS system.log: Mon d HH:mm:ss host component[pid] (address): content",
        r"^" + _MON + r"\s++(?P<host>\S+)\s++(?P<component>.*?)\[(?P<pid>[^\[\]]*)\]"
        r"(?:\s++\((?P<address>[^()]*)\))?:\s++(?P<message>.*)$",
        _b_mac,
        "Jul  1 09:01:05 calvisitor-10-105-160-95 com.apple.CDScheduler[43]: Thermal pressure"),
    "linux": (
        "BSD syslog (/var/log/messages): Mon d HH:mm:ss host component[pid]: content",
        r"^" + _MON + r"\s++(?P<host>\S+)\s++(?P<component>.*?)(?:\[(?P<pid>[^\[\]]*)\])?:\s++"
        r"(?P<message>.*)$",
        _b_linux,
        "Jun 14 15:16:02 combo sshd(pam_unix)[19937]: check pass; user unknown"),
    "syslog_iso": (
        "RFC 3339 syslog / journalctl -o short-iso: date-Thh:mm:ss[.f]zone host component[pid]: content",
        r"^(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2}(?:\.\d+)?)(?P<tz>Z|[+-]\d{2}:?\d{2})?"
        r"\s++(?P<host>\S+)\s++(?P<component>.*?)(?:\[(?P<pid>[^\[\]]*)\])?:\s++(?P<message>.*)$",
        _b_syslog_iso,
        "2025-06-24T14:36:25.123456+00:00 ci-runner systemd[1]: Started apt-daily.service."),
    "dpkg": (
        "Debian dpkg.log: date time action details",
        r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2}) "
        r"(?P<message>(?P<component>[a-z][a-z-]*+)(?: .*)?)$",
        _b_dpkg,
        "2025-06-24 14:36:25 status installed libc-bin:amd64 2.36-9+deb12u10"),
    "alternatives": (
        "Debian alternatives.log: update-alternatives date time: content",
        r"^(?P<component>update-alternatives) (?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2}): "
        r"(?P<message>.*)$",
        _b_alternatives,
        "update-alternatives 2025-06-24 14:36:53: link group pager updated to point to /usr/bin/less"),
    "apt_history": (
        "apt history.log stanza (one record): Start-Date: date  time, then Key: value lines",
        r"(?s)^Start-Date: (?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2})(?P<body>.*)$",
        _b_apt_history,
        "Start-Date: 2025-06-24  14:42:05\nCommandline: apt-get install -qqy gcc\n"
        "Install: gcc:amd64 (4:12.2.0-3), cpp:amd64 (4:12.2.0-3, automatic)\nEnd-Date: 2025-06-24  14:42:17"),
    "apt_term": (
        "apt term.log: Log started/ended: date  time headers, dpkg's terminal output between",
        r"^(?:Log (?P<mark>started|ended): (?P<date>\d{4}-\d{2}-\d{2})\s++(?P<time>\d{2}:\d{2}:\d{2})"
        r"|(?P<message>.*))$",
        _b_apt_term,
        "Log started: 2025-06-24  14:36:25"),
}

FORMATS: dict[str, FormatSpec] = {
    name: FormatSpec(name, desc, re.compile(rx), ex) for name, (desc, rx, _b, ex) in _DEFS.items()
}
"""Supported formats by name. Iteration order is the detection tie-break order (most specific
first)."""

_PARSERS: dict[str, tuple[Callable[[str], re.Match | None], Callable]] = {
    name: (FORMATS[name].regex.match, b) for name, (_d, _r, b, _e) in _DEFS.items()
}

FIRST_LINE: dict[str, re.Pattern] = {
    "apt_history": re.compile(r"^Start-Date: \d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$"),
    "apt_term": re.compile(r"^Log started: \d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$"),
}
"""Formats detected by the first non-blank line of a source (their other lines are free text or
``Key: value`` lines that prove nothing); :func:`detect_format` never picks them by fraction."""

RECORD_START: dict[str, re.Pattern] = {"apt_history": re.compile(rb"^Start-Date: ")}
"""Multi-line formats: a line matching the pattern starts a new record; the lines up to the
next start belong to it (:func:`join_records`)."""

_RECORD_END: dict[str, re.Pattern] = {"apt_history": re.compile(rb"^End-Date: ")}


class RecordJoiner:
    """Joins the lines of a multi-line format (:data:`RECORD_START`) into records, line by line
    (for ``tail -F``): :meth:`feed` returns the records a line completes, :meth:`flush` the one
    still open. A record is complete at its end line (``End-Date:``) or when the next record
    starts; lines before the first start are records of their own (never dropped). For other
    formats every line is a record. Lines are ``bytes`` without line endings; a record's lines
    are joined with ``b"\\n"``."""

    def __init__(self, fmt: str | None):
        self._start = RECORD_START.get(fmt or "")
        self._end = _RECORD_END.get(fmt or "")
        self._open: list[bytes] = []

    def feed(self, line: bytes) -> list[bytes]:
        if self._start is None:
            return [line]
        out: list[bytes] = []
        if self._start.match(line):
            out += self.flush()
            self._open = [line]
        elif self._open:
            self._open.append(line)
        else:
            out.append(line)
        if self._open and self._end is not None and self._end.match(line):
            out += self.flush()
        return out

    def flush(self) -> list[bytes]:
        rec, self._open = self._open, []
        return [b"\n".join(rec)] if rec else []


def join_records(lines: Iterable[bytes], fmt: str | None) -> Iterator[bytes]:
    """The records of a source's lines (see :class:`RecordJoiner`); the lines themselves for a
    single-line format."""
    if fmt not in RECORD_START:
        yield from lines
        return
    j = RecordJoiner(fmt)
    for line in lines:
        yield from j.feed(line)
    yield from j.flush()


# --------------------------------------------------------------------------------------------
# Public functions


def parse_line(line: str, fmt: str, *, year: int | None = None) -> ParsedLine:
    """Parse one log line in format ``fmt``.

    Args:
        line: the raw line; surrounding whitespace (including ``\\r\\n``) is stripped first.
        fmt: a ``FORMATS`` key or ``"unknown"``.
        year: the year for formats whose timestamps have none (linux, openssh, mac, android,
            proxifier); default: the latest year that does not put the timestamp more than a
            day after now (a December line read in January is last year's).

    Returns:
        A :class:`ParsedLine`. A line that does not match ``fmt`` (or ``fmt == "unknown"``) gives
        ``matched=False`` and ``message`` = the stripped line, all other fields ``None``: lines
        are never dropped and this function does not raise for bad input lines.

    Raises:
        ValueError: ``fmt`` is not a known format name.
    """
    s = line.strip()
    p = _PARSERS.get(fmt)
    if p is None:
        if fmt == "unknown":
            return ParsedLine("unknown", s, False)
        raise ValueError(f"unknown log format {fmt!r}; known: {sorted(FORMATS)} or 'unknown'")
    m = p[0](s)
    if m is None:
        return ParsedLine(fmt, s, False)
    return p[1](m, year)


_SYSLOG = ("openssh", "mac", "linux")
_MAC_HINT = re.compile(r"\S+ kernel\[0\]:|com\.apple\.|\]\s+\([^()]*\):")


def detect_format(sample_lines: Iterable[str], *, min_fraction: float = 0.5) -> str:
    """Guess the format of a source from some of its lines (e.g. the first 50).

    Every format's regex is tried on every non-blank line; the format matching the largest
    fraction wins, ties going to the earlier (more specific) entry of ``FORMATS``. The three
    BSD-syslog formats match each other's lines, so among them: ``openssh`` needs >= 90 % of
    lines to be ``sshd[pid]:`` lines, ``mac`` needs a macOS marker (``kernel[0]:``, a
    ``com.apple.`` name or a ``[pid] (address):`` header) on some line, otherwise ``linux``.
    A source whose first non-blank line is a :data:`FIRST_LINE` header (``Start-Date: ...``,
    ``Log started: ...``) is that format, whatever its other lines.

    Returns the format name, or ``"unknown"`` when no format matches at least ``min_fraction``
    of the non-blank lines (or there are none).
    """
    lines = [s for s in (ln.strip() for ln in sample_lines) if s]
    if not lines:
        return "unknown"
    for name, rx in FIRST_LINE.items():
        if rx.match(lines[0].partition("\n")[0]):
            return name
    n = len(lines)
    best, best_frac = "unknown", 0.0
    counts: dict[str, int] = {}
    for name, (match, _b) in _PARSERS.items():
        if name in FIRST_LINE:
            continue
        c = sum(1 for s in lines if match(s))
        counts[name] = c
        if c / n > best_frac:
            best, best_frac = name, c / n
    if best_frac < min_fraction:
        return "unknown"
    if best in _SYSLOG:
        if counts["openssh"] >= 0.9 * n:
            return "openssh"
        if counts["mac"] >= min_fraction * n and any(_MAC_HINT.search(s) for s in lines):
            return "mac"
        return "linux" if counts["linux"] >= min_fraction * n else best
    return best
