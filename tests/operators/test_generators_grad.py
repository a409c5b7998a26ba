"""Gradient of Trilu against central differences."""

import numpy as np
import pytest

from netbrew.testing import check_gradient, rand


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3)])
@pytest.mark.parametrize("k", [None, 1, -1])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_gradient(shape, k, upper):
    inputs = [rand(*shape)] + ([] if k is None else [np.array(k, np.int64)])
    check_gradient("Trilu", inputs, upper=upper)
