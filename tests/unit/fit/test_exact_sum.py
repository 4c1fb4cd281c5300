import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.exact_sum import ExactSum

floats = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@settings(max_examples=200, deadline=None)
@given(st.lists(floats, max_size=60), st.integers(1, 6), st.randoms(use_true_random=False))
def test_exact_sum_matches_fsum_for_any_partitioning(values, parts, rnd):
    arr = np.array(values, dtype=np.float64)
    cuts = sorted(rnd.randint(0, len(arr)) for _ in range(parts - 1))
    pieces = np.split(arr, cuts)
    rnd.shuffle(pieces)
    total = ExactSum()
    for piece in pieces:
        total = total.merge(ExactSum().add_array(piece))
    assert float(total) == math.fsum(values)


def test_json_round_trip_and_large_arrays():
    rng = np.random.default_rng(0)
    x = rng.normal(size=100_003) * 10.0 ** rng.integers(-8, 8, size=100_003)
    s = ExactSum().add_array(x)
    assert float(ExactSum.from_json(s.to_json())) == math.fsum(x)


def test_exact_over_many_blocks_extreme_exponents_and_zeros():
    """Several vectorized blocks, subnormals, values near the float64 limits and zeros: the sum is the
    exact rational sum, so any split of the array merges to the same value."""
    from fractions import Fraction

    from storage import exact_sum

    rng = np.random.default_rng(3)
    n = 3 * exact_sum._BLOCK + 17
    x = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n)
    x[::7] = 0.0
    x[1::11] = -0.0
    x[:6] = [5e-324, -5e-324, 1.7e308, -1.7e308, 2.2e-308, 1.0]
    exact = sum((Fraction(v) for v in x.tolist()), Fraction(0))
    assert ExactSum().add_array(x).fraction() == exact
    halves = ExactSum().add_array(x[: n // 3]).merge(ExactSum().add_array(x[n // 3 :]))
    assert halves.fraction() == exact
    assert ExactSum().add_array(np.zeros(5)).fraction() == 0


def test_integer_block_path_at_its_limits():
    """A block of the largest mantissas shifted by the widest span the int64 path takes (and one more,
    which takes the per-exponent path) still sums exactly."""
    from fractions import Fraction

    from storage import exact_sum

    for span in (exact_sum._SPAN, exact_sum._SPAN + 1):
        x = np.full(exact_sum._BLOCK, -(2.0**53 - 1))
        x[-1] = 2.0 ** (53 - span - 1)  # frexp exponent 53 - span: the block spans exactly `span` bits
        x[-2] = 0.0
        exact = sum((Fraction(v) for v in x.tolist()), Fraction(0))
        assert ExactSum().add_array(x).fraction() == exact
        assert ExactSum().add_array(-x).fraction() == -exact


@settings(max_examples=60, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, width=64), count=st.integers(0, 5000),
       start=st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300), max_size=5))
def test_add_repeated_is_adding_the_copies(value, count, start):
    repeated = ExactSum().add_array(np.array(start)).add_repeated(value, count)
    copies = ExactSum().add_array(np.array(start)).add_array(np.full(count, value))
    assert repeated.fraction() == copies.fraction()
