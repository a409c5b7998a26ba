"""Shared fixtures: paths to the real Caffe2 files in ../shared/data."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SQUEEZENET = SHARED_DATA / "caffe2_squeezenet"


@pytest.fixture
def squeezenet_dir() -> Path:
    if not (SQUEEZENET / "predict_net.pb").exists():
        pytest.skip(f"Caffe2 SqueezeNet files not found under {SQUEEZENET}")
    return SQUEEZENET
