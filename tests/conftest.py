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


HEAVY_DIRS = ("tests/cluster/", "tests/spark/", "tests/pipeline_job/", "tests/groups/", "tests/txn/")
"""Tests that start Spark, 3-5 broker clusters with faults, or groups of client processes whose
heartbeats and session timeouts must keep up (consumer groups, share groups, transactions);
with the ``slow`` ones elsewhere they form one group, run one after another by one
pytest-xdist worker."""


def pytest_collection_modifyitems(config, items):
    """Groups for ``pytest -n N --dist loadgroup`` (scripts/test.sh): every heavy test (Spark,
    clusters, fault injection, client groups: :data:`HEAVY_DIRS` and the ``slow`` marker) in one
    group, so no two of them share the machine's cores at once, and every other test file in its own group,
    so a module's shared broker is started once. Without pytest-xdist the marks do nothing."""
    for item in items:
        path = item.nodeid.split("::")[0]
        heavy = path.startswith(HEAVY_DIRS) or item.get_closest_marker("slow") is not None
        item.add_marker(pytest.mark.xdist_group("heavy" if heavy else path))
