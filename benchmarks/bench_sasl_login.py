"""What one SASL login costs, per mechanism, on one ``litemq serve`` process.

    python benchmarks/bench_sasl_login.py [--logins N] [--rounds R]

One broker with SASL_PLAINTEXT listeners (no TLS, so only SASL is measured) offering PLAIN
(a JAAS user), SCRAM-SHA-256 and SCRAM-SHA-512 (4096 iterations, KIP-554 credentials) and
OAUTHBEARER, unsecured (KIP-255, Kafka's development default) on one listener and signed JWTs
(KIP-768: RS256 and ES256, checked against the JWKS of the tests' stand-in OAuth provider, keys
cached after the first login) on two others. For each mechanism, ``N`` logins one after the
other on new connections with a raw client (TCP connect, SaslHandshake, SaslAuthenticate
exchange, one Metadata request to prove the session): wall time per login p50/p99, and the
broker's CPU per login (user+system time of its process over the logins, from /proc). Rounds
rotate the mechanisms; the table gives medians over rounds. Tokens are made before the clock
starts (a client reuses one token for many connections).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_broker import machine, pct

from litemq.security.oauthbearer import JWT_VALIDATOR_CLASS
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.security.oauth_idp import AUDIENCE, OAuthProvider, unsecured_token
from tests.security.security_helpers import scram_upsertion

USER, PASSWORD = "bench", "bench-secret"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _login(port: int, mechanism: str, token: str | None) -> None:
    with WireClient("127.0.0.1", port) as w:
        if mechanism == "PLAIN":
            w.sasl_plain(USER, PASSWORD)
        elif mechanism.startswith("SCRAM"):
            w.sasl_scram(mechanism, USER, PASSWORD)
        else:
            w.sasl_handshake("OAUTHBEARER")
            resp = w.sasl_authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            assert resp.auth_bytes == b"", resp.auth_bytes
        assert len(w.request(3, 1, {"topics": None}).brokers) == 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logins", type=int, default=200, help="logins per mechanism and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rs256 = OAuthProvider({}, lifetime_s=3600)
    es256 = OAuthProvider({}, lifetime_s=3600, algorithm="ES256")
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,UNSECURED:SASL_PLAINTEXT,"
                                          "RS:SASL_PLAINTEXT,ES:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    for name, idp in (("rs", rs256), ("es", es256)):
        overrides[f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class"] = JWT_VALIDATOR_CLASS
        overrides[f"listener.name.{name}.sasl.oauthbearer.jwks.endpoint.url"] = idp.jwks_url
    cases = [("PLAIN", "SASL", None), ("SCRAM-SHA-256", "SASL", None), ("SCRAM-SHA-512", "SASL", None),
             ("OAUTHBEARER unsecured", "UNSECURED", unsecured_token(USER, lifetime_s=3600)),
             ("OAUTHBEARER RS256", "RS", rs256.token(USER)), ("OAUTHBEARER ES256", "ES", es256.token(USER))]
    results: dict[str, list[dict]] = {name: [] for name, _, _ in cases}
    with tempfile.TemporaryDirectory() as d:
        with BrokerProcess(Path(d) / "data", overrides=overrides,
                           listeners={"PLAINTEXT": 0, "SASL": 0, "UNSECURED": 0, "RS": 0, "ES": 0}) as broker:
            with WireClient("127.0.0.1", broker.ports["PLAINTEXT"]) as admin:  # AlterUserScramCredentials v0
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    resp = admin.request(51, 0, {"deletions": [], "upsertions": [
                        scram_upsertion(USER, PASSWORD, m, 4096)]})
                    assert all(r.error_code == 0 for r in resp.results), resp
            pid = broker.proc.pid
            for name, listener, token in cases:  # warm-up: connections, the JWKS fetch
                _login(broker.ports[listener], name.split()[0], token)
            for r in range(args.rounds):
                order = cases[r % len(cases):] + cases[:r % len(cases)]
                for name, listener, token in order:
                    ms = []
                    cpu0 = _cpu_s(pid)
                    for _ in range(args.logins):
                        t0 = time.perf_counter()
                        _login(broker.ports[listener], name.split()[0], token)
                        ms.append((time.perf_counter() - t0) * 1000)
                    cpu_ms = (_cpu_s(pid) - cpu0) * 1000 / args.logins
                    results[name].append({"p50": pct(ms, 0.5), "p99": pct(ms, 0.99), "cpu": cpu_ms})
    rs256.close()
    es256.close()
    print(f"## SASL login cost (`python benchmarks/bench_sasl_login.py --logins {args.logins} "
          f"--rounds {args.rounds}`)\n")
    print("| mechanism | login p50 ms | login p99 ms | broker CPU per login ms |")
    print("|---|---:|---:|---:|")
    for name, _, _ in cases:
        rows = results[name]
        med = {k: statistics.median(r[k] for r in rows) for k in ("p50", "p99", "cpu")}
        print(f"| {name} | {med['p50']:.2f} | {med['p99']:.2f} | {med['cpu']:.2f} |")
    print(f"\nMachine: {machine()}; load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
