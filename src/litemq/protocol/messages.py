"""Registry of every Kafka request/response message, by API key.

Source: the vendored Kafka 3.9 JSON schemas (``schemas/message``). Specs are built lazily: a
schema file is parsed on the first ``request_spec``/``response_spec`` call for its key, and each
version's codec is compiled on its first use.

    >>> from litemq.protocol.messages import request_spec, response_spec, API_KEYS, api_name
    >>> spec = request_spec(API_KEYS["Produce"])           # MessageSpec for ProduceRequest
    >>> msg, end = spec.decode(buf, version)                # DecodeError on malformed input
    >>> data = response_spec(3).encode({"brokers": [...], "topics": [...]}, version)
"""

from __future__ import annotations

import re
import threading

from litemq.protocol.schema import SCHEMA_DIR, KafkaStruct, MessageSpec, _build_message, load_json

__all__ = [
    "API_KEYS",
    "KafkaStruct",
    "MessageSpec",
    "api_name",
    "data_spec",
    "request_spec",
    "response_spec",
]

_HEAD_RE = re.compile(r'"apiKey"\s*:\s*(\d+)')


def _scan() -> tuple[dict[str, int], dict[int, str]]:
    keys: dict[str, int] = {}
    for path in sorted(SCHEMA_DIR.glob("*Request.json")):
        m = _HEAD_RE.search(path.read_text(encoding="utf-8"))
        if m:
            name = path.stem[: -len("Request")]
            keys[name] = int(m.group(1))
    return keys, {v: k for k, v in keys.items()}


API_KEYS: dict[str, int]
"""API name (schema name without ``Request``, e.g. ``"Produce"``) -> api key (``0``)."""
API_KEYS, _NAMES = _scan()

_lock = threading.Lock()
_specs: dict[str, MessageSpec] = {}


def _spec(file_stem: str) -> MessageSpec:
    s = _specs.get(file_stem)
    if s is None:
        with _lock:
            s = _specs.get(file_stem)
            if s is None:
                path = SCHEMA_DIR / f"{file_stem}.json"
                if not path.exists():
                    raise KeyError(file_stem)
                s = MessageSpec(_build_message(load_json(path)))
                _specs[file_stem] = s
    return s


def api_name(api_key: int) -> str:
    """Api key -> API name (``0`` -> ``"Produce"``). Raises KeyError if unknown."""
    return _NAMES[api_key]


def request_spec(api_key: int) -> MessageSpec:
    """The :class:`MessageSpec` of the request with ``api_key``. Raises KeyError if unknown."""
    return _spec(_NAMES[api_key] + "Request")


def response_spec(api_key: int) -> MessageSpec:
    """The :class:`MessageSpec` of the response with ``api_key``. Raises KeyError if unknown."""
    return _spec(_NAMES[api_key] + "Response")


def data_spec(name: str) -> MessageSpec:
    """Spec of a non-API schema (``"ConsumerProtocolSubscription"``, ``"LeaderChangeMessage"``,
    ``"RequestHeader"``, ...). Raises KeyError if there is no such schema."""
    if "/" in name or "\\" in name or name.startswith("."):
        raise KeyError(name)
    return _spec(name)
