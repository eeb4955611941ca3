"""The deterministic simulator in CI: a bounded number of seeds (more on demand with
``python -m litemq.raft.sim --seeds 5000``)."""

from __future__ import annotations

import pytest

from litemq.raft import step as raft_step
from litemq.raft.raft_log import RaftLog
from litemq.raft.sim import Simulation, Violation, config_for, main, run_seed

CI_SEEDS = 2000
CI_STEPS = 1000
CHUNK = 100


@pytest.mark.parametrize("first", range(0, CI_SEEDS, CHUNK))
def test_simulator_seeds(first):
    for seed in range(first, first + CHUNK):
        try:
            sim = run_seed(seed, config_for(seed, CI_STEPS))
        except Violation as v:
            pytest.fail(f"{v}\nreproduce: python -m litemq.raft.sim --seed {seed} --trace\n" + "\n".join(v.trace[-60:]))
        assert sim.committed, f"seed {seed} committed nothing"


def test_same_seed_same_run():
    a, b = run_seed(7, config_for(7, 500)), run_seed(7, config_for(7, 500))
    assert a.committed == b.committed and list(a.trace) == list(b.trace) and a.leaders == b.leaders


def test_cli_reproduces_a_seed(capsys):
    assert main(["--seed", "3", "--steps", "300"]) == 0
    assert "1 seeds, 1 passed" in capsys.readouterr().out


def test_digest_identifies_a_run(capsys):
    """``--digest`` (used to show that a refactored core behaves identically, seed for seed):
    the same seed gives the same digests, another seed other ones."""
    a, b = run_seed(5, config_for(5, 300), digest=True), run_seed(5, config_for(5, 300), digest=True)
    c = run_seed(6, config_for(6, 300), digest=True)
    assert a.ready_digest == b.ready_digest and a.committed_digest() == b.committed_digest()
    assert a.ready_digest != c.ready_digest and a.committed_digest() != c.committed_digest()
    assert run_seed(5, config_for(5, 300)).ready_digest is None
    assert main(["--seed", "5", "--steps", "300", "--digest"]) == 0
    out = capsys.readouterr().out
    assert f"seed 5 readies {a.ready_digest:08x} committed {a.committed_digest():08x} " in out


def _caught(seeds=range(20)):
    for seed in seeds:
        try:
            run_seed(seed, config_for(seed, 1000))
        except Violation:
            return True
    return False


def test_simulator_catches_votes_without_the_up_to_date_check(monkeypatch):
    """Sanity check of the checker: break §5.4.1 and Leader Completeness must fail."""
    monkeypatch.setattr(RaftLog, "is_up_to_date", lambda self, offset, term: True)
    assert _caught()


def test_simulator_catches_double_voting(monkeypatch):
    orig = raft_step.handle_vote_request

    def forgetful(r, m):
        r.voted_for = None
        r.leader_id = None
        orig(r, m)

    monkeypatch.setattr(raft_step, "handle_vote_request", forgetful)
    assert _caught()


def test_simulator_catches_acks_before_persisting(monkeypatch):
    """A follower that acknowledges before its entries are durable loses acked data on crash."""
    orig = Simulation.pump

    def send_first(self, node, crash_at=None):
        if crash_at is not None and node.raft is not None and node.raft.has_ready():
            rd = node.raft.ready()
            for m in rd.messages:  # sent, then the crash loses the unsynced entries
                self.send(m)
            return self.crash(node)
        return orig(self, node, crash_at)

    monkeypatch.setattr(Simulation, "pump", send_first)
    cfgs = {seed: config_for(seed, 2000) for seed in range(40)}
    for cfg in cfgs.values():
        cfg.p_crash = 0.05
        cfg.p_restart = 0.2
    caught = False
    for seed, cfg in cfgs.items():
        try:
            run_seed(seed, cfg)
        except Violation:
            caught = True
            break
    assert caught
