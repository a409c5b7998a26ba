"""Flatten, Reshape, Transpose, Shape, Squeeze and Unsqueeze."""
