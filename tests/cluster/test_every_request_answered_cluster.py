"""Never let a request go unanswered, on a 3-broker cluster: ``test_every_request_answered``'s
well-formed requests with random field values, sent to the metadata leader and to a broker that
forwards admin changes to it (the broker-to-broker RPC and the metadata log are paths a single
broker does not have). Fuzzing this way found a NaN quota that JSON could not carry to the
leader and a CreatePartitions count that made the leader stop answering everyone."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litemq.testing.cluster import LocalCluster
from litemq.testing.wire import WireClient
from tests.integration.test_every_request_answered import API_VERSIONS_V3, draw_and_ask

pytestmark = [pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("answered-cluster"), 3,
                      {"group.initial.rebalance.delay.ms": "0", "client.telemetry.enable": "true"}) as c:
        yield c


@pytest.fixture(scope="module")
def targets(cluster) -> dict[str, object]:
    leader = cluster.metadata_leader()
    follower = next(n for n in cluster.node_ids if n != leader)
    return {"metadata leader": cluster.node(leader), "forwarding broker": cluster.node(follower)}


@pytest.fixture(scope="module")
def advertised(targets) -> list[tuple[int, int]]:
    with WireClient("127.0.0.1", targets["metadata leader"].port) as w:
        keys = w.request(18, 3, API_VERSIONS_V3).api_keys
    return [(k.api_key, v) for k in keys for v in range(k.min_version, k.max_version + 1)]


@settings(max_examples=1500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_well_formed_request_is_answered_by_every_cluster_role(targets, advertised, data):
    role = data.draw(st.sampled_from(sorted(targets)), label="broker")
    draw_and_ask(data, targets[role], advertised, f"{role}: ")
