"""ImageDecoder: an encoded image file (1-D uint8 tensor) to a uint8 [H, W, C] image.

The format is sniffed from the leading bytes. PNG, BMP, PNM and baseline TIFF are decoded
in NumPy (see image_codecs); JPEG, JPEG 2000 and WebP raise a clear error. Gray output
from color images uses ITU-R 601-2 luma with PIL's fixed-point rounding,
L = (19595 R + 38470 G + 7471 B + 32768) >> 16; alpha channels are dropped (not blended).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators import image_codecs
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "ImageDecoder",
    inputs=["encoded_stream"],
    outputs=["image"],
    attrs={"pixel_format": "RGB"},
    doc="image = decoded encoded_stream (1-D uint8 file bytes: PNG, BMP, PNM or TIFF), uint8 "
    "[H, W, 3] for pixel_format RGB (default) or BGR, [H, W, 1] for Grayscale",
)

_UNSUPPORTED = {
    b"\xff\xd8\xff": "JPEG",
    b"\x00\x00\x00\x0cjP  ": "JPEG 2000",
    b"\xff\x4f\xff\x51": "JPEG 2000",
}


def _sniff(data: bytes):
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return image_codecs.decode_png
    if data.startswith(b"BM"):
        return image_codecs.decode_bmp
    if data[:1] == b"P" and data[1:2] in b"123456" and len(data) > 2:
        return image_codecs.decode_pnm
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return image_codecs.decode_tiff
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        raise ValueError("ImageDecoder: WebP images are not supported (PNG, BMP, PNM, TIFF are)")
    for magic, name in _UNSUPPORTED.items():
        if data.startswith(magic):
            raise ValueError(
                f"ImageDecoder: {name} images are not supported (PNG, BMP, PNM, TIFF are)"
            )
    raise ValueError(f"ImageDecoder: unknown image format (first bytes {data[:8]!r})")


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """[H, W, 3] uint8 -> [H, W, 1] uint8 luma, rounded as PIL's convert("L")."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16).astype(np.uint8)[..., None]


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
    data = stream.tobytes()
    decode = _sniff(data)
    try:
        pixels, mode = decode(data)
    except (image_codecs.ImageFormatError, ValueError, IndexError) as e:
        raise ValueError(f"ImageDecoder: cannot decode the image: {e}") from e
    if mode in ("L", "LA"):
        gray = pixels[..., :1]
        if fmt == "Grayscale":
            return (np.ascontiguousarray(gray),)
        return (np.repeat(gray, 3, axis=-1),)
    rgb = pixels[..., :3]
    if fmt == "Grayscale":
        return (to_gray(rgb),)
    return (np.ascontiguousarray(rgb if fmt == "RGB" else rgb[..., ::-1]),)


no_gradient("ImageDecoder", "decodes file bytes; there is nothing to differentiate")
