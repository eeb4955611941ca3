"""Template mining (litemq.pipeline.templates) and its grouping accuracy on loghub.

GA floors (``test_grouping_accuracy_per_system``): for every system our GA must be
  * >= 0.80 x Drain's published GA (Zhu et al., ICSE-SEIP 2019), the bar from the issue, and
  * >= the recorded baseline in ``GA_BASELINE`` minus 0.005: drain3 is deterministic for a
    given input order, so any drop is a change of masking/profile/parsing, not noise.
Both are accuracy asserts on fixed data; there are no timing asserts.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from litemq.pipeline.accuracy import (
    DRAIN_PAPER_GA,
    SYSTEMS,
    evaluate_system,
    grouping_accuracy,
)
from litemq.pipeline.formats import parse_line
from litemq.pipeline.templates import BENCHMARK_PROFILES, PROFILES, Profile, TemplateMiner, make_config

#: GA measured with the PROFILES of this commit (loghub original ground truth), rounded down.
GA_BASELINE = {
    "HDFS": 0.997, "Hadoop": 0.970, "Spark": 0.920, "Zookeeper": 0.986, "BGL": 0.981,
    "HPC": 0.932, "Thunderbird": 0.960, "Windows": 0.993, "Linux": 0.692, "Android": 0.912,
    "HealthApp": 1.000, "Apache": 1.000, "Proxifier": 1.000, "OpenSSH": 0.994,
    "OpenStack": 0.891, "Mac": 0.852,
}


@pytest.fixture(scope="module")
def results(loghub_dir):
    return {s: evaluate_system(s, loghub_dir) for s in SYSTEMS}


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_grouping_accuracy_per_system(system, results):
    r = results[system]
    assert r.ga >= 0.8 * DRAIN_PAPER_GA[system], (system, r.ga, DRAIN_PAPER_GA[system])
    assert r.ga >= GA_BASELINE[system] - 0.005, (system, r.ga, GA_BASELINE[system])
    if r.ga_corrected is not None:  # loghub-2.0 corrected GT (14 systems): same bar
        assert r.ga_corrected >= GA_BASELINE[system] - 0.01, (system, r.ga_corrected)


def test_every_format_has_profiles():
    from litemq.pipeline.formats import FORMATS

    assert set(FORMATS) <= set(PROFILES)
    assert set(SYSTEMS.values()) <= set(BENCHMARK_PROFILES)


# ---------------------------------------------------------------------------------------------
# grouping_accuracy (the loghub metric)


def test_grouping_accuracy_metric():
    assert grouping_accuracy("aabbc", [1, 1, 2, 2, 3]) == 1.0
    # predicted group {0,1,2} mixes a and b: only c's line is right
    assert grouping_accuracy("aabbc", [1, 1, 1, 2, 3]) == pytest.approx(1 / 5)
    # a split across two predicted groups: neither counts
    assert grouping_accuracy("aaab", [1, 1, 2, 3]) == pytest.approx(1 / 4)
    assert grouping_accuracy("ab", ["x", "y"]) == 1.0
    with pytest.raises(ValueError):
        grouping_accuracy("ab", [1])
    with pytest.raises(ValueError):
        grouping_accuracy([], [])


# ---------------------------------------------------------------------------------------------
# TemplateMiner API


def test_add_returns_id_template_is_new():
    m = TemplateMiner("hdfs")
    tid, tpl, new = m.add("PacketResponder 1 for block blk_38865049064139660 terminating")
    assert isinstance(tid, int) and new is True
    assert tpl == "PacketResponder <NUM> for block <BLK> terminating"
    tid2, tpl2, new2 = m.add("PacketResponder 0 for block blk_-6952295868487656571 terminating")
    assert (tid2, tpl2, new2) == (tid, tpl, False)
    tid3, _, new3 = m.add("Receiving block blk_1 src: /10.250.19.102:54106 dest: /10.250.19.102:50010")
    assert tid3 != tid and new3
    assert len(m) == 2 and m.templates()[tid] == tpl


def test_default_profile_masks_ips_hex_numbers():
    m = TemplateMiner("no-such-format")
    assert m.profile == PROFILES["default"]
    _, tpl, _ = m.add("conn from 10.1.2.3:8080 id 0xdeadbeef took 12.5 ms "
                      "req 123e4567-e89b-12d3-a456-426614174000")
    assert tpl == "conn from <IP> id <HEX> took <NUM> ms req <UUID>"


def test_wildcard_and_drop_profile_options():
    prof = Profile(depth=4, sim_th=0.5, masks=((r"\d+", "NUM"),), wildcard=True,
                   drop=(r"\s\(\d+ KB\)(?=\s)",))
    m = TemplateMiner("x", profile=prof)
    a = m.add("sent 10 (1 KB) bytes ok")
    b = m.add("sent 20 bytes ok")
    assert a[0] == b[0] and b[1] == "sent <*> bytes ok"
    assert make_config(prof).masking_instructions[0].mask_with == "*"


def _hdfs_messages(loghub_dir: Path) -> list[str]:
    path = loghub_dir / "loghub" / "HDFS" / "HDFS_2k.log"
    return [parse_line(ln, "hdfs").message for ln in path.read_text().splitlines()]


@pytest.mark.parametrize("how", ["state", "pickle"])
def test_checkpoint_restore_gives_same_ids(how, loghub_dir):
    msgs = _hdfs_messages(loghub_dir)
    straight = TemplateMiner("hdfs")
    expected = [straight.add(x) for x in msgs]

    m = TemplateMiner("hdfs")
    got = [m.add(x) for x in msgs[:1000]]
    if how == "state":
        blob = m.state()
        assert isinstance(blob, bytes) and len(blob) < 200_000
        m = TemplateMiner.from_state(blob)
    else:
        m = pickle.loads(pickle.dumps(m))
    assert m.fmt == "hdfs" and m.profile == PROFILES["hdfs"]
    got += [m.add(x) for x in msgs[1000:]]
    assert got == expected
    assert m.templates() == straight.templates()


def test_state_keeps_custom_profile():
    prof = Profile(depth=3, sim_th=0.9, masks=(), drop=(r"\s\[x\]",))
    m = TemplateMiner("custom", profile=prof)
    m.add("a b c [x] d")
    r = TemplateMiner.from_state(m.state())
    assert r.profile == prof
    assert r.add("a b c d")[2] is False


def test_from_state_rejects_garbage():
    with pytest.raises(ValueError):
        TemplateMiner.from_state(b"not a state")
    import json
    import zlib

    with pytest.raises(ValueError, match="version"):
        TemplateMiner.from_state(zlib.compress(json.dumps({"v": 99}).encode()))
