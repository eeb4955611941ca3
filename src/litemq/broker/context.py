"""What a request handler is given besides the request body: :class:`RequestContext`.

A leaf of :mod:`litemq.broker` (it imports nothing from the broker package), so the socket edge
(``server.py``), the HTTP layer's in-process caller (``http/inproc.py``, ``http/views.py``) and the
ACL checks (``authz.py``) share the class without importing each other, and none of them imports
the runtime (``broker.py``), which is the composition root that imports them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from litemq.protocol import frames


class RequestContext:
    """What a handler knows about the request besides its body.

    Attributes:
        header: the request header (api key, version, correlation id, client id).
        connection: who asks - the client's :class:`~litemq.broker.server.Connection`, or the
            HTTP layer's stand-in :class:`~litemq.broker.http.inproc.HttpCaller`. The ACL checks
            read ``principal`` and ``client_host``; the SASL handlers the connection's own methods.
        runtime: the broker runtime (:class:`~litemq.broker.broker.BrokerRuntime`) whose state
            the handler reads and changes. Typed ``Any`` here: the handlers reach most of it.
    """

    __slots__ = ("header", "connection", "runtime")

    def __init__(self, header: frames.RequestHeader, connection: Any, runtime: Any) -> None:
        self.header = header
        self.connection = connection
        self.runtime = runtime

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
