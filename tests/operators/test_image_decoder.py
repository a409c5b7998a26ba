"""ImageDecoder: images encoded with Pillow in each format decode as ONNX's reference does."""

import io

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, run_op

Image = pytest.importorskip("PIL.Image", reason="ImageDecoder needs Pillow: netbrew[image]")
features = pytest.importorskip("PIL.features")

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, size=(6, 9, 1), dtype=np.uint8)
RGBA = np.concatenate([RGB, RNG.integers(0, 256, size=(7, 5, 1), dtype=np.uint8)], -1)
SMOOTH = np.stack(  # a smooth image, so that lossy codecs stay close to the source
    [*np.meshgrid(np.arange(32) * 8, np.arange(24) * 10, indexing="xy"), np.full((24, 32), 99)],
    -1,
).astype(np.uint8)

# format, Pillow save options, lossless, Pillow feature it needs
FORMATS = {
    "png": ("PNG", {}, True, None),
    "bmp": ("BMP", {}, True, None),
    "ppm": ("PPM", {}, True, None),
    "tiff": ("TIFF", {}, True, None),
    "tiff_lzw": ("TIFF", {"compression": "tiff_lzw"}, True, None),
    "gif": ("GIF", {}, False, None),
    "jpeg": ("JPEG", {"quality": 95}, False, "jpg"),
    "webp": ("WEBP", {"lossless": True}, True, "webp"),
    "webp_lossy": ("WEBP", {"quality": 90}, False, "webp"),
    "jpeg2000": ("JPEG2000", {}, True, "jpg_2000"),
}
MODE_OK = {  # the modes each format can store
    "ppm": ("RGB", "L"),
    "jpeg": ("RGB", "L"),
    "bmp": ("RGB", "L", "RGBA"),
    "gif": ("RGB", "L", "RGBA"),
}


def luma(rgb):
    """ITU-R 601-2 luma with Pillow's fixed-point rounding (its convert("L"))."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16).astype(np.uint8)[..., None]


def encode(pixels, name):
    fmt, options, _, feature = FORMATS[name]
    if feature and not features.check(feature):
        pytest.skip(f"this Pillow build has no {feature}")
    img = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return np.frombuffer(buf.getvalue(), np.uint8).copy()


def source_expected(pixels, fmt):
    """What a lossless decode of `pixels` gives: gray repeated, alpha dropped, luma for gray."""
    rgb = np.repeat(pixels, 3, -1) if pixels.shape[-1] == 1 else pixels[..., :3]
    if fmt == "Grayscale":
        return pixels if pixels.shape[-1] == 1 else luma(rgb)
    return rgb if fmt == "RGB" else rgb[..., ::-1]


def onnx_reference(stream, fmt):
    """ONNX's reference ImageDecoder (it decodes with Pillow), for RGB-mode inputs."""
    from onnx.reference.ops.op_image_decoder import ImageDecoder

    return ImageDecoder._run(None, stream, pixel_format=fmt)[0]


@pytest.mark.parametrize("fmt", ["RGB", "BGR", "Grayscale"])
@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_formats(name, mode, fmt):
    if mode not in MODE_OK.get(name, ("RGB", "L", "RGBA")):
        pytest.skip(f"{name} cannot store {mode}")
    lossless = FORMATS[name][2]
    source = {"RGB": SMOOTH, "L": SMOOTH[..., :1], "RGBA": np.concatenate(
        [SMOOTH, SMOOTH[..., :1]], -1)}[mode] if not lossless else {
        "RGB": RGB, "L": GRAY, "RGBA": RGBA}[mode]  # fmt: skip
    stream = encode(source, name)
    got = run_op("ImageDecoder", [stream], pixel_format=fmt)[0]
    channels = 1 if fmt == "Grayscale" else 3
    assert got.dtype == np.uint8 and got.shape == source.shape[:2] + (channels,)
    if lossless:
        np.testing.assert_array_equal(got, source_expected(source, fmt))
    else:  # lossy or palette-quantized: near the source
        want = source_expected(source, fmt).astype(int)
        assert np.abs(got.astype(int) - want).mean() < 6, name
    if Image.open(io.BytesIO(stream.tobytes())).mode == "RGB":
        # the ONNX reference (np.array of the Pillow image, no conversion) gives the same bits
        np.testing.assert_array_equal(got, onnx_reference(stream, fmt))


def test_jpeg_bgr_is_rgb_reversed_and_gray_is_luma_of_decoded():
    stream = encode(SMOOTH, "jpeg")
    rgb = run_op("ImageDecoder", [stream])[0]
    check_op("ImageDecoder", [stream], lambda s: (rgb[..., ::-1],), pixel_format="BGR")
    gray = run_op("ImageDecoder", [stream], pixel_format="Grayscale")[0]
    assert gray.shape == SMOOTH.shape[:2] + (1,)
    np.testing.assert_array_equal(gray, onnx_reference(stream, "Grayscale"))


def test_palette_png():
    index = (GRAY[..., 0] >> 6).astype(np.uint8)
    palette = RNG.integers(0, 256, size=(4, 3), dtype=np.uint8)
    img = Image.fromarray(index, "P")
    img.putpalette(palette.reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, "PNG")
    stream = np.frombuffer(buf.getvalue(), np.uint8).copy()
    np.testing.assert_array_equal(run_op("ImageDecoder", [stream])[0], palette[index])


@pytest.mark.parametrize("name", ["png", "bmp", "ppm", "tiff", "jpeg", "jpeg2000", "webp"])
def test_onnx_frozen_images(name):
    from onnx.backend.test.case.node import _image_decoder_data as frozen

    key = {"ppm": "pnm", "jpeg2000": "jpeg2k"}.get(name, name)
    feature = FORMATS[name][3]
    if feature and not features.check(feature):
        pytest.skip(f"this Pillow build has no {feature}")
    for fmt in ("rgb", "bgr", "grayscale"):
        case = getattr(frozen, f"image_decoder_decode_{key}_{fmt}", None)
        if case is None:
            continue
        pixel_format = {"rgb": "RGB", "bgr": "BGR", "grayscale": "Grayscale"}[fmt]
        got = run_op("ImageDecoder", [np.asarray(case.data, np.uint8)], pixel_format=pixel_format)
        np.testing.assert_array_equal(got[0], case.output, err_msg=f"{name} {fmt}")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"GIF89a",
        b"\xff\xd8\xff\xe0\x00\x10JFIF",
        b"not an image at all",
        "png_truncated",
        "jpeg_corrupt",
    ],
)
def test_corrupt_files_name_the_op(data):
    if data == "png_truncated":
        data = encode(RGB, "png").tobytes()[:60]
    elif data == "jpeg_corrupt":
        good = bytearray(encode(SMOOTH, "jpeg").tobytes())
        data = bytes(good[:200]) + b"\x00" * 16  # the scan cut short
    stream = np.frombuffer(data, np.uint8).copy()
    with pytest.raises(OperatorError, match="ImageDecoder") as info:
        run_op("ImageDecoder", [stream])
    assert "cannot decode the image" in str(info.value)


def test_bad_pixel_format_and_input():
    stream = encode(RGB, "png")
    with pytest.raises(OperatorError, match="pixel_format"):
        run_op("ImageDecoder", [stream], pixel_format="HSV")
    with pytest.raises(OperatorError, match="1-D uint8"):
        run_op("ImageDecoder", [stream.astype(np.int32)])


def test_missing_pillow_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError("No module named 'PIL'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    with pytest.raises(Exception, match=r'pip install "netbrew\[image\]"'):
        run_op("ImageDecoder", [encode(RGB, "png")])
