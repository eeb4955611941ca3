"""A request whose handler fails is answered, as Kafka's ``KafkaApis.handleError`` answers
every request: UNKNOWN_SERVER_ERROR for a bug, KAFKA_STORAGE_ERROR for a storage failure
(OSError), where the response has a top-level error code; the connection stays open. The
failing handlers are injected through the broker's handler table (fault injection: no API of
LiteMQ fails on purpose)."""

from __future__ import annotations

import errno

import pytest

from litemq.embedded import Broker
from litemq.protocol.errors import ErrorCode
from litemq.testing.wire import WireClient

DESCRIBE_CLUSTER = 60


@pytest.mark.parametrize("exc, code", [(ValueError("a bug"), ErrorCode.UNKNOWN_SERVER_ERROR),
                                       (OSError(errno.ENOSPC, "No space left on device"),
                                        ErrorCode.KAFKA_STORAGE_ERROR)])
def test_a_failing_handler_is_answered_with_an_error_code(tmp_path, exc, code):
    with Broker(data_dir=tmp_path / "data") as b:
        def failing(ctx, req):
            raise exc
        b.call(lambda: b.runtime.register(DESCRIBE_CLUSTER, failing))
        with WireClient("127.0.0.1", b.port) as w:
            assert w.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}).error_code == code
            assert w.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,  # the connection serves on
                                     "include_topic_authorized_operations": False}).brokers
