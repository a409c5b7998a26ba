"""Caffe2's fillers: ConstantFill, GivenTensor*Fill, GaussianFill, UniformFill, XavierFill, MSRAFill."""
