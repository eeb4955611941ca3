"""TLS for client listeners and the broker-to-broker RPC port (Kafka's SSL security protocol).

Built on Python's :mod:`ssl` from PEM files, Kafka's ``ssl.keystore.type=PEM`` /
``ssl.truststore.type=PEM`` settings (KIP-651): the keystore file holds the certificate chain and
the private key, the truststore file the CA certificates. TLS 1.2 is the minimum (Kafka's
``ssl.enabled.protocols`` default ``TLSv1.2,TLSv1.3``).

- :func:`server_context`: a listener's context; ``ssl.client.auth`` none/requested/required maps
  to ``CERT_NONE``/``CERT_OPTIONAL``/``CERT_REQUIRED``. On a SASL_SSL listener only the
  listener-prefixed ``ssl.client.auth`` counts (KIP-684).
- :func:`rpc_server_context` / :func:`rpc_client_context`: mutual TLS on the RPC port when the
  inter-broker protocol is SSL or SASL_SSL; the dialling side checks the peer's host name
  when ``ssl.endpoint.identification.algorithm=https`` (Kafka's default).
- :func:`principal_from_certificate`: ``User:<subject DN>`` with the DN printed exactly as Java's
  ``X500Principal.getName()`` (RFC 2253) does, which is what Kafka's default
  ``ssl.principal.mapping.rules=DEFAULT`` returns.

Every problem with the files is a ``ValueError`` naming the setting.
"""

from __future__ import annotations

import ssl

from asn1crypto import core as asn1_core
from asn1crypto import x509 as asn1_x509

from litemq.config import TLS_PROTOCOLS, BrokerConfig
from litemq.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["principal_from_certificate", "principal_of", "rpc_client_context", "rpc_server_context",
           "server_context", "subject_rfc2253"]

CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
"""``ssl.client.auth`` -> verify mode of a server-side context."""


# ------------------------------------------------------------------ contexts
def _new_context(purpose: int) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _load_keystore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str | None) -> None:
    location = cfg.listener_setting(listener, "ssl.keystore.location")
    if not location:
        raise ValueError("ssl.keystore.location is required: a PEM file holding the certificate chain and the "
                         "private key")
    password = cfg.listener_setting(listener, "ssl.key.password") or None
    try:
        ctx.load_cert_chain(location, password=password)
    except ssl.SSLError as exc:
        raise ValueError(f"ssl.keystore.location: {location} is not a PEM file holding a certificate chain and "
                         f"its private key, or ssl.key.password does not decrypt the key ({exc})") from None
    except OSError as exc:
        raise ValueError(f"ssl.keystore.location: cannot read {location}: {exc.strerror or exc}") from None


def _load_truststore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str | None, purpose) -> None:
    location = cfg.listener_setting(listener, "ssl.truststore.location")
    if not location:
        ctx.load_default_certs(purpose)
        return
    try:
        ctx.load_verify_locations(cafile=location)
    except ssl.SSLError as exc:
        raise ValueError(f"ssl.truststore.location: {location} holds no PEM CA certificate ({exc})") from None
    except OSError as exc:
        raise ValueError(f"ssl.truststore.location: cannot read {location}: {exc.strerror or exc}") from None


def client_auth(cfg: BrokerConfig, listener: str, security_protocol: str) -> str:
    """The effective ``ssl.client.auth`` (none|requested|required) of a TLS listener.

    Kafka (KIP-684): on SASL_SSL listeners the broker-wide value is ignored; only
    ``listener.name.<listener>.ssl.client.auth`` asks SASL clients for a certificate too.

    Raises:
        ValueError: not one of the three values.
    """
    if security_protocol == "SASL_SSL":
        value = cfg.listener_overrides.get(listener.upper(), {}).get("ssl.client.auth", "none")
    else:
        value = cfg.listener_setting(listener, "ssl.client.auth")
    value = value.strip().lower()
    if value not in CLIENT_AUTH_MODES:
        raise ValueError(f"ssl.client.auth: {value!r} is not one of {', '.join(CLIENT_AUTH_MODES)}")
    return value


def server_context(cfg: BrokerConfig, listener: str, security_protocol: str) -> ssl.SSLContext:
    """The server-side context of TLS listener ``listener`` (its ``listener.name.*.ssl.*``
    overrides first, then the broker-wide ``ssl.*``).

    Raises:
        ValueError: missing/unreadable keystore or truststore, a bad ``ssl.client.auth``.
    """
    ctx = _new_context(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, cfg, listener)
    auth = client_auth(cfg, listener, security_protocol)
    ctx.verify_mode = CLIENT_AUTH_MODES[auth]
    if auth != "none":
        _load_truststore(ctx, cfg, listener, ssl.Purpose.CLIENT_AUTH)
    return ctx


def http_server_context(cfg: BrokerConfig) -> ssl.SSLContext | None:
    """The HTTP port's TLS context: None unless ``http.ssl.enabled``; then HTTPS with the
    broker-wide keystore (``ssl.keystore.location``, ``ssl.key.password``), no client certificates.

    Raises:
        ValueError: naming ``http.ssl.enabled`` and the keystore problem.
    """
    if not cfg.http_ssl_enabled:
        return None
    ctx = _new_context(ssl.PROTOCOL_TLS_SERVER)
    try:
        _load_keystore(ctx, cfg, None)
    except ValueError as exc:
        raise ValueError(f"http.ssl.enabled: {exc}") from None
    return ctx


def rpc_server_context(cfg: BrokerConfig) -> ssl.SSLContext | None:
    """Server side of the RPC port: None unless the inter-broker protocol is SSL/SASL_SSL, then
    mutual TLS (the peer must present a certificate the truststore verifies) with the
    inter-broker listener's keystore and truststore.

    Raises:
        ValueError: as :func:`server_context`.
    """
    name, proto = cfg.inter_broker_listener()
    if proto not in TLS_PROTOCOLS:
        return None
    ctx = _new_context(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, cfg, name)
    _load_truststore(ctx, cfg, name, ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def rpc_client_context(cfg: BrokerConfig) -> ssl.SSLContext | None:
    """Dialling side of the RPC port (peers, and tools asking ``status``): None unless the
    inter-broker protocol is SSL/SASL_SSL; then it presents the keystore's certificate, verifies
    the peer against the truststore and, with ``ssl.endpoint.identification.algorithm=https``,
    checks the peer's certificate names the host dialled.

    Raises:
        ValueError: as :func:`server_context`, or an unknown identification algorithm.
    """
    name, proto = cfg.inter_broker_listener()
    if proto not in TLS_PROTOCOLS:
        return None
    ctx = _new_context(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = cfg.listener_setting(name, "ssl.endpoint.identification.algorithm").strip().lower()
    if algorithm not in ("", "https"):
        raise ValueError(f"ssl.endpoint.identification.algorithm: {algorithm!r} is not https or empty")
    ctx.check_hostname = algorithm == "https"
    _load_truststore(ctx, cfg, name, ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, cfg, name)
    return ctx


# ------------------------------------------------------------------ principals
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
"""Attribute types Java prints by keyword in RFC 2253 form (``AVAKeyword`` rfc2253Compliant)."""
_STRING_CHARSETS = {19: "latin-1", 20: "latin-1", 22: "latin-1", 27: "latin-1", 30: "utf-16-be", 12: "utf-8"}
"""DER string tags Java prints as text (Printable, T61, IA5, General, BMP, UTF8String) and the
charset it decodes them with (``AVA.getCharset``); other tags are printed as ``#hex``."""
_ESCAPED = ',=+<>#;"\\'


def _escape_value(text: str) -> str:
    """Java ``AVA.toRFC2253String`` escaping: backslash before ``,=+<>#;"\\``, NUL as ``\\00``,
    then a backslash before each leading and trailing space or CR."""
    chars: list[str] = []
    for c in text:
        if c in _ESCAPED:
            chars += ["\\", c]
        elif c == "\0":
            chars += ["\\", "0", "0"]
        else:
            chars.append(c)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    return "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(chars))


def _ava_rfc2253(ava) -> str:
    oid = ava["type"].dotted
    raw = ava["value"].dump()
    keyword = _RFC2253_KEYWORDS.get(oid)
    charset = _STRING_CHARSETS.get(raw[0])
    if keyword is None or charset is None:
        return f"{keyword or oid}=#{raw.hex()}"
    text = asn1_core.load(raw).contents.decode(charset, errors="replace")
    return f"{keyword}={_escape_value(text)}"


def subject_rfc2253(der_certificate: bytes) -> str:
    """The subject DN of a DER certificate as Java's ``X500Principal.getName()`` prints it
    (RFC 2253: last RDN first, ``,`` between RDNs, ``+`` inside one; keywords CN, C, L, ST, O,
    OU, STREET, DC, UID, other types as ``OID=#<DER hex>``), e.g. ``CN=client,OU=test,O=LiteMQ``.

    Raises:
        ValueError: the bytes are not a parsable certificate.
    """
    try:
        name = asn1_x509.Certificate.load(der_certificate)["tbs_certificate"]["subject"]
        rdns = list(name.chosen)
        return ",".join("+".join(_ava_rfc2253(ava) for ava in rdn) for rdn in reversed(rdns))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"cannot read the certificate subject: {exc}") from None


def principal_from_certificate(der_certificate: bytes | None) -> KafkaPrincipal:
    """``User:<subject DN>`` (Kafka ``DefaultKafkaPrincipalBuilder`` with
    ``ssl.principal.mapping.rules=DEFAULT``), or ``User:ANONYMOUS`` without a certificate.

    Raises:
        ValueError: an unparsable certificate.
    """
    if not der_certificate:
        return ANONYMOUS
    return KafkaPrincipal("User", subject_rfc2253(der_certificate))


def principal_of(ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
    """The principal of a server-side TLS connection: its verified client certificate's DN,
    ``User:ANONYMOUS`` when the client sent none (``ssl.client.auth`` none or requested).

    Raises:
        ValueError: an unparsable certificate.
    """
    if ssl_object is None:
        return ANONYMOUS
    return principal_from_certificate(ssl_object.getpeercert(binary_form=True))
