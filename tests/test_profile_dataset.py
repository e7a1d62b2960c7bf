"""The profiler's storage: the key index agrees with a dict of first occurrences on dense, strided and
sparse keys; compact columns give back every float64 bit for bit, and 0/1 or token counts in 2 bytes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ngrp_lib.profile.compact import CompactFloats, CompactInts
from ngrp_lib.profile.dataset import KeyIndex
from ngrp_lib.profile.records import ResultStore

keys = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), max_size=60)


def _store(pairs, stride: int, base: int) -> ResultStore:
    store = ResultStore()
    for task, rollout in pairs:
        store.add({"reward": 1.0}, base + task * stride, rollout)
    return store


@given(keys, st.sampled_from([1, 3, 64, 10**9]), st.sampled_from([0, 7, 2**40]), keys)
def test_key_index_is_a_dict_of_first_positions(pairs, stride, base, probes):
    store = _store(pairs, stride, base)
    index = KeyIndex(store)
    first: dict = {}
    for at, (task, rollout) in enumerate(pairs):
        first.setdefault((base + task * stride, rollout), at)
    wanted = [(base + t * stride + shift, r) for t, r in probes + pairs for shift in (0, 1)]
    wanted += [(0, 0), (base, 99), (2**62, 0)]
    got = [index.lookup(t, r) for t, r in wanted]
    assert got == [first.get(key, -1) for key in wanted]
    tasks = np.array([t for t, _ in wanted], dtype=np.int64)
    rollouts = np.array([r for _, r in wanted], dtype=np.int64)
    assert index.find(tasks, rollouts).tolist() == got
    if stride == 1 and len(first) > 20:
        assert index.dense  # a run's keys take one slot per lattice point


floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=False, width=64),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e-310, 2049.0, 65504.0, 1e300]),
)


@given(st.lists(st.lists(floats, max_size=50), max_size=200))
def test_compact_floats_are_exact(blocks):
    column = CompactFloats()
    for block in blocks:
        column.add(np.array(block, dtype=np.float64))
    flat = np.array([x for block in blocks for x in block], dtype=np.float64)
    back = column.values()
    assert back.dtype == np.float64 and len(column) == len(flat)
    assert back.view(np.int64).tolist() == flat.view(np.int64).tolist() or (
        np.array_equal(back, flat, equal_nan=True) and (np.signbit(back) == np.signbit(flat)).all()
    )
    assert column.has_nan == bool(np.isnan(flat).any())


@given(st.lists(st.integers(0, 2**63 - 1) | st.integers(0, 300), max_size=9000))
def test_compact_ints_are_exact(values):
    column = CompactInts()
    column.add(np.array(values, dtype=np.int64))
    assert column.values().tolist() == values


def test_small_numbers_take_two_bytes():
    rng = np.random.default_rng(0)
    rewards, tokens = CompactFloats(), CompactFloats()
    for _ in range(100):
        rewards.add(rng.integers(0, 2, 97).astype(np.float64))
        tokens.add(rng.integers(0, 2048, 97).astype(np.float64))
    assert rewards.nbytes == tokens.nbytes == 2 * 9700
    fractions = CompactFloats()
    fractions.add(rng.random(9700))
    assert fractions.nbytes == 8 * 9700
