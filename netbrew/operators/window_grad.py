"""Adjoints of the window gathers of window.py, for the gradients of Conv and the pools.

col2im sums GEMM columns back into an image (Conv's input gradient, ConvTranspose's
forward); scatter_picks sends one value per window to the pixel that window picked
(MaxPool's gradient).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.operators.window import Window, selection, use_selection, window_pixels


def col2im(cols: np.ndarray, win: Window, out_shape: Sequence[int]) -> np.ndarray:
    """The adjoint of im2col: sums the patches `cols` (..., k1..kn, O1..On) into a new array
    (..., *out_shape), patch pixel j of window o landing on o * stride + j * dilation - begin.

    One strided-slice add per kernel offset (a loop over the K offsets, never over pixels),
    or one GEMM for small images; pixels falling outside `out_shape` (padding) are dropped.
    """
    n, out_shape = len(win.kernel), tuple(out_shape)
    lead = cols.shape[: -2 * n]
    if use_selection(out_shape, win, cols.dtype, scatter=True):
        sel = selection(out_shape, win, cols.dtype)
        return (cols.reshape(-1, sel.shape[1]) @ sel.T).reshape(*lead, *out_shape)
    y = np.zeros(lead + out_shape, dtype=cols.dtype)
    for offset in np.ndindex(*win.kernel):
        dst, src = [], []
        for o, j, s, d, b, size in zip(
            win.out, offset, win.strides, win.dilations, win.begin, out_shape
        ):
            shift = j * d - b  # window o covers output pixel o * s + shift
            lo, hi = max(0, -(shift // s)), min(o, (size - 1 - shift) // s + 1)
            if hi <= lo:
                break
            src.append(slice(lo, hi))
            dst.append(slice(lo * s + shift, (hi - 1) * s + shift + 1, s))
        else:
            y[(..., *dst)] += cols[(..., *offset, *src)]
    return y


def scatter_picks(
    values: np.ndarray, picks: np.ndarray, win: Window, in_shape: Sequence[int]
) -> np.ndarray:
    """The adjoint of picking one pixel per window: each value (N, C, O1..On) is added to the
    input pixel at kernel offset `picks` (row-major index) of its window; returns
    (N, C, *in_shape). Values whose pick lies in the padding are dropped.

    Windows that cannot overlap (stride >= span on every axis) take each pixel at most once,
    so the values are written directly with one fancy assignment; otherwise they go into
    columns, summed by col2im.
    """
    lead, in_shape = values.shape[:2], tuple(in_shape)
    rows, positions = lead[0] * lead[1], math.prod(win.out)
    width = math.prod(win.kernel) * positions
    column = picks.reshape(rows, positions).astype(np.intp) * positions + np.arange(positions)
    if any(s < sp for s, sp in zip(win.strides, win.span)):
        cols = np.zeros((rows, width), values.dtype)
        cols.ravel()[(column + np.arange(rows)[:, None] * width).ravel()] = values.ravel()
        return col2im(cols.reshape(*lead, *win.kernel, *win.out), win, in_shape)
    pixels, size = window_pixels(in_shape, win)[column], math.prod(in_shape)
    padded = bool((pixels < 0).any())
    if padded:  # a spare last pixel takes the dropped values
        pixels = np.where(pixels < 0, size, pixels)
    out = np.zeros((rows, size + padded), values.dtype)
    out.ravel()[(pixels + np.arange(rows)[:, None] * (size + padded)).ravel()] = values.ravel()
    return out[:, :size].reshape(*lead, *in_shape)
