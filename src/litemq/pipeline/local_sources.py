"""The log sources ``litemq demo`` finds on the machine it runs on.

- :func:`machine_log_sources`: the machine's own logs that exist, are readable, are not empty
  and are in a known format (:mod:`litemq.pipeline.formats`): dpkg's and apt's logs,
  ``update-alternatives``' log, syslog, other ``/var/log/*.log`` files, and the systemd journal
  (``journalctl -o short-iso``) when there is no syslog file. Each becomes its own source: a
  symbolic link (or, for the journal, a file) in a directory of the caller, named after the
  source (``apt_history.log`` -> source ``apt_history``). Every candidate that is skipped is
  reported in one line (why: absent, not readable, empty, too large, unknown format).
- :func:`loghub_sets`: the loghub 2k samples ``<LITEMQ_LOGHUB_DIR>/loghub/<Sys>/<Sys>_2k.log``
  when present (research-use-only data, read in place, never copied into the repository).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from litemq.pipeline.formats import detect_format

__all__ = ["MACHINE_LOGS", "MACHINE_LOG_MAX_BYTES", "JOURNAL_MAX_LINES", "MachineLog", "machine_log_sources",
           "loghub_dir", "loghub_sets", "loghub_years"]

MACHINE_LOGS: tuple[tuple[str, str], ...] = (
    ("dpkg", "/var/log/dpkg.log"),
    ("alternatives", "/var/log/alternatives.log"),
    ("apt_history", "/var/log/apt/history.log"),
    ("apt_term", "/var/log/apt/term.log"),
    ("syslog", "/var/log/syslog"),
    ("messages", "/var/log/messages"),
)
"""(source name, path) of the machine logs looked for first; then every other ``/var/log/*.log``."""
VAR_LOG_GLOB_DIR = Path("/var/log")
MACHINE_LOG_MAX_BYTES = 32 << 20
"""A machine log larger than this is skipped (the demo stays a few minutes); name it as a PATH
of ``litemq demo`` to ingest it whole."""
JOURNAL_MAX_LINES = 20_000
"""The journal's newest lines taken (``journalctl -n``)."""
_DETECT_LINES = 64
_SYSLOG_NAMES = ("syslog", "messages")


@dataclass(frozen=True)
class MachineLog:
    """A machine log taken as a source: ``name``, the ``path`` to ingest (a link or file in the
    caller's directory), where it comes from (``origin``: a path or a command) and its format."""

    name: str
    path: Path
    origin: str
    fmt: str


def _sample(path: Path) -> list[str]:
    """The first lines of a file (raises OSError when it cannot be read)."""
    out: list[str] = []
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.strip():
                out.append(raw.decode("utf-8", "replace"))
                if len(out) >= _DETECT_LINES:
                    break
    return out


def _check(path: Path) -> tuple[str | None, str]:
    """(format, "") for a usable log file, else (None, why it is skipped)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None, "not present"
    except OSError as exc:
        return None, f"not readable ({exc.strerror})"
    if not path.is_file():
        return None, "not a regular file"
    if st.st_size == 0:
        return None, "empty"
    if st.st_size > MACHINE_LOG_MAX_BYTES:
        return None, (f"{st.st_size / 2**20:.0f} MiB, over {MACHINE_LOG_MAX_BYTES >> 20} MiB "
                      "(name it as a PATH to ingest it whole)")
    try:
        fmt = detect_format(_sample(path))
    except OSError as exc:
        return None, f"not readable ({exc.strerror})"
    if fmt == "unknown":
        return None, "format not recognised"
    return fmt, ""


def _journal(dest: Path, log: Callable[[str], None]) -> MachineLog | None:
    exe = shutil.which("journalctl")
    if exe is None:
        log("skipped journal: journalctl not installed")
        return None
    cmd = [exe, "-o", "short-iso", "--no-pager", "-q", "-n", str(JOURNAL_MAX_LINES)]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"skipped journal: {' '.join(cmd[:3])} failed ({exc})")
        return None
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith(b"-- ")]
    if r.returncode != 0 or not lines:
        why = (r.stderr.decode("utf-8", "replace").strip().splitlines() or ["no entries"])[0]
        log(f"skipped journal: journalctl -o short-iso: {why}")
        return None
    fmt = detect_format(ln.decode("utf-8", "replace") for ln in lines[:_DETECT_LINES])
    if fmt == "unknown":
        log("skipped journal: journalctl -o short-iso output not recognised")
        return None
    path = dest / "journal.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return MachineLog("journal", path, "journalctl -o short-iso", fmt)


def machine_log_sources(dest_dir: str | Path, *, log: Callable[[str], None] = print,
                        candidates: tuple[tuple[str, str], ...] = MACHINE_LOGS,
                        var_log_dir: Path | None = VAR_LOG_GLOB_DIR, journal: bool = True) -> list[MachineLog]:
    """Find the machine's usable logs and make each a source file in ``dest_dir``.

    Args:
        dest_dir: an existing directory (the caller removes it); gets ``<name>.log`` links.
        log: called with one line per skipped candidate (and nothing else).
        candidates: (name, path) pairs looked at first (:data:`MACHINE_LOGS`).
        var_log_dir: then every other ``*.log`` file of this directory (not recursive); None: none.
        journal: take ``journalctl -o short-iso`` when no syslog file was taken.

    Returns:
        The sources found, in the order looked at. Never raises for a missing or unreadable log.
    """
    dest = Path(dest_dir)
    found: list[MachineLog] = []
    seen: set[Path] = set()
    todo = [(name, Path(p)) for name, p in candidates]
    if var_log_dir is not None:
        try:
            todo += [(p.stem, p) for p in sorted(var_log_dir.glob("*.log"))]
        except OSError:
            pass
    names = {name for name, _ in todo[:len(candidates)]}
    for name, path in todo:
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        fmt, why = _check(path)
        if fmt is None:
            if why != "not present" or name in names:
                log(f"skipped {path}: {why}")
            continue
        link = dest / f"{name}.log"
        if link.exists() or link.is_symlink():
            link = dest / f"{name}_{len(found)}.log"
        link.symlink_to(real)
        found.append(MachineLog(link.stem, link, str(path), fmt))
    if journal:
        if any(f.name in _SYSLOG_NAMES for f in found):
            log("skipped journal: the syslog file has the same messages")
        else:
            j = _journal(dest, log)
            if j is not None:
                found.append(j)
    return found


def loghub_dir() -> Path:
    """The folder holding ``loghub/``: ``$LITEMQ_LOGHUB_DIR``, else (as
    :func:`litemq.pipeline.accuracy.default_data_dir`) ``<repo root>/../shared/data``."""
    env = os.environ.get("LITEMQ_LOGHUB_DIR")
    if env:
        return Path(env)
    from litemq.pipeline.accuracy import default_data_dir

    return default_data_dir()


def loghub_years(sets: list[Path]) -> dict[str, int]:
    """The year of each loghub sample whose lines carry none (Linux, Mac, OpenSSH, Android,
    Proxifier: their collection years), by path, for :func:`litemq.pipeline.ingest.ingest`'s
    ``years``: the report then dates their events in that year, not in the last 12 months."""
    from litemq.pipeline.accuracy import YEARS

    return {str(p): YEARS[p.parent.name] for p in sets if p.parent.name in YEARS}


def loghub_sets(base: str | Path | None = None) -> list[Path]:
    """The loghub 2k samples present: ``<base>/loghub/<Sys>/<Sys>_2k.log``, sorted by system;
    ``base`` defaults to :func:`loghub_dir`. An absent folder gives ``[]``."""
    root = (Path(base) if base is not None else loghub_dir()) / "loghub"
    if not root.is_dir():
        return []
    return sorted(p / f"{p.name}_2k.log" for p in root.iterdir() if (p / f"{p.name}_2k.log").is_file())
