"""Test certificates for the security tests: one trustme CA, a broker certificate, a client one.

The ``pki`` fixture (one per test session) writes PEM files into a temporary directory:

- ``ca_pem``: the CA certificate (broker ``ssl.truststore.location``; client ``ssl.ca.location``,
  ``ssl_cafile``, ``cafile``).
- ``server_pem``: the broker keystore (``ssl.keystore.location``): certificate chain and private
  key in one file, SANs ``127.0.0.1`` and ``localhost``.
- ``client_pem`` / ``client_key``: a client certificate and its key, subject
  ``CN=client,OU=test,O=LiteMQ`` (``client_dn``; the principal is ``User:`` + that DN).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme


@dataclass
class Pki:
    """Paths of the PEM files (see the module docstring) plus helpers to use them."""

    ca: trustme.CA
    dir: Path
    ca_pem: Path
    server_pem: Path
    client_pem: Path
    client_key: Path
    client_dn: str = "CN=client,OU=test,O=LiteMQ"

    def issue_client(self, common_name: str, organization_unit: str = "test") -> tuple[Path, Path, str]:
        """A new client certificate signed by the CA: (cert PEM path, key PEM path, subject DN
        as the broker prints it)."""
        leaf = self.ca.issue_cert(f"{common_name}.client.test", common_name=common_name,
                                  organization_name="LiteMQ", organization_unit_name=organization_unit)
        cert, key = self.dir / f"{common_name}.pem", self.dir / f"{common_name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key, f"CN={common_name},OU={organization_unit},O=LiteMQ"

    def broker_overrides(self, client_auth: str = "none") -> dict[str, str]:
        """Broker settings for TLS listeners with these files."""
        return {"ssl.keystore.location": str(self.server_pem), "ssl.truststore.location": str(self.ca_pem),
                "ssl.client.auth": client_auth}

    def client_context(self, with_cert: bool = False) -> ssl.SSLContext:
        """A client context trusting the CA (checking the host name), optionally presenting the
        client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca_pem))
        if with_cert:
            ctx.load_cert_chain(str(self.client_pem), str(self.client_key))
        return ctx


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA(organization_name="LiteMQ test CA")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="broker", organization_name="LiteMQ",
                           organization_unit_name="test")
    server.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    client = ca.issue_cert("client.client.test", common_name="client", organization_name="LiteMQ",
                           organization_unit_name="test")
    client.cert_chain_pems[0].write_to_path(str(d / "client.pem"))
    client.private_key_pem.write_to_path(str(d / "client.key"))
    return Pki(ca, d, d / "ca.pem", d / "server.pem", d / "client.pem", d / "client.key")


@pytest.fixture(scope="module")
def idp():
    """A stand-in OAuth/OIDC provider (``oauth_idp.py``) serving on loopback for one test module,
    knowing the clients ``oauth_idp.CLIENTS``."""
    from tests.security.oauth_idp import CLIENTS, OAuthProvider

    provider = OAuthProvider(CLIENTS)
    yield provider
    provider.close()
