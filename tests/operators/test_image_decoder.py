"""ImageDecoder: images written by small encoders here (PNG, BMP, PNM, TIFF) decode back."""

import struct
import zlib

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, run_op

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, size=(6, 9, 1), dtype=np.uint8)
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))  # fmt: skip


def luma(rgb):
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16).astype(np.uint8)[..., None]


def expected(rgb_or_gray, fmt):
    img = np.repeat(rgb_or_gray, 3, -1) if rgb_or_gray.shape[-1] == 1 else rgb_or_gray
    if fmt == "Grayscale":
        return rgb_or_gray if rgb_or_gray.shape[-1] == 1 else luma(img)
    return img if fmt == "RGB" else img[..., ::-1]


def as_stream(data: bytes):
    return np.frombuffer(data, np.uint8).copy()


def png_filter(row: bytes, prior: bytes, bpp: int, kind: int) -> bytes:
    out = bytearray()
    for i, v in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b, c = prior[i], prior[i - bpp] if i >= bpp else 0
        p = a + b - c
        paeth = min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]
        out.append((v - [0, a, b, (a + b) // 2, paeth][kind]) & 255)
    return bytes([kind]) + bytes(out)


def encode_png(samples, color, depth, interlace=False, palette=None):
    """samples [h, w, c] of ints < 2**depth."""
    h, w, ch = samples.shape
    body = b""
    for x0, y0, dx, dy in ADAM7 if interlace else ((0, 0, 1, 1),):
        sub = samples[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        prior = None
        for y, line in enumerate(sub.reshape(sub.shape[0], -1)):
            if depth == 16:
                row = line.astype(">u2").tobytes()
            else:
                bits = ((line[:, None] >> np.arange(depth - 1, -1, -1)) & 1).astype(np.uint8)
                row = np.packbits(bits.reshape(-1)).tobytes()
            prior = prior or bytes(len(row))
            body += png_filter(row, prior, max(1, ch * depth // 8), y % 5)
            prior = row

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    head = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlace))
    extra = chunk(b"PLTE", palette.tobytes()) if palette is not None else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + extra
            + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b""))  # fmt: skip


@pytest.mark.parametrize("fmt", ["RGB", "BGR", "Grayscale"])
@pytest.mark.parametrize("interlace", [False, True])
def test_png(fmt, interlace):
    rgba = np.concatenate([RGB, RGB[..., :1]], -1)
    cases = [
        (encode_png(RGB, 2, 8, interlace), RGB),
        (encode_png(rgba, 6, 8, interlace), RGB),
        (encode_png(GRAY, 0, 8, interlace), GRAY),
        (encode_png(np.concatenate([GRAY, GRAY], -1), 4, 8, interlace), GRAY),
        (encode_png(RGB.astype(np.uint16) * 257 + 3, 2, 16, interlace), RGB),
        (encode_png(GRAY >> 4, 0, 4, interlace), (GRAY >> 4) * 17),
        (encode_png(GRAY >> 7, 0, 1, interlace), (GRAY >> 7) * 255),
    ]
    palette = RNG.integers(0, 256, size=(4, 3), dtype=np.uint8)
    index = GRAY >> 6
    cases.append((encode_png(index, 3, 2, interlace, palette), palette[index[..., 0]]))
    for data, image in cases:
        check_op("ImageDecoder", [as_stream(data)], lambda s, image=image: (expected(image, fmt),),
                 pixel_format=fmt)  # fmt: skip


def encode_bmp(rgb, bits=24, top_down=False):
    h, w, _ = rgb.shape
    palette = b""
    if bits == 8:
        colors, index = np.unique(rgb.reshape(-1, 3), axis=0, return_inverse=True)
        palette = np.concatenate([colors[:, ::-1], np.zeros((len(colors), 1), np.uint8)], 1)
        px, palette = index.reshape(h, w).astype(np.uint8), palette.tobytes()
    elif bits == 16:  # 5-6-5 bitfields
        r, g, b = (rgb[..., i].astype(np.uint16) for i in range(3))
        px = ((r >> 3) << 11 | (g >> 2) << 5 | (b >> 3)).astype("<u2").view(np.uint8).reshape(h, -1)
        palette = struct.pack("<III", 0xF800, 0x7E0, 0x1F)
    else:
        px = rgb[..., ::-1] if bits == 24 else np.concatenate([rgb[..., ::-1], rgb[..., :1]], -1)
        px = px.reshape(h, -1)
    stride = (w * bits + 31) // 32 * 4
    rows = np.zeros((h, stride), np.uint8)
    rows[:, : px.shape[1]] = px
    rows = rows if top_down else rows[::-1]
    offset = 54 + len(palette)
    used = len(palette) // 4 if bits == 8 else 0
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, bits,
                       3 if bits == 16 else 0, rows.size, 0, 0, used, 0)  # fmt: skip
    return (
        b"BM"
        + struct.pack("<IHHI", offset + rows.size, 0, 0, offset)
        + info
        + palette
        + rows.tobytes()
    )


@pytest.mark.parametrize("bits, top_down", [(24, False), (32, True), (8, False), (16, True)])
def test_bmp(bits, top_down):
    image = RGB & 0xF8 if bits == 16 else RGB
    image = image & np.array([0xF8, 0xFC, 0xF8], np.uint8) if bits == 16 else image
    got = run_op("ImageDecoder", [as_stream(encode_bmp(RGB, bits, top_down))])[0]
    if bits == 16:  # 5/6-bit channels are scaled back to 0-255
        np.testing.assert_allclose(got.astype(int), image.astype(int), atol=8)
    else:
        np.testing.assert_array_equal(got, image)


@pytest.mark.parametrize(
    "header, payload, image",
    [
        (b"P6\n# comment\n5 7\n255\n", RGB.tobytes(), RGB),
        (b"P5 9 6 255\n", GRAY.tobytes(), GRAY),
        (b"P5\n9 6\n65535\n", (GRAY.astype(">u2") * 257).tobytes(), GRAY),
        (b"P3\n5 7\n255\n", " ".join(map(str, RGB.reshape(-1))).encode(), RGB),
        (b"P2\n9 6 # size\n15\n", " ".join(map(str, (GRAY >> 4).reshape(-1))).encode(),
         (GRAY >> 4) * 17),
        (b"P1\n9 6\n", "".join(str(1 - (v >> 7)) for v in GRAY.reshape(-1)).encode(),
         (GRAY >> 7) * 255),
        (b"P4\n9 6\n", np.packbits(1 - (GRAY[..., 0] >> 7), axis=1).tobytes(), (GRAY >> 7) * 255),
    ],
)  # fmt: skip
def test_pnm(header, payload, image):
    check_op("ImageDecoder", [as_stream(header + payload)], lambda s: (expected(image, "RGB"),))


def encode_tiff(px, order="<", packbits=False, predictor=False):
    h, w, spp = px.shape
    data = px.copy()
    if predictor:
        data[:, 1:] = px[:, 1:] - px[:, :-1]
    body = data.tobytes()
    if packbits:  # literal runs of up to 128 bytes
        body = b"".join(
            bytes([len(c) - 1]) + c for c in (body[i : i + 128] for i in range(0, len(body), 128))
        )
    entries = [(256, 4, w), (257, 4, h), (258, 3, 8), (259, 3, 32773 if packbits else 1),
               (262, 3, 2 if spp == 3 else 1), (273, 4, 8), (277, 3, spp), (278, 4, h),
               (279, 4, len(body)), (317, 3, 2 if predictor else 1)]  # fmt: skip
    ifd = struct.pack(order + "H", len(entries))
    for tag, kind, value in entries:
        fmt = order + ("HHIHH" if kind == 3 else "HHII")
        ifd += (
            struct.pack(fmt, tag, kind, 1, value, 0)
            if kind == 3
            else struct.pack(fmt, tag, kind, 1, value)
        )
    magic = (b"II*\x00" if order == "<" else b"MM\x00*") + struct.pack(order + "I", 8 + len(body))
    return magic + body + ifd + b"\x00\x00\x00\x00"


@pytest.mark.parametrize("order, packbits, predictor", [("<", False, False), (">", True, True)])
@pytest.mark.parametrize("image", [RGB, GRAY], ids=["rgb", "gray"])
@pytest.mark.parametrize("fmt", ["RGB", "Grayscale"])
def test_tiff(order, packbits, predictor, image, fmt):
    stream = as_stream(encode_tiff(image, order, packbits, predictor))
    check_op("ImageDecoder", [stream], lambda s: (expected(image, fmt),), pixel_format=fmt)


def test_onnx_frozen_images():
    from onnx.backend.test.case.node import _image_decoder_data as frozen

    for name in ("bmp", "png", "pnm", "tiff"):
        case = getattr(frozen, f"image_decoder_decode_{name}_rgb")
        got = run_op("ImageDecoder", [np.asarray(case.data, np.uint8)])[0]
        np.testing.assert_array_equal(got, case.output, err_msg=name)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "JPEG images are not supported"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "WebP"),
        (b"GIF89a", "unknown image format"),
        (encode_png(RGB, 2, 8)[:60], "truncated|inflate|CRC"),
    ],
)
def test_image_decoder_errors(data, match):
    with pytest.raises(OperatorError, match=match):
        run_op("ImageDecoder", [as_stream(data)])
    with pytest.raises(OperatorError, match="pixel_format"):
        run_op("ImageDecoder", [as_stream(data)], pixel_format="HSV")
