"""The pure rules of client quotas: Kafka's precedence of quota entities and the rate each
applies to (``ClientQuotaManager``), the metadata record through the replicated image and its
snapshot, and the sampled rate and throttle time (``Rate``, ``QuotaUtils.throttleTime``)."""

from __future__ import annotations

import pytest

from litemq.broker.client_quota_manager import ClientQuotaManager, SampledRate, throttle_time_ms
from litemq.cluster.image import MetadataImage
from litemq.security import records as security_records

U, C = "user", "client-id"

LEVELS = [  # Kafka's order: the first one set applies
    ((U, "alice"), (C, "app")),
    ((U, "alice"), (C, None)),
    ((U, "alice"),),
    ((U, None), (C, "app")),
    ((U, None), (C, None)),
    ((U, None),),
    ((C, "app"),),
    ((C, None),),
]
TAGS = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"), ("alice", ""),
        ("", "app"), ("", "app")]


def _image_with(levels) -> MetadataImage:
    img = MetadataImage()
    entries = [[[list(p) for p in entity], [["producer_byte_rate", float(1000 + i), False]]]
               for i, entity in enumerate(levels)]
    rec, reply = security_records.plan(img, "alter_client_quotas", {"entries": entries})
    assert all(code == 0 for code, _ in reply["results"]), reply
    assert img.apply(rec).error == 0
    return img


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_most_specific_quota_applies_and_names_its_rate(first):
    img = _image_with(LEVELS[first:])
    bound, tags = img.client_quotas.quota("alice", "app", "producer_byte_rate")
    assert bound == 1000.0 and tags == TAGS[first]
    assert img.client_quotas.quota("alice", "app", "consumer_byte_rate") is None


def test_other_users_and_clients_fall_to_the_defaults_or_nothing():
    img = _image_with([((U, "alice"),), ((C, None),)])
    quotas = img.client_quotas
    assert quotas.quota("bob", "app", "producer_byte_rate") == (1001.0, ("", "app"))
    assert quotas.quota("bob", "other", "producer_byte_rate") == (1001.0, ("", "other"))  # a rate each
    assert quotas.quota("alice", "other", "producer_byte_rate") == (1000.0, ("alice", ""))  # alice's shared
    assert _image_with([((U, "alice"),)]).client_quotas.quota("bob", "app", "producer_byte_rate") is None


def test_record_survives_a_snapshot_and_removal_empties_the_entity():
    img = _image_with(LEVELS)
    copy = MetadataImage.from_json(img.to_json())
    assert copy.client_quotas.entities == img.client_quotas.entities and len(copy.client_quotas) == 8
    rec, _ = security_records.plan(copy, "alter_client_quotas", {"entries": [
        [[list(p) for p in LEVELS[0]], [["producer_byte_rate", 0.0, True]]]]})
    copy.apply(rec)
    assert len(copy.client_quotas) == 7 and tuple(sorted(LEVELS[0])) not in copy.client_quotas.entities
    nothing, reply = security_records.plan(copy, "alter_client_quotas", {"entries": [
        [[list(p) for p in LEVELS[0]], [["producer_byte_rate", 0.0, True]]]]})
    assert nothing is None and reply["results"] == [[0, None]]  # removing what is not there: no record


def test_sampled_rate_measures_over_at_least_ten_windows():
    rate = SampledRate()
    rate.record(100_000, 0.0)
    assert rate.window_ms(0.0) == 10_000  # (11 - 1) windows of 1 s before any time passed
    assert rate.rate(0.0) == pytest.approx(10_000)
    for t in range(1, 20):
        rate.record(1000, t * 1000.0)
    # at 19 s the 11 samples kept are those of 9 s .. 19 s: 11 x 1000 B over the 10 s since the oldest
    assert rate.rate(19_000.0) == pytest.approx(11_000 * 1000 / 10_000)
    assert throttle_time_ms(30_000, 10_000, 10_000) == 20_000
    assert throttle_time_ms(9_000, 10_000, 10_000) == 0
    assert throttle_time_ms(1, 0, 10_000) == 2**31 - 1


def test_manager_throttles_only_past_the_quota_and_unrecord_takes_bytes_back():
    img = _image_with([((C, "app"),)])  # 1000 B/s
    now = [0.0]
    manager = ClientQuotaManager(lambda: img.client_quotas, lambda: now[0])
    assert manager.record("producer_byte_rate", "ANONYMOUS", "app", 10_000) == 0  # 1000 B/s: at the quota
    assert manager.record("producer_byte_rate", "ANONYMOUS", "other", 10**6) == 0  # no quota applies
    assert manager.record("producer_byte_rate", "ANONYMOUS", "app", 10_000) == 10_000  # 2x: one window more
    manager.unrecord("producer_byte_rate", "ANONYMOUS", "app", 10_000)
    assert manager.record("producer_byte_rate", "ANONYMOUS", "app", 0) == 0
    assert manager.max_fetch_bytes("ANONYMOUS", "app") is None  # no consumer quota


def test_mutation_bucket_bursts_refills_and_goes_into_debt():
    img = MetadataImage()
    rec, _ = security_records.plan(img, "alter_client_quotas", {"entries": [
        [[["client-id", "app"]], [["controller_mutation_rate", 2.0, False]]]]})
    img.apply(rec)
    now = [0.0]
    manager = ClientQuotaManager(lambda: img.client_quotas, lambda: now[0])
    assert not manager.mutations_exhausted("u", "app")  # a full bucket: 2/s x 11 s = 22 credits
    manager.record_mutations("u", "app", 30)
    assert manager.mutations_exhausted("u", "app") and manager.mutation_throttle_ms("u", "app") == 4000
    now[0] = 4000.0  # 4 s at 2/s: back at zero
    assert not manager.mutations_exhausted("u", "app") and manager.mutation_throttle_ms("u", "app") == 0
    now[0] = 60_000.0
    manager.record_mutations("u", "app", 22)  # refilled only up to the burst
    assert manager.mutation_throttle_ms("u", "app") == 0 and not manager.mutations_exhausted("u", "app")
    manager.record_mutations("u", "app", 1)
    assert manager.mutations_exhausted("u", "app")
    assert not manager.mutations_exhausted("u", "other")  # no quota for that client id
