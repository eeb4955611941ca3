"""The console's throughput rates (console.counter_rates): per broker, so a broker missing from a
sample, coming back or restarting (its counters reset) is neither a spike nor a drop to zero."""

from __future__ import annotations

from litemq.broker.http.console import counter_rates


def _c(time_ms: int, **per_topic_bytes_in: int) -> dict:
    return {"time_ms": time_ms, "bytes_in": per_topic_bytes_in, "bytes_out": {}, "messages_in": {}}


def test_rates_are_summed_over_brokers_each_over_its_own_interval():
    prev = {1: _c(0, t=1000), 2: _c(500, t=5000)}
    cur = {1: _c(10_000, t=11_000), 2: _c(10_500, t=25_000)}
    assert counter_rates(prev, cur)["t"]["bytes_in"] == 1000 + 2000


def test_a_broker_that_comes_back_adds_no_spike_and_one_missing_adds_nothing():
    prev = {1: _c(0, t=1000)}
    cur = {1: _c(10_000, t=11_000), 2: _c(10_000, t=10**12)}  # broker 2 was not in the earlier sample
    assert counter_rates(prev, cur)["t"]["bytes_in"] == 1000
    assert counter_rates(cur, prev) == {}  # no broker in both samples with time moving forward


def test_a_restarted_broker_counts_from_zero():
    prev = {1: _c(0, t=10**9)}
    cur = {1: _c(10_000, t=20_000)}  # the counter restarted and reached 20,000 in 10 s
    assert counter_rates(prev, cur)["t"]["bytes_in"] == 2000
