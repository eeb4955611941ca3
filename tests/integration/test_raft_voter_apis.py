"""AddRaftVoter (API 80) and RemoveRaftVoter (API 81), KIP-853, on a single broker (issue 20):
a real broker process, the Kafka wire and the CLI.

A single broker is a static quorum of one voter, itself - what a Kafka quorum whose
``kraft.version`` is 0 is - and answers as Kafka's ``KafkaRaftClient`` does there, in its
order: a foreign ClusterId is INCONSISTENT_CLUSTER_ID, a voter without a directory id (the zero
UUID) INVALID_REQUEST "... voter request didn't include a valid voter", any valid voter
UNSUPPORTED_VERSION "Cluster doesn't support adding voter because the kraft.version feature is
0". ``litemq cluster add-controller / remove-controller`` show the error name and exit 1; the
directory id they send is the one DescribeQuorum shows (the broker's ``meta.properties``).
"""

from __future__ import annotations

import base64
import struct
import subprocess
import sys
import uuid

import pytest

from litemq.protocol.errors import ErrorCode
from litemq.storage.meta_properties import read_meta_properties
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
A_DIRECTORY = uuid.UUID("6f1c2d4e-8a9b-4c0d-9e1f-2a3b4c5d6e7f")


def _litemq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, timeout=60, text=True)


def _wire(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def _add(w: WireClient, voter_id: int = 2, directory: uuid.UUID = A_DIRECTORY, cluster_id: str | None = None):
    return w.request(80, 0, {"cluster_id": cluster_id, "timeout_ms": 5000, "voter_id": voter_id,
                             "voter_directory_id": directory,
                             "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9099}]})


def _remove(w: WireClient, voter_id: int = 1, directory: uuid.UUID = A_DIRECTORY, cluster_id: str | None = None):
    return w.request(81, 0, {"cluster_id": cluster_id, "voter_id": voter_id, "voter_directory_id": directory})


def _directory_id(broker) -> str:
    return read_meta_properties(broker.data_dir).directory_id


def test_advertised_and_answered_as_a_static_quorum(broker_proc):
    with _wire(broker_proc) as w:
        versions = {k.api_key: (k.min_version, k.max_version) for k in w.request(18, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert versions[80] == (0, 0) and versions[81] == (0, 0), versions
        cluster_id = w.request(60, 0, {"include_cluster_authorized_operations": False}).cluster_id
        assert cluster_id

        for cid in (None, cluster_id):  # a null cluster id is accepted, as Kafka's hasValidClusterId
            r = _add(w, cluster_id=cid)
            assert (r.error_code, r.throttle_time_ms) == (ErrorCode.UNSUPPORTED_VERSION, 0), r
            assert r.error_message.startswith(
                "Cluster doesn't support adding voter because the kraft.version feature is 0"), r
            r = _remove(w, cluster_id=cid)
            assert r.error_code == ErrorCode.UNSUPPORTED_VERSION, r
            assert "doesn't support removing voter" in r.error_message, r

        # the cluster id is checked first
        r = _add(w, directory=uuid.UUID(int=0), cluster_id="not-this-cluster")
        assert r.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID, r
        assert r.error_message == f'The given id "not-this-cluster" doesn\'t match the cluster id "{cluster_id}"'
        assert _remove(w, cluster_id="not-this-cluster").error_code == ErrorCode.INCONSISTENT_CLUSTER_ID

        # then the voter key: the zero directory id (unknown) or a negative id is no voter
        r = _add(w, directory=uuid.UUID(int=0), cluster_id=cluster_id)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                                   "Add voter request didn't include a valid voter"), r
        r = _remove(w, voter_id=-1)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                                   "Remove voter request didn't include a valid voter"), r

        # the quorum is unchanged: one voter, itself, with its meta.properties directory id
        part = w.request(55, 2, QUORUM).topics[0].partitions[0]
        assert [v.replica_id for v in part.current_voters] == [1] and part.observers == []
        assert part.current_voters[0].replica_directory_id == uuid.UUID(
            bytes=base64.urlsafe_b64decode(_directory_id(broker_proc) + "=="))


def test_a_frame_built_by_hand(broker_proc):
    """AddRaftVoter v0 encoded here byte by byte (request header v2, compact strings, tagged
    fields) as a Kafka client sends it, not by LiteMQ's codec; the answer read the same way."""
    client_id = b"raw"
    body = (b"\x00"  # ClusterId: null compact string
            + struct.pack(">ii", 5000, 7)  # TimeoutMs, VoterId
            + A_DIRECTORY.bytes  # VoterDirectoryId
            + b"\x02" + b"\x0aPLAINTEXT" + b"\x0a127.0.0.1" + struct.pack(">H", 9099) + b"\x00"  # 1 listener
            + b"\x00")  # the body's tagged fields
    header = struct.pack(">hhih", 80, 0, 4242, len(client_id)) + client_id + b"\x00"
    with _wire(broker_proc) as w:
        w.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        frame = w.read_frame()
    correlation_id, header_tags, throttle_ms, error_code = struct.unpack(">ibih", frame[:11])
    assert (correlation_id, header_tags, throttle_ms) == (4242, 0, 0)
    assert error_code == ErrorCode.UNSUPPORTED_VERSION
    assert b"Cluster doesn't support adding voter because the kraft.version feature is 0" in frame[11:]


def test_cli_add_and_remove_controller_on_a_single_broker(broker_proc):
    b = broker_proc.bootstrap_servers
    directory_id = _directory_id(broker_proc)
    # without --controller-directory-id it is DescribeQuorum's; the broker's answer is the error
    out = _litemq("cluster", "remove-controller", "-b", b, "--controller-id", "1")
    assert out.returncode == 1, out
    assert "removing controller 1 failed: UNSUPPORTED_VERSION: Cluster doesn't support removing voter" \
        in " ".join(out.stderr.split()), out.stderr
    out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "1", "--timeout-ms", "3000")
    assert out.returncode == 1 and "UNSUPPORTED_VERSION" in out.stderr, out
    out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "3",
                  "--controller-directory-id", directory_id)
    assert out.returncode == 1 and "adding controller 3 failed: UNSUPPORTED_VERSION" in out.stderr, out
    out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "3",
                  "--controller-directory-id", str(A_DIRECTORY))  # a UUID in its usual text is taken too
    assert out.returncode == 1 and "UNSUPPORTED_VERSION" in out.stderr, out
    # a node DescribeQuorum does not show, or a directory id that is none, stops before any request
    out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "3")
    assert out.returncode == 1 and "node 3 is neither a voter nor an observer of the metadata quorum (voters: 1," \
        in " ".join(out.stderr.split()), out
    out = _litemq("cluster", "remove-controller", "-b", b, "--controller-id", "3")
    assert out.returncode == 1 and "node 3 is neither a voter nor an observer" in out.stderr, out
    out = _litemq("cluster", "remove-controller", "-b", b, "--controller-id", "1",
                  "--controller-directory-id", "nonsense")
    assert out.returncode == 1 and "is not a directory id" in out.stderr, out
    out = _litemq("cluster", "add-controller", "-b", b)
    assert out.returncode == 2 and "--controller-id" in out.stderr, out  # click's usage error
