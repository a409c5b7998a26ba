"""Slice, Gather and Pad."""
