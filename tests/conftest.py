"""Shared fixtures: real broker processes on loopback."""

from __future__ import annotations

import pytest

from litemq.testing.process import BrokerProcess


@pytest.fixture
def broker_proc(tmp_path):
    """A ``litemq serve`` process with its data in ``tmp_path/data``."""
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One ``litemq serve`` process shared by a test module (topics are per test)."""
    with BrokerProcess(tmp_path_factory.mktemp("shared") / "data") as proc:
        yield proc
