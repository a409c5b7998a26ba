"""Save and Load: round trips through TensorProtos files under tmp_path."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.serialize import load_blobs, save_blobs
from netbrew.operators import GRADIENTS, NoGradient, get_kernel
from netbrew.testing import rand

BLOBS = {
    "fc_w": rand(3, 4),
    "fc_b": rand(3, dtype=np.float64),
    "it": np.array([7], np.int64),
    "mask": np.array([True, False]),
}


def workspace(blobs=BLOBS):
    ws = Workspace()
    for name, value in blobs.items():
        ws.feed_blob(name, value)
    return ws


def assert_same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_round_trip(tmp_path, suffix):
    path = str(tmp_path / f"params{suffix}")
    workspace().run_operator_once(op_def("Save", list(BLOBS), [], db=path))
    assert sorted(load_blobs(path)) == sorted(BLOBS)
    ws = Workspace()
    ws.run_operator_once(op_def("Load", [], list(BLOBS), db=path))
    for name, value in BLOBS.items():
        assert_same(ws.fetch_blob(name), value)


def test_relative_path_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    workspace().run_operator_once(op_def("Save", ["fc_w"], [], db="sub/w.pb", absolute_path=0))
    assert (tmp_path / "sub" / "w.pb").exists()


def test_save_strip_prefix_and_overrides(tmp_path):
    path = tmp_path / "p.pb"
    ws = workspace({"gpu_0/fc_w": BLOBS["fc_w"], "gpu_0/fc_b": BLOBS["fc_b"]})
    ws.run_operator_once(
        op_def("Save", ["gpu_0/fc_w", "gpu_0/fc_b"], [], db=str(path), strip_prefix="gpu_0/")
    )
    assert sorted(load_blobs(path)) == ["fc_b", "fc_w"]
    ws.run_operator_once(
        op_def("Save", ["gpu_0/fc_w"], [], db=str(path), blob_name_overrides=["weights"])
    )
    assert list(load_blobs(path)) == ["weights"]


def test_load_source_names_and_prefixes(tmp_path):
    path = tmp_path / "p.pb"
    save_blobs({"gpu_0/fc_w": BLOBS["fc_w"], "gpu_0/fc_b": BLOBS["fc_b"]}, path)
    ws = Workspace()
    ws.run_operator_once(op_def("Load", [], ["w"], db=str(path), source_blob_names=["gpu_0/fc_w"]))
    assert_same(ws.fetch_blob("w"), BLOBS["fc_w"])
    ws.run_operator_once(
        op_def("Load", [], ["gpu_1/fc_b"], db=str(path), strip_prefix="gpu_0/", add_prefix="gpu_1/")
    )
    assert_same(ws.fetch_blob("gpu_1/fc_b"), BLOBS["fc_b"])


def test_kernels_take_explicit_names_without_the_executor(tmp_path):
    path = tmp_path / "p.pb"
    save = get_kernel("Save")
    save(
        BLOBS["fc_w"],
        db=str(path),
        db_type="tensorprotos",
        absolute_path=0,
        strip_prefix="",
        blob_name_overrides=["w"],
    )
    load = get_kernel("Load")
    (w,) = load(
        db=str(path),
        db_type="tensorprotos",
        absolute_path=0,
        strip_prefix="",
        add_prefix="",
        load_all=0,
        source_blob_names=["w"],
    )
    assert_same(w, BLOBS["fc_w"])
    with pytest.raises(SchemaError, match="no blob names to key the file by"):
        save(
            BLOBS["fc_w"],
            db=str(path),
            db_type="tensorprotos",
            absolute_path=0,
            strip_prefix="",
            blob_name_overrides=None,
        )


def test_errors(tmp_path):
    path = str(tmp_path / "p.pb")
    ws = workspace()
    with pytest.raises(OperatorError, match="db_type 'minidb' is not supported"):
        ws.run_operator_once(op_def("Save", ["fc_w"], [], db=path, db_type="minidb"))
    with pytest.raises(OperatorError, match="2 names in its name argument for 1 inputs"):
        ws.run_operator_once(op_def("Save", ["fc_w"], [], db=path, blob_name_overrides=["a", "b"]))
    with pytest.raises(OperatorError, match="same name 'w'"):
        ws.run_operator_once(
            op_def("Save", ["fc_w", "fc_b"], [], db=path, blob_name_overrides=["w", "w"])
        )
    with pytest.raises(SchemaError, match="required argument 'db' is missing"):
        ws.run_operator_once(op_def("Save", ["fc_w"], []))
    ws.run_operator_once(op_def("Save", ["fc_w", "fc_b"], [], db=path))
    with pytest.raises(OperatorError, match=r"blob 'fc_ww' is not in .*p\.pb.*Did you mean: fc_w"):
        ws.run_operator_once(op_def("Load", [], ["fc_ww"], db=path))
    with pytest.raises(OperatorError, match="load_all=1 is not supported, list the outputs"):
        ws.run_operator_once(op_def("Load", [], ["fc_w"], db=path, load_all=1))
    with pytest.raises(OperatorError, match="missing.pb"):
        ws.run_operator_once(op_def("Load", [], ["fc_w"], db=str(tmp_path / "missing.pb")))


@pytest.mark.parametrize("op_type", ["Save", "Load"])
def test_no_gradient(op_type):
    assert isinstance(GRADIENTS[op_type], NoGradient)
