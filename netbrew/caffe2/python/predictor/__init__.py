"""caffe2.python.predictor on netbrew: predictor_exporter and predictor_py_utils."""
