"""caffe2.proto: netbrew's messages, which are Caffe2's (same fields and numbers)."""
