"""pytest plugin: the ``litemq_broker`` fixture, a real embedded broker per test.

Installed with the package (entry point ``pytest11``), so a user's test suite just asks for it::

    def test_my_pipeline(litemq_broker):
        run_my_job(bootstrap_servers=litemq_broker.bootstrap_servers)
"""

from __future__ import annotations

import pytest


@pytest.fixture
def litemq_broker(tmp_path):
    """A fresh :class:`litemq.Broker` on a free loopback port with its data in ``tmp_path``.

    Test-harness settings: ``group.initial.rebalance.delay.ms`` is 0 (groups form at once), as in
    Kafka's own test configs; everything else is the broker's default.
    """
    from litemq.embedded import Broker

    with Broker(data_dir=tmp_path / "litemq-data", group_initial_rebalance_delay_ms=0) as broker:
        yield broker
