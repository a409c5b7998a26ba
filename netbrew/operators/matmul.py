"""MatMul, Gemm and Caffe2's FC."""
