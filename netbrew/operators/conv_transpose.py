"""ConvTranspose: N-d transposed convolution."""
