"""spanning.kernels.hll against the datasketches library it stands in for: the promotion count, the coupons,
the HLL_8 bytes and the registers of many windows at once."""

from __future__ import annotations

import datasketches as ds
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanning.aggregates.distinct import order_free
from spanning.kernels import hll
from spanning.kernels.hll import coupons, hll8_bytes, hll_mode_windows, long_coupons, promotion_count
from tests.budget import examples

HLL_8 = ds.tgt_hll_type.HLL_8


def _library(values, lg_k: int) -> bytes:
    sketch = ds.hll_sketch(lg_k, HLL_8)
    for value in values:
        sketch.update(value)
    return sketch.serialize_updatable()


@pytest.mark.parametrize("lg_k", range(4, 17))
def test_the_promotion_count_is_the_library_s(lg_k):
    sketch, n = ds.hll_sketch(lg_k, HLL_8), 0
    while sketch.serialize_updatable()[7] & 3 != 2:  # the mode byte's low bits: 2 is HLL mode
        sketch.update(f"v{n}")
        n += 1
    assert n == promotion_count(lg_k)  # n distinct strings, no two with one coupon at these sizes


@pytest.mark.parametrize("values", [
    list(range(-5_000, 5_000)), [i * 2**40 for i in range(5_000)], [f"cell-{i}é" for i in range(5_000)],
    [i / 7 for i in range(5_000)],
], ids=["small ints", "large ints", "text", "doubles"])  # fmt: skip
def test_coupons_give_the_library_s_registers(values):
    """Each coupon's low lgK bits name its slot and its bits from 26 on its rank: the max rank per slot over
    the values is the register array of the library's sketch of them, for every type it hashes."""
    coupon = coupons(values, ds)
    for lg_k in (4, 12):
        registers = np.zeros(2**lg_k, dtype=np.uint8)
        np.maximum.at(registers, coupon & (2**lg_k - 1), (coupon >> 26).astype(np.uint8))
        assert registers.tobytes() == _library(values, lg_k)[40:]


def test_long_coupons_are_the_library_s():
    """MurmurHash3 of 64-bit integers in numpy gives the library's coupon for every value: random longs, the
    extremes, small values of both signs."""
    rng = np.random.default_rng(7)
    values = np.r_[rng.integers(-(2**63), 2**63 - 1, 20_000, dtype=np.int64), np.arange(-2_000, 2_000),
                   [2**63 - 1, -(2**63), 0, 1, -1]].astype(np.int64)  # fmt: skip
    assert (long_coupons(values) == coupons(values.tolist(), ds)).all()


@pytest.mark.parametrize("lg_k", [4, 8, 12])
@pytest.mark.parametrize("kind", ["int", "str"])
def test_hll8_bytes_are_the_library_s_but_for_hip_and_the_order_flag(lg_k, kind):
    values = [i * 7919 for i in range(20_000)]
    values = values if kind == "int" else [f"2080{v:011d}" for v in values]
    library = _library(values, lg_k)
    (ours,) = hll8_bytes(np.frombuffer(library[40:], dtype=np.uint8)[None, :], lg_k)
    assert len(ours) == len(library) == 40 + 2**lg_k
    assert ours[:5] + ours[6:8] == library[:5] + library[6:8] and ours[5] == library[5] | 16
    assert ours[16:] == library[16:]  # kxq0, kxq1, the zero registers' count, no aux, the registers
    assert ds.hll_sketch.deserialize(ours).get_estimate() == ds.hll_sketch.deserialize(
        order_free(library)).get_estimate()  # fmt: skip


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 700), min_size=1, max_size=8), distinct=st.integers(1, 900),
       lg_k=st.sampled_from([4, 6, 8, 9]), text=st.booleans(), seed=st.integers(0, 2**32 - 1))  # fmt: skip
def test_windows_in_hll_mode_hold_the_library_s_registers(monkeypatch, sizes, distinct, lg_k, text, seed):
    """Random windows around the promotion count, cut into blocks of 2 windows: a window is returned exactly
    when the library holds its values in HLL mode with that many distinct slots, with the library's registers."""
    monkeypatch.setattr(hll, "BLOCK", 2)
    rng = np.random.default_rng(seed)
    events = rng.integers(0, distinct, 3000)
    values = np.array([f"s{v}" for v in events], dtype=object) if text else events.astype(np.int64)
    window = np.repeat(np.arange(len(sizes)), sizes)
    event = rng.integers(0, len(values), len(window))
    promoted, sketches = hll_mode_windows(values, event, window, len(sizes), lg_k, ds)
    for w in range(len(sizes)):
        library = _library(values[event[window == w]].tolist(), lg_k)
        in_hll_mode = library[7] & 3 == 2
        slots = np.count_nonzero(np.frombuffer(library[40:], dtype=np.uint8)) if in_hll_mode else 0
        assert (w in promoted) == (in_hll_mode and slots >= promotion_count(lg_k))
        if w in promoted:
            ours = sketches[promoted.tolist().index(w)]
            assert ours[40:] == library[40:] and ours[16:40] == library[16:40]
