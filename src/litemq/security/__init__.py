"""Kafka's security model: principals, SASL credentials and the ACL authorizer.

- :mod:`~litemq.security.principal`: :class:`KafkaPrincipal` (``User:alice``).
- :mod:`~litemq.security.credentials`: SCRAM credentials (RFC 5802 / RFC 7677, KIP-554 storage).
"""
