"""ImageDecoder: an encoded image file (1-D uint8 tensor) to a uint8 [H, W, C] image.

Decoding is Pillow's (``pip install "netbrew[image]"``), as in ONNX's reference
implementation: every format the installed Pillow reads works (JPEG, PNG, BMP, PNM, TIFF,
GIF, WebP and JPEG 2000 where its build has them). RGB and BGR give [H, W, 3]: images of
other modes go through ``Image.convert("RGB")`` first, so gray images are repeated across
the channels and alpha is dropped (not blended). Grayscale gives [H, W, 1] from
``Image.convert("L")`` (ITU-R 601-2 luma, Pillow's rounding), as the reference does.
"""

from __future__ import annotations

import io

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "ImageDecoder",
    inputs=["encoded_stream"],
    outputs=["image"],
    attrs={"pixel_format": "RGB"},
    doc="image = decoded encoded_stream (1-D uint8 file bytes in any format Pillow reads: "
    "JPEG, PNG, BMP, PNM, TIFF, WebP, JPEG 2000...), uint8 [H, W, 3] for pixel_format RGB "
    "(default) or BGR, [H, W, 1] for Grayscale; needs Pillow (netbrew[image])",
)

_INSTALL = 'pip install "netbrew[image]"'


def _pil_image():
    try:
        import PIL.Image  # noqa: PLC0415 - an optional dependency, imported on first use
    except ImportError:
        raise ImportError(
            f"ImageDecoder decodes images with Pillow, which is not installed: {_INSTALL}"
        ) from None
    return PIL.Image


@kernel("ImageDecoder")
def image_decoder_cpu(stream, pixel_format):
    fmt = str(pixel_format)
    if fmt not in ("RGB", "BGR", "Grayscale"):
        raise SchemaError(
            f"ImageDecoder: pixel_format={pixel_format!r}, expected RGB, BGR or Grayscale"
        )
    if stream.dtype != np.uint8 or stream.ndim != 1:
        raise ShapeError(
            f"ImageDecoder: input 'encoded_stream' is {stream.dtype} {list(stream.shape)}, "
            "expected a 1-D uint8 tensor of file bytes"
        )
    image_module = _pil_image()
    try:
        with image_module.open(io.BytesIO(stream.tobytes())) as img:
            img.load()
            img = img.convert("L" if fmt == "Grayscale" else "RGB")
    except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError... on bad files
        head = stream[:8].tobytes()
        raise ValueError(
            f"ImageDecoder: cannot decode the image ({len(stream)} bytes, first bytes "
            f"{head!r}): {type(e).__name__}: {e}"
        ) from e
    decoded = np.asarray(img, dtype=np.uint8)
    if fmt == "Grayscale":
        return (np.ascontiguousarray(decoded[..., None]),)
    return (np.ascontiguousarray(decoded if fmt == "RGB" else decoded[..., ::-1]),)


no_gradient("ImageDecoder", "decodes file bytes; there is nothing to differentiate")
