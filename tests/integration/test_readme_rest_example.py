"""The README's REST example and docs/operations.md's produce/read example are true (issue 17).

The README's bash block is run as written (bash, curl, python3, the ``litemq`` command) against
a real broker process, after the Quick start's ``topic create logs -p 3`` and unkeyed produce;
only the addresses are changed to the test broker's. The record posted with key ``k1`` and the
one sent with the same key by ``litemq produce -K`` must be what the example reads back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from litemq.protocol.partitioner import partition_for_key
from litemq.testing.process import BrokerProcess

ROOT = Path(__file__).parents[2]


def _bash_blocks(path: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", path.read_text(), re.S)


def test_readme_rest_example_reads_the_partition_the_record_went_to(tmp_path):
    blocks = _bash_blocks(ROOT / "README.md")
    quick = next(b for b in blocks if "litemq topic create logs -p 3" in b)
    rest = next(b for b in blocks if "/v3/clusters" in b and "/records" in b)
    setup = [line.split("#")[0].strip() for line in quick.splitlines()
             if line.startswith(("litemq topic create logs", "printf"))]
    assert len(setup) == 2, quick
    with BrokerProcess(tmp_path / "data", http_port=0) as broker:
        script = "set -euo pipefail\n" + "\n".join(setup) + "\n" + rest.replace(
            "localhost:8082", f"127.0.0.1:{broker.http_port}")
        env = dict(os.environ, LITEMQ_BOOTSTRAP_SERVER=broker.bootstrap_servers,
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        r = subprocess.run(["bash", "-c", script], capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = r.stdout.decode().splitlines()
    said = [line for line in out if line.startswith("k1 went to partition")]
    assert said, f"the example does not show where the record went: {out}"
    partition = int(said[0].split()[4])
    assert partition == partition_for_key(b"k1", 3) == 2, said  # Kafka's Java client's partition
    page = json.loads(out[-1])
    assert page["partition_id"] == partition
    got = [(d["key"], d["value"]["data"]) for d in page["data"]]
    assert got == [({"type": "STRING", "data": "k1"}, '{"n":1}'), ({"type": "STRING", "data": "k1"}, '{"n": 2}')], got


def test_operations_doc_example_names_the_partition_of_its_key():
    doc = (ROOT / "docs" / "operations.md").read_text()
    produce = doc[doc.index("### Produce"):doc.index("### Read")]
    read = doc[doc.index("### Read"):doc.index("### Errors")]
    created = re.search(r"litemq topic create orders -p (\d+)", produce)
    assert created, "the example does not say how many partitions orders has"
    key = re.search(r'"key": \{"type": "STRING", "data": "([^"]+)"\}', produce)[1]
    answered = int(re.search(r'"partition_id": (\d+)', produce)[1])
    partitions = int(created[1])
    assert answered == partition_for_key(key.encode(), partitions)
    assert f"/topics/orders/partitions/{answered}/records" in read
    assert {int(p) for p in re.findall(r'"partition_id": (\d+)', read)} == {answered}
