"""SCRAM credentials (RFC 5802 section 3, RFC 7677) as Kafka stores them (KIP-554).

A credential keeps ``salt``, ``stored_key = H(HMAC(SaltedPassword, "Client Key"))``,
``server_key = HMAC(SaltedPassword, "Server Key")`` and the iteration count, never the
password. AlterUserScramCredentials (Kafka message schema v0) sends the salt and the
``SaltedPassword = Hi(password, salt, iterations)`` computed by the client.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

from litemq import limits

SCRAM_MECHANISMS: dict[str, tuple[int, str]] = {
    "SCRAM-SHA-256": (1, "sha256"),
    "SCRAM-SHA-512": (2, "sha512"),
}
"""Mechanism name -> (Kafka ScramMechanism type code on the wire, hashlib name)."""

MECHANISM_BY_CODE: dict[int, str] = {code: name for name, (code, _) in SCRAM_MECHANISMS.items()}


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism (bytes are raw, not base64)."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict:
        return {"mechanism": self.mechanism, "salt": self.salt.hex(), "stored_key": self.stored_key.hex(),
                "server_key": self.server_key.hex(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict) -> "ScramCredential":
        return cls(d["mechanism"], bytes.fromhex(d["salt"]), bytes.fromhex(d["stored_key"]),
                   bytes.fromhex(d["server_key"]), int(d["iterations"]))


def _hash_name(mechanism: str) -> str:
    try:
        return SCRAM_MECHANISMS[mechanism][1]
    except KeyError:
        raise ValueError(f"unsupported SCRAM mechanism {mechanism!r}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 ``Hi(Normalize(password), salt, i)`` (PBKDF2-HMAC); SASLprep is not applied."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The stored credential for ``SaltedPassword`` (what AlterUserScramCredentials carries).

    Raises:
        ValueError: unknown mechanism, or iterations outside Kafka's 4096..16384.
    """
    hname = _hash_name(mechanism)
    if not limits.SCRAM_MIN_ITERATIONS <= iterations <= limits.SCRAM_MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations} outside {limits.SCRAM_MIN_ITERATIONS}.."
                         f"{limits.SCRAM_MAX_ITERATIONS}")
    client_key = hmac.new(salted, b"Client Key", hname).digest()
    stored_key = hashlib.new(hname, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hname).digest()
    return ScramCredential(mechanism, bytes(salt), stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = 4096,
                    salt: bytes | None = None) -> ScramCredential:
    """A fresh credential for ``password`` (random 32-byte salt unless given)."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


def verify_password(cred: ScramCredential, password: str) -> bool:
    """True when ``password`` derives ``cred`` (used by SASL/PLAIN against SCRAM users)."""
    salted = salted_password(cred.mechanism, password, cred.salt, cred.iterations)
    return hmac.compare_digest(credential_from_salted_password(
        cred.mechanism, cred.salt, salted, cred.iterations).stored_key, cred.stored_key)
