"""The `netbrew` command: demo, info and run, driven as a user would."""

import numpy as np

from netbrew.cli import main
from netbrew.netdef import Net


def build(seed: int = 0) -> tuple[Net, Net]:
    """A LeNet-style inference net for 1x6x6 images and its init net."""
    rng = np.random.default_rng(seed)
    init, net = Net("demo_init"), Net("demo")
    params = {
        "conv1_w": rng.normal(0, 0.3, (8, 1, 3, 3)),
        "conv1_b": np.zeros(8),
        "fc_w": rng.normal(0, 0.1, (10, 8 * 3 * 3)),
        "fc_b": np.zeros(10),
    }
    for name, value in params.items():
        init.GivenTensorFill([], name, shape=list(value.shape), values=value.ravel().tolist())
    net.add_external_input("data", *params)
    conv = net.Conv(["data", "conv1_w", "conv1_b"], "conv1", kernel_shape=[3, 3], pads=[1] * 4)
    pool = conv.Relu([], "relu1").MaxPool([], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    net.FC([pool, "fc_w", "fc_b"], "fc").Softmax([], "prob")
    net.add_external_output("prob")
    return init, net


def test_info(model_dir, capsys):
    assert main(["info", str(model_dir)]) == 0
    text = capsys.readouterr().out
    assert "inputs:  data, conv1_w, conv1_b, fc_w, fc_b" in text
    assert "outputs: prob" in text
    assert "parameters: 810 values in 4 blobs" in text
    assert "Conv" in text and "kernels: cpu" in text


def test_info_squeezenet(squeezenet_dir, capsys):
    init = squeezenet_dir / "init_net.pb"
    assert main(["info", str(squeezenet_dir / "predict_net.pb"), "--init", str(init)]) == 0
    text = capsys.readouterr().out
    assert "Conv" in text and "26" in text
    assert "parameters: 736,964 values in 53 blobs" in text


def test_run_writes_outputs(model_dir, tmp_path, capsys):
    x = np.random.default_rng(0).uniform(size=(2, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ["run", str(model_dir / "predict_net.pb"), "--init", str(model_dir / "init_net.pb")]
    assert main([*args, "--input", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out")]) == 0
    prob = np.load(tmp_path / "out" / "prob.npy")
    assert prob.shape == (2, 10)
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    assert "prob: float32[2, 10]" in capsys.readouterr().out


def test_run_reports_missing_feed(model_dir, capsys):
    assert main(["run", str(model_dir)]) == 1
    assert "missing input 'data'" in capsys.readouterr().err


def test_corrupt_model_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "bad.pb").write_bytes(b"\xff\xff\xff")
    assert main(["info", str(tmp_path / "bad.pb")]) == 1
    assert "bad.pb: not a valid binary NetDef" in capsys.readouterr().err


def assert_same_prob(first, second, tmp_path, seed: int) -> None:
    """`netbrew run` of two models on one batch of 3 images gives the same `prob`."""
    x = np.random.default_rng(seed).uniform(size=(3, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for model, out in ((first, "a"), (second, "b")):
        assert main(["run", str(model), "--input", f"data={tmp_path / 'x.npy'}",
                     "-o", str(tmp_path / out)]) == 0  # fmt: skip
    np.testing.assert_allclose(
        np.load(tmp_path / "a" / "prob.npy"), np.load(tmp_path / "b" / "prob.npy"), atol=1e-6
    )


def test_convert_both_ways(model_dir, tmp_path, capsys):
    onnx_path = tmp_path / "model.onnx"
    args = ["convert", str(model_dir), "-o", str(onnx_path), "--input", "data=2x1x6x6"]
    assert main([*args, "--opset", "21", "--dynamic-batch"]) == 0
    assert "opset 21" in capsys.readouterr().out
    back = tmp_path / "back"
    assert main(["convert", str(onnx_path), "-o", str(back)]) == 0
    assert_same_prob(model_dir, back, tmp_path, seed=0)


def test_convert_needs_input_shapes(model_dir, tmp_path, capsys):
    assert main(["convert", str(model_dir), "-o", str(tmp_path / "m.onnx")]) == 1
    assert "input 'data': give its shape" in capsys.readouterr().err
    assert (
        main(["convert", str(model_dir), "-o", str(tmp_path / "m.onnx"), "--input", "data=x"]) == 1
    )
    assert "expected NAME=DxDxD" in capsys.readouterr().err


def test_convert_onnx_to_an_older_opset_keeps_the_numbers(model_dir, tmp_path, capsys):
    import onnx

    new, old = tmp_path / "new.onnx", tmp_path / "old.onnx"
    args = ["convert", str(model_dir), "-o", str(new), "--input", "data=2x1x6x6"]
    assert main([*args, "--dynamic-batch"]) == 0
    assert main(["convert", str(new), "-o", str(old), "--opset", "13"]) == 0
    assert "opset 13" in capsys.readouterr().out
    assert old.is_file()
    model = onnx.load(old)
    assert next(o.version for o in model.opset_import if o.domain == "") == 13
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert_same_prob(new, old, tmp_path, seed=1)
