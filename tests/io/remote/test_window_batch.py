"""The arithmetic of reading a batch's windows by range (fastprep.io.remote._window_batch: what a
record still lacks, the guess at a window's rows) and fetch="auto"'s choice from measured costs
(fastprep.io.remote._fetch_choice), without a store."""

import pytest

from fastprep.io.remote._fetch_choice import LinkCost, choose
from fastprep.io.remote._window_batch import guess_rows, missing


@pytest.mark.parametrize(("needed", "have", "left"), [
    ([(0, 100)], [], [(0, 100)]),
    ([(0, 100)], [(0, b"x" * 100)], []),
    ([(0, 100)], [(10, b"x" * 20)], [(0, 10), (30, 100)]),
    ([(0, 100), (200, 300)], [(50, b"x" * 200)], [(0, 50), (250, 300)]),
    ([(0, 100)], [(0, b"x" * 40), (40, b"x" * 10), (60, b"x" * 50)], [(50, 60)]),
    ([(5, 10)], [(20, b"x")], [(5, 10)]),
])
def test_missing_is_what_no_part_covers(needed, have, left):
    assert missing(needed, have) == left


def test_the_guess_covers_the_windows_share_of_the_record_and_stays_inside_it():
    a, b = guess_rows(100_000, 1000, (500, 0, 100, 100))
    assert a < 50_000 - 1600 and b > 60_000 + 1600 and b - a < 20_000
    assert guess_rows(100_000, 1000, (0, 0, 1000, 1000)) == (0, 100_000)


def link(latency, bandwidth, share=None):
    cost = LinkCost()
    cost.request(0, latency)
    cost.request(10 << 20, (10 << 20) / bandwidth + latency)
    if share is not None:
        cost.ranged(int(share * 1000), 1000)
    return cost


def test_auto_reads_whole_shards_when_the_pack_fits_or_the_link_is_fast():
    assert choose("auto", 100, None, False, LinkCost(), 10)[0] == "shards"
    assert choose("auto", 100, 1000, False, LinkCost(), 10)[0] == "shards"
    assert choose("auto", 10_000, 1000, False, LinkCost(), 10)[0] == "ranges"  # random reads of a larger pack
    assert choose("auto", 10_000, 1000, True, LinkCost(), 10)[1].endswith("no bandwidth measured yet")
    fast = choose("auto", 10 << 30, 1 << 30, True, link(0.020, 1e9), 250_000)
    assert fast[0] == "shards" and "round trip" in fast[1]


def test_auto_reads_by_range_when_the_measured_link_makes_the_spared_bytes_cost_more():
    slow = link(0.020, 5e6, share=0.3)  # 5 MB/s: 175 kB spared a sample are 35 ms, against 20 ms / 32
    mode, why = choose("auto", 10 << 30, 1 << 30, True, slow, 250_000)
    assert mode == "ranges" and "the link is slow" in why and "5 MB/s" in why
    assert choose("ranges", 1, None, False, LinkCost(), 1) == ("ranges", "fetch='ranges'")


def test_the_choice_is_said_when_it_turns_not_when_its_figures_move(caplog):
    import logging

    from fastprep.io.remote._fetch_choice import announce

    said: list = []
    with caplog.at_level(logging.INFO, logger="fastprep"):
        announce("s3://b/p", ("shards", "auto: ... 1 ms"), said)
        announce("s3://b/p", ("shards", "auto: ... 2 ms"), said)  # a new measurement, the same choice
        announce("s3://b/p", ("ranges", "auto: slow"), said)
    told = [r.getMessage() for r in caplog.records if "fetch='auto'" in r.getMessage()]
    assert len(told) == 2 and "whole shards" in told[0] and "by range" in told[1]
