"""Connection limits (Kafka ``max.connections``, ``max.connections.per.ip``,
``max.connections.per.ip.overrides``; dynamic broker configs) on a real broker process: a
connection over a limit is closed at once, unserved, the others keep being served, a freed slot
is taken again, and the limits change without a restart."""

from __future__ import annotations

import contextlib
import urllib.request

import pytest

from litemq.protocol.errors import ErrorCode as E
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

API_VERSIONS = {"client_software_name": "limits", "client_software_version": "1"}


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", http_port=0, overrides={
            "max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.2:5"}) as b:
        yield b


def _served(broker, source: str = "127.0.0.1") -> WireClient | None:
    """A connection from ``source`` that was answered (None: closed unanswered)."""
    w = WireClient("127.0.0.1", broker.port, timeout_s=5, source_address=(source, 0))
    try:
        w.request(18, 3, API_VERSIONS)
        return w
    except (ConnectionError, OSError):
        w.close()
        return None


def _set(broker, configs: dict[str, str]) -> tuple[int, str | None]:
    with WireClient("127.0.0.1", broker.port, source_address=("127.0.0.3", 0)) as w:
        r = w.request(44, 1, {"validate_only": False, "resources": [{
            "resource_type": 4, "resource_name": "",
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}]}).responses[0]
    return r.error_code, r.error_message


def test_connections_over_a_limit_are_closed_and_the_others_served(broker):
    with contextlib.ExitStack() as stack:
        local = [_served(broker) for _ in range(4)]
        assert [w is not None for w in local] == [True, True, True, False]  # max.connections.per.ip=3
        other = [_served(broker, "127.0.0.2") for _ in range(6)]
        assert [w is not None for w in other] == [True] * 5 + [False]  # its override: 5
        for w in [*local, *other]:
            if w is not None:
                stack.enter_context(w)
        assert local[0].request(18, 3, API_VERSIONS).error_code == E.NONE  # still served
        local[1].close()
        again = _served(broker)  # a freed slot is taken again
        assert again is not None
        stack.enter_context(again)

        assert _set(broker, {"max.connections.per.ip": "10"}) == (E.NONE, None)  # dynamic: no restart
        more = _served(broker)
        assert more is not None
        stack.enter_context(more)
        assert _set(broker, {"max.connections.per.ip.overrides": "127.0.0.2"})[0] == E.INVALID_REQUEST
        assert _set(broker, {"max.connections": "-1"})[0] == E.INVALID_REQUEST
        assert _set(broker, {"max.connections": "10"}) == (E.NONE, None)  # 4 + 5 open now
        tenth = _served(broker, "127.0.0.4")
        assert tenth is not None
        stack.enter_context(tenth)
        assert _served(broker, "127.0.0.4") is None  # the 11th, whatever its IP
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as r:
        body = r.read().decode()
    assert 'litemq_connections_refused_total{limit="max.connections.per.ip"} 2.0' in body
    assert 'litemq_connections_refused_total{limit="max.connections"} 1.0' in body
