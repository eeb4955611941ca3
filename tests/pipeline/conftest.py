"""Where the loghub data sets are, for the tests that measure parsing and template accuracy.

loghub (https://github.com/logpai/loghub) is licensed for research use only, so it is never
copied into this repository. The tests read it in place from one folder holding ``loghub/``
(the 2k samples: ``loghub/<System>/<System>_2k.log`` and ``_structured.csv``) and, optionally,
``loghub-2.0-corrected/`` (the corrected ground truth):

- ``LITEMQ_LOGHUB_DIR`` names that folder;
- unset, it is ``<repo>/../shared/data`` (a ``shared/`` checkout beside the repository).

When ``loghub/`` is not there the tests that need it are skipped with one reason naming
``LITEMQ_LOGHUB_DIR`` - except under CI (``CI=true``), where it is a failure, so CI always runs them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LOGHUB_DIR_ENV = "LITEMQ_LOGHUB_DIR"
DEFAULT_LOGHUB_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def loghub_data_dir() -> Path:
    """The folder holding ``loghub/`` (``LITEMQ_LOGHUB_DIR``, default ``<repo>/../shared/data``)."""
    configured = os.environ.get(LOGHUB_DIR_ENV)
    return Path(configured).expanduser() if configured else DEFAULT_LOGHUB_DIR


@pytest.fixture(scope="session")
def loghub_dir() -> Path:
    """The folder holding ``loghub/`` (and optionally ``loghub-2.0-corrected/``).

    Skips the test when ``loghub/`` is absent, or fails it when ``CI=true``."""
    root = loghub_data_dir()
    if (root / "loghub").is_dir():
        return root
    reason = (f"loghub data not found: {root / 'loghub'} is missing; set {LOGHUB_DIR_ENV} to the folder "
              f"holding loghub/ (and loghub-2.0-corrected/), default {DEFAULT_LOGHUB_DIR}")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)
