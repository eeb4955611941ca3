"""Bundled demo data: a real Apache combined-format access log (see ``README.md`` here for source,
licence and attribution).

The file ships as package data, so it is found in an installed wheel as well as in a checkout.
"""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path
from typing import Iterator

__all__ = ["ACCESS_LOG_NAME", "access_log_path", "iter_access_log_lines"]

#: Base name of the bundled access log (``.log``, or ``.log.gz`` if shipped compressed).
ACCESS_LOG_NAME = "elastic_examples_apache_logs.log"


def access_log_path() -> Path:
    """Path of the bundled access log (plain ``.log`` preferred, else ``.log.gz``).

    Raises:
        FileNotFoundError: neither file is present (package data not installed).
    """
    base = resources.files(__name__)
    for name in (ACCESS_LOG_NAME, ACCESS_LOG_NAME + ".gz"):
        p = base / name
        if p.is_file():
            return Path(str(p))
    raise FileNotFoundError(f"bundled demo log {ACCESS_LOG_NAME}[.gz] not found in {base}")


def iter_access_log_lines(path: Path | None = None) -> Iterator[str]:
    """Yield the lines (without line endings) of the bundled access log, or of ``path``.

    ``.gz`` files are decompressed on the fly. Text is UTF-8; undecodable bytes are replaced.
    """
    p = Path(path) if path is not None else access_log_path()
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8", errors="replace", newline="") as fh:
        for line in fh:
            yield line.rstrip("\r\n")
