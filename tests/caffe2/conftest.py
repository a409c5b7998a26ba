"""Each test starts from an empty default workspace of netbrew.caffe2."""

import pytest

from netbrew.caffe2.python import workspace


@pytest.fixture(autouse=True)
def fresh_workspace():
    workspace.SwitchWorkspace("default")
    workspace.ResetWorkspace()
    yield
    workspace.SwitchWorkspace("default")
    workspace.ResetWorkspace()
