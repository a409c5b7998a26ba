"""Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu, Selu, Softplus, HardSigmoid and Gelu."""
