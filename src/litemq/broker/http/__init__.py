"""The broker's HTTP port: Prometheus ``/metrics``, the web console and a REST API
(Confluent REST Proxy v3 paths). See :mod:`litemq.broker.http.app` and docs/operations.md."""

from litemq.broker.http.app import HttpServer, parse_http_listen

__all__ = ["HttpServer", "parse_http_listen"]
