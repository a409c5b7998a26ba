"""Concat and Split."""
