"""The student bundle's direct formula for a designed head's weights agrees with the reference."""
from __future__ import annotations

import numpy as np
import pytest

from grader.grading.head_pattern import direct_head_weights

from .conftest import COURSE as ref


@pytest.mark.parametrize("T", [1, 2, 5, 9, 16])
def test_direct_formula_matches_reference(T):
    """Designed heads, random and extreme matrices give the reference's weights to 1e-12."""
    rng = np.random.default_rng(T)
    cases = [ref.previous_token_head(T), ref.sink_head(T), (rng.standard_normal((T, T)) * 3, rng.standard_normal((T, T))),
             (np.full((T, T), 1e4), rng.standard_normal((T, T)))]
    for W_Q, W_K in cases:
        np.testing.assert_allclose(direct_head_weights(T, W_Q, W_K), ref.head_pattern_weights(T, W_Q, W_K),
                                   rtol=0, atol=1e-12)
