"""Softmax and LogSoftmax."""
