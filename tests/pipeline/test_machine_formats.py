"""The Debian machine-log formats (dpkg.log, alternatives.log, apt history.log and term.log,
RFC 3339 syslog / ``journalctl -o short-iso``): detection from a file's first lines, parsed
fields, and apt history's multi-line stanzas joined into one record each. Samples are real
lines of a Debian 12 machine's logs."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from litemq.pipeline.formats import RecordJoiner, detect_format, join_records, parse_line

DPKG = """\
2025-06-24 14:36:25 startup archives unpack
2025-06-24 14:36:25 upgrade libsystemd0:amd64 252.36-1~deb12u1 252.38-1~deb12u1
2025-06-24 14:36:25 status triggers-pending libc-bin:amd64 2.36-9+deb12u10
2025-06-24 14:36:25 status half-configured libsystemd0:amd64 252.36-1~deb12u1
2025-06-24 14:36:26 startup packages configure
2025-06-24 14:36:26 configure libsystemd0:amd64 252.38-1~deb12u1 <none>
2025-06-24 14:36:26 status installed libsystemd0:amd64 252.38-1~deb12u1
2025-06-24 14:36:26 trigproc libc-bin:amd64 2.36-9+deb12u10 <none>
"""
ALTERNATIVES = """\
update-alternatives 2025-06-24 14:36:53: run with --quiet --install /usr/bin/pager pager /usr/bin/less 77 --slave /usr/share/man/man1/pager.1.gz pager.1.gz /usr/share/man/man1/less.1.gz
update-alternatives 2025-06-24 14:36:53: link group pager updated to point to /usr/bin/less
update-alternatives 2025-06-24 14:36:55: run with --quiet --install /usr/bin/pinentry pinentry /usr/bin/pinentry-curses 50
"""
APT_HISTORY = """\

Start-Date: 2025-06-24  14:36:25
Commandline: apt-get -qqy upgrade
Upgrade: libsystemd0:amd64 (252.36-1~deb12u1, 252.38-1~deb12u1), libudev1:amd64 (252.36-1~deb12u1, 252.38-1~deb12u1)
End-Date: 2025-06-24  14:36:25

Start-Date: 2025-06-24  14:42:05
Commandline: apt-get install -qqy gcc python3-pip
Requested-By: ci (1000)
Install: gcc-12:amd64 (12.2.0-14+deb12u1, automatic), gcc:amd64 (4:12.2.0-3), python3-pip:amd64 (23.0.1+dfsg-1)
Error: Sub-process /usr/bin/dpkg returned an error code (1)
End-Date: 2025-06-24  14:42:17
"""
APT_TERM = """\

Log started: 2025-06-24  14:36:25
(Reading database ... 100%(Reading database ... 6815 files and directories currently installed.)
Preparing to unpack .../libsystemd0_252.38-1~deb12u1_amd64.deb ...
Unpacking libsystemd0:amd64 (252.38-1~deb12u1) over (252.36-1~deb12u1) ...
Setting up libsystemd0:amd64 (252.38-1~deb12u1) ...
dpkg: error processing package foo (--configure):
W: Possible missing firmware /lib/firmware/i915/tgl_dmc.bin for module i915
Errors were encountered while processing:
Log ended: 2025-06-24  14:36:26
"""
SYSLOG_ISO = """\
2025-06-24T14:36:25.123456+02:00 ci-runner systemd[1]: Started apt-daily.service - Daily apt download activities.
2025-06-24T14:36:26+0000 ci-runner kernel: [    0.000000] Linux version 6.1.0-21-amd64
2025-06-24T14:36:27Z ci-runner CRON[912]: pam_unix(cron:session): session opened for user root(uid=0)
"""


def _ms(*args) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * 1000)


@pytest.mark.parametrize("sample,fmt", [(DPKG, "dpkg"), (ALTERNATIVES, "alternatives"),
                                        (APT_HISTORY, "apt_history"), (APT_TERM, "apt_term"),
                                        (SYSLOG_ISO, "syslog_iso")])
def test_detector_picks_the_machine_log_format(sample, fmt):
    assert detect_format(sample.splitlines()) == fmt
    assert detect_format(sample.splitlines()[:2]) == fmt        # from its first lines too


def test_free_text_is_not_taken_for_apt_term_or_history():
    """apt_term matches any line and apt history's ``Key: value`` lines prove nothing: they are
    chosen by their first line only."""
    assert detect_format(["just some text", "Install: foo", "more text"]) == "unknown"
    assert detect_format(["Commandline: apt-get install x", "End-Date: 2025-06-24  14:36:25"]) == "unknown"
    assert detect_format(["hello", "Log started: 2025-06-24  14:36:25"]) == "unknown"


def test_dpkg_and_alternatives_fields():
    p = parse_line(DPKG.splitlines()[1], "dpkg")
    assert (p.matched, p.timestamp_ms, p.component, p.level) == (True, _ms(2025, 6, 24, 14, 36, 25), "upgrade", None)
    assert p.message == "upgrade libsystemd0:amd64 252.36-1~deb12u1 252.38-1~deb12u1"
    a = parse_line(ALTERNATIVES.splitlines()[1], "alternatives")
    assert (a.timestamp_ms, a.component, a.message) == (
        _ms(2025, 6, 24, 14, 36, 53), "update-alternatives", "link group pager updated to point to /usr/bin/less")


def test_syslog_iso_zones_are_converted_to_utc():
    lines = SYSLOG_ISO.splitlines()
    p = [parse_line(ln, "syslog_iso") for ln in lines]
    assert [x.timestamp_ms for x in p] == [_ms(2025, 6, 24, 12, 36, 25, 123000), _ms(2025, 6, 24, 14, 36, 26),
                                           _ms(2025, 6, 24, 14, 36, 27)]
    assert [(x.host, x.component, x.pid) for x in p] == [("ci-runner", "systemd", "1"), ("ci-runner", "kernel", None),
                                                         ("ci-runner", "CRON", "912")]
    assert p[2].message == "pam_unix(cron:session): session opened for user root(uid=0)"


def test_apt_history_stanzas_are_one_record_each():
    lines = [ln.encode() for ln in APT_HISTORY.splitlines() if ln.strip()]
    recs = list(join_records(lines, "apt_history"))
    assert len(recs) == 2 and recs[0].count(b"\n") == 3 and recs[1].startswith(b"Start-Date: 2025-06-24  14:42:05")
    first, second = (parse_line(r.decode(), "apt_history") for r in recs)
    assert first.matched and first.timestamp_ms == _ms(2025, 6, 24, 14, 36, 25) and first.level is None
    assert first.message == "apt-get -qqy upgrade -> Upgrade 2"
    assert second.level == "ERROR" and second.extra["requested_by"] == "ci (1000)"
    assert second.message == ("apt-get install -qqy gcc python3-pip -> Install 3 -> "
                              "Error: Sub-process /usr/bin/dpkg returned an error code (1)")
    assert second.extra["end"] == "2025-06-24  14:42:17"
    # single-line formats: the lines themselves
    assert list(join_records([b"a", b"b"], "dpkg")) == [b"a", b"b"]


def test_record_joiner_line_by_line_as_tail_follows():
    j = RecordJoiner("apt_history")
    assert j.feed(b"Commandline: orphan line before any stanza") == [b"Commandline: orphan line before any stanza"]
    assert j.feed(b"Start-Date: 2025-06-24  14:36:25") == []
    assert j.feed(b"Commandline: apt-get update") == []
    assert j.feed(b"End-Date: 2025-06-24  14:36:26") == [
        b"Start-Date: 2025-06-24  14:36:25\nCommandline: apt-get update\nEnd-Date: 2025-06-24  14:36:26"]
    assert j.feed(b"Start-Date: 2025-06-24  14:40:00") == []
    assert j.feed(b"Start-Date: 2025-06-24  14:41:00") == [b"Start-Date: 2025-06-24  14:40:00"]   # cut short
    assert j.flush() == [b"Start-Date: 2025-06-24  14:41:00"] and j.flush() == []
    assert RecordJoiner("dpkg").feed(b"x") == [b"x"]


def test_apt_term_headers_carry_the_time_and_error_lines_are_errors():
    p = [parse_line(ln, "apt_term") for ln in APT_TERM.splitlines() if ln.strip()]
    assert all(x.matched for x in p)
    assert p[0].timestamp_ms == _ms(2025, 6, 24, 14, 36, 25) and p[-1].timestamp_ms == _ms(2025, 6, 24, 14, 36, 26)
    assert all(x.timestamp_ms is None for x in p[1:-1])         # dated by the ingest from the header
    assert [x.level for x in p[1:-1]] == [None, None, None, None, "ERROR", "WARN", "ERROR"]
