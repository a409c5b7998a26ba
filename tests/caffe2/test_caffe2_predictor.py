"""workspace.Predictor and mobile_exporter: the deploy path of Caffe2's tutorials."""

import numpy as np
import pytest

from netbrew.caffe2.python import brew, mobile_exporter, model_helper, workspace
from netbrew.converters import caffe2 as nb_caffe2
from netbrew.executor import Predictor as NativePredictor


def test_export_a_trained_model_and_predict_from_bytes():
    model = model_helper.ModelHelper(name="deploy")
    fc = brew.fc(model, "data", "fc", dim_in=3, dim_out=2)
    brew.softmax(model, fc, "prob")
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob("fc_w", np.arange(6, dtype=np.float32).reshape(2, 3) / 6)
    init, predict = mobile_exporter.Export(workspace, model.net, model.params)
    assert list(predict.external_input) == ["data", "fc_w", "fc_b"]
    assert list(predict.external_output) == ["prob"]
    predictor = workspace.Predictor(init.SerializeToString(), predict.SerializeToString())
    x = np.ones((4, 3), np.float32)
    (prob,) = predictor.run([x])
    logits = x @ workspace.FetchBlob("fc_w").T + workspace.FetchBlob("fc_b")
    want = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(prob, want, rtol=1e-5)
    np.testing.assert_array_equal(predictor.run({"data": x})[0], prob)
    with pytest.raises(ValueError, match="4 inputs, but the net has only 3"):
        predictor.run([x, x, x, x])


def test_predictor_on_the_caffe2_model_zoo_squeezenet(squeezenet_dir):
    init = (squeezenet_dir / "init_net.pb").read_bytes()
    predict = (squeezenet_dir / "predict_net.pb").read_bytes()
    x = np.random.default_rng(0).random((1, 3, 227, 227), dtype=np.float32)
    (out,) = workspace.Predictor(init, predict).run([x])
    native = NativePredictor(*nb_caffe2.load(squeezenet_dir / "init_net.pb",
                                             squeezenet_dir / "predict_net.pb"))  # fmt: skip
    want = native.run({"data": x})
    np.testing.assert_allclose(out, want[native.output_names[0]], rtol=1e-5)
    assert out.shape[:2] == (1, native.workspace.fetch_blob("conv10_w").shape[0])
    np.testing.assert_allclose(out.sum(1), 1, rtol=1e-5)  # softmax over the classes
