"""The interconnect cost model (hwm/interconnect.py): ring/tree per op, bandwidth by placement."""
import pytest

from neuronxcc.hwm.interconnect import collective_time, get_interconnect


def test_cost_rules():
    g8 = list(range(8))
    assert collective_time("all_reduce", 1 << 20, [0], "trn1") == 0.0          # a group of one
    small, big = collective_time("all_reduce", 256, g8), collective_time("all_reduce", 64 << 20, g8)
    assert 0 < small < big
    ic = get_interconnect("trn1")
    # small messages: the tree (2 log2 G steps) beats the ring (2 (G-1) steps)
    assert small == pytest.approx(2 * 3 * (ic.step_latency_s + 256 / ic.link_bytes_per_sec))
    # large messages: the ring moves 2 (G-1)/G of the bytes
    ring = 2 * 7 * ic.step_latency_s + 2 * 7 / 8 * (64 << 20) / ic.link_bytes_per_sec
    assert big == pytest.approx(ring)
    assert collective_time("all_gather", 8 << 20, g8) < collective_time("all_reduce", 8 << 20, g8)
    # the two cores of one trn1 chip talk through on-chip DMA, faster than NeuronLink
    assert collective_time("permute", 64 << 20, [0, 1]) < collective_time("permute", 64 << 20, [0, 2])
    # trn2's links are faster than trn1's
    assert collective_time("all_reduce", 64 << 20, list(range(32)), "trn2") < \
        collective_time("all_reduce", 64 << 20, list(range(32)), "trn1")
    with pytest.raises(ValueError):
        collective_time("broadcast", 8, g8)
