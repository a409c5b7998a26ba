"""Conv: N-d convolution with groups, dilations, strides, pads and auto_pad."""
