"""Helpers of the observability tests: HTTP calls with urllib (as curl would make them), a
Prometheus text parser (prometheus_client's own), the console's tables from a dumped DOM."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from html.parser import HTMLParser

from prometheus_client.parser import text_string_to_metric_families


def http(method: str, url: str, body: bytes | str | dict | None = None, timeout_s: float = 20.0
         ) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one HTTP request; a dict body is sent as JSON."""
    data = None
    headers = {}
    if isinstance(body, dict):
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    elif body is not None:
        data = body.encode() if isinstance(body, str) else body
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def get_json(url: str) -> dict:
    status, _, body = http("GET", url)
    assert status == 200, (url, status, body[:500])
    return json.loads(body)


def post_json(url: str, body) -> tuple[int, dict]:
    status, _, raw = http("POST", url, body)
    return status, json.loads(raw)


class Samples(dict):
    """``(sample name, frozenset(labels))`` -> value of one scrape, with lookups by labels."""

    def get1(self, name: str, **labels) -> float | None:
        """The value of the one sample ``name`` with exactly ``labels``, or None."""
        return self.get((name, frozenset((k, str(v)) for k, v in labels.items())))

    def matching(self, name: str, **labels) -> dict[frozenset, float]:
        """Every sample ``name`` whose labels include ``labels`` -> value."""
        want = {(k, str(v)) for k, v in labels.items()}
        return {lbl: v for (n, lbl), v in self.items() if n == name and want <= lbl}

    def total(self, name: str, **labels) -> float:
        return sum(self.matching(name, **labels).values())


def scrape(base_url: str) -> Samples:
    """GET ``/metrics`` and parse it with prometheus_client's parser."""
    status, headers, body = http("GET", base_url + "/metrics")
    assert status == 200, body[:500]
    assert headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), headers
    out = Samples()
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.body_attrs: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body_attrs = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._table is not None and self._row and not all(c == "" for c in self._row):
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def dom_tables(html: str) -> _Tables:
    """Tables by id (rows of cell texts, header rows included) and ``<body>`` attributes."""
    p = _Tables()
    p.feed(html)
    return p
