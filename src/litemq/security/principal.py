"""The authenticated identity of a connection, as Kafka names it.

Source: Kafka 3.9 ``org.apache.kafka.common.security.auth.KafkaPrincipal``. A PLAINTEXT
connection (or SSL without a client certificate) is ``User:ANONYMOUS``; SASL gives
``User:<username>``; SSL with a client certificate gives ``User:<subject DN, RFC 2253>``
(``ssl.principal.mapping.rules=DEFAULT``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KafkaPrincipal:
    """``principal_type:name``, e.g. ``User:alice``. ``str()`` gives the ACL form."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """``"User:alice"`` -> KafkaPrincipal("User", "alice").

        Raises:
            ValueError: no ``:`` separator or an empty type.
        """
        ptype, sep, name = text.strip().partition(":")
        if not sep or not ptype:
            raise ValueError(f"bad principal {text!r}: expected TYPE:NAME such as User:alice")
        return cls(ptype, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
"""The principal of an unauthenticated connection."""
