"""Fixtures shared by the operator tests."""

import pytest

from netbrew.operators import window, window_grad


def _always(in_shape, win, dtype, scatter):
    return dtype.kind == "f"


@pytest.fixture
def force_path(monkeypatch):
    """force_path("strided" | "selection") routes im2col/col2im onto the strided copies
    or onto the selection GEMM for the rest of the test."""

    def force(kind):
        if kind == "strided":
            monkeypatch.setattr(window, "_SELECTION_MAX", 0)
        else:
            monkeypatch.setattr(window, "use_selection", _always)
            monkeypatch.setattr(window_grad, "use_selection", _always)

    return force


@pytest.fixture(params=["strided", "selection"])
def path(request, force_path):
    """Runs the test once on each im2col/col2im path."""
    force_path(request.param)
    return request.param


@pytest.fixture
def spy(monkeypatch):
    """spy(module, name) wraps module.name for the rest of the test and returns the list
    that collects the shape of the second argument (the weights) of each call."""

    def watch(module, name):
        calls = []
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls.append(args[1].shape)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)
        return calls

    return watch
