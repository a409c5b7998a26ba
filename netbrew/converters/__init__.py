"""Converters between NetDef and other formats: ONNX, nn.Module-style, legacy Caffe2."""
