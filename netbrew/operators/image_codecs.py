"""Image file decoders in NumPy and the standard library, for ImageDecoder.

Each decoder takes the file's bytes and returns (pixels, mode): a uint8 array [H, W, C] and
"L" (gray), "LA", "RGB" or "RGBA". Supported: PNG (every color type, bit depths 1-16,
Adam7 interlacing; 16-bit samples keep their high byte), BMP (uncompressed 1/4/8/24/32-bit
and 16/32-bit BI_BITFIELDS), PNM (P1-P6, any maxval scaled to 0-255) and baseline TIFF
(8-bit gray, palette or RGB, chunky, uncompressed or PackBits, optional horizontal
predictor, strips). JPEG, JPEG 2000 and WebP need real codecs and are not supported.
"""

from __future__ import annotations

import re
import struct
import zlib

import numpy as np


class ImageFormatError(ValueError):
    """The bytes are not an image this module can decode."""


def _fail(fmt: str, why: str):
    raise ImageFormatError(f"{fmt}: {why}")


# ---- PNG -----------------------------------------------------------------------------

_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # fmt: skip
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _unfilter(data: memoryview, pos: int, width: int, height: int, bpp: int, row_bytes: int):
    """Undoes PNG's per-row filters; returns (rows as uint8 [height, row_bytes], new pos)."""
    out = np.zeros((height, row_bytes), np.uint8)
    prior = bytearray(row_bytes)
    for y in range(height):
        if pos + 1 + row_bytes > len(data):
            _fail("PNG", "image data is truncated")
        kind, row = data[pos], bytearray(data[pos + 1 : pos + 1 + row_bytes])
        pos += 1 + row_bytes
        if kind == 1:
            for i in range(bpp, row_bytes):
                row[i] = (row[i] + row[i - bpp]) & 255
        elif kind == 2:
            row = bytearray(np.frombuffer(row, np.uint8) + np.frombuffer(prior, np.uint8))
        elif kind == 3:
            for i in range(row_bytes):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + prior[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(row_bytes):
                a = row[i - bpp] if i >= bpp else 0
                b, c = prior[i], prior[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[i] = (row[i] + pred) & 255
        elif kind != 0:
            _fail("PNG", f"unknown filter type {kind} in row {y}")
        out[y] = np.frombuffer(row, np.uint8)
        prior = row
    return out, pos


def _png_samples(rows: np.ndarray, width: int, channels: int, depth: int) -> np.ndarray:
    """Raw rows -> samples [h, width, channels] as uint16 (values < 2**depth)."""
    h = rows.shape[0]
    if depth == 16:
        s = rows.view(">u2").astype(np.uint16)
    elif depth == 8:
        s = rows.astype(np.uint16)
    else:
        bits = np.unpackbits(rows, axis=1).reshape(h, -1, depth)
        s = (bits * (1 << np.arange(depth - 1, -1, -1, dtype=np.uint16))).sum(-1, dtype=np.uint16)
    return s[:, : width * channels].reshape(h, width, channels)


def decode_png(data: bytes):
    view, pos, chunks = memoryview(data), 8, {}
    idat = bytearray()
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", view[pos : pos + 8])
        body = bytes(view[pos + 8 : pos + 8 + length])
        crc = view[pos + 8 + length : pos + 12 + length]
        if len(body) < length or len(crc) < 4:
            _fail("PNG", f"chunk {kind!r} is truncated")
        if zlib.crc32(kind + body) != struct.unpack(">I", crc)[0]:
            _fail("PNG", f"chunk {kind!r} has a bad CRC")
        pos += 12 + length
        if kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        else:
            chunks.setdefault(kind, body)
    if b"IHDR" not in chunks:
        _fail("PNG", "no IHDR chunk")
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    if color not in _PNG_CHANNELS or depth not in (1, 2, 4, 8, 16):
        _fail("PNG", f"unsupported color type {color} / bit depth {depth}")
    channels = _PNG_CHANNELS[color]
    try:
        raw = memoryview(zlib.decompress(bytes(idat)))
    except zlib.error as e:
        _fail("PNG", f"image data does not inflate: {e}")
    bpp = max(1, channels * depth // 8)
    samples = np.zeros((h, w, channels), np.uint16)
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    pos = 0
    for x0, y0, dx, dy in passes:
        pw, ph = (w - x0 + dx - 1) // dx, (h - y0 + dy - 1) // dy
        if pw <= 0 or ph <= 0:
            continue
        rows, pos = _unfilter(raw, pos, pw, ph, bpp, (pw * channels * depth + 7) // 8)
        samples[y0::dy, x0::dx] = _png_samples(rows, pw, channels, depth)
    if color == 3:
        if b"PLTE" not in chunks:
            _fail("PNG", "palette image without a PLTE chunk")
        palette = np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)
        if samples.max(initial=0) >= len(palette):
            _fail("PNG", "pixel index beyond the palette")
        return palette[samples[..., 0]], "RGB"
    if depth == 16:
        pixels = (samples >> 8).astype(np.uint8)
    else:
        pixels = (samples * (255 // ((1 << depth) - 1))).astype(np.uint8)
    return pixels, {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]


# ---- BMP -----------------------------------------------------------------------------


def _mask_channel(values: np.ndarray, mask: int) -> np.ndarray:
    if not mask:
        return np.zeros(values.shape, np.uint8)
    shift = (mask & -mask).bit_length() - 1
    top = mask >> shift
    return (((values & mask) >> shift).astype(np.uint64) * 255 // top).astype(np.uint8)


def decode_bmp(data: bytes):
    if len(data) < 26:
        _fail("BMP", "file is truncated")
    offset, header = struct.unpack_from("<II", data, 10)
    if header == 12:
        w, h, _, bits = struct.unpack_from("<HHHH", data, 18)
        compression, n_colors, entry = 0, 0, 3
    elif header >= 40:
        w, h, _, bits, compression = struct.unpack_from("<iiHHI", data, 18)
        n_colors, entry = struct.unpack_from("<I", data, 46)[0], 4
    else:
        _fail("BMP", f"unknown header size {header}")
    top_down, h = h < 0, abs(h)
    stride = (w * bits + 31) // 32 * 4
    if compression not in (0, 3) or bits not in (1, 4, 8, 16, 24, 32):
        _fail("BMP", f"unsupported compression {compression} / {bits} bits per pixel")
    body = np.frombuffer(data, np.uint8, stride * h, offset).reshape(h, stride)
    if not top_down:
        body = body[::-1]
    if bits <= 8:
        count = min(n_colors or (1 << bits), (offset - 14 - header) // entry)
        table = np.frombuffer(data, np.uint8, count * entry, 14 + header).reshape(count, entry)
        index = body.astype(np.int64)
        if bits < 8:
            index = np.unpackbits(body, axis=1).reshape(h, -1, bits)
            index = (index * (1 << np.arange(bits - 1, -1, -1))).sum(-1)
        index = index[:, :w]
        return table[index.clip(0, count - 1)][..., 2::-1].copy(), "RGB"
    if compression == 0 and bits in (24, 32):
        px = body[:, : w * bits // 8].reshape(h, w, bits // 8)
        return px[..., 2::-1].copy(), "RGB"
    masks = (0x7C00, 0x3E0, 0x1F) if bits == 16 else (0xFF0000, 0xFF00, 0xFF)
    if compression == 3:
        masks = struct.unpack_from("<III", data, 54)  # after or inside the info header
    values = body[:, : w * bits // 8].copy().view("<u2" if bits == 16 else "<u4")
    return np.stack([_mask_channel(values, m) for m in masks], axis=-1), "RGB"


# ---- PNM -----------------------------------------------------------------------------

_PNM_TOKEN = re.compile(rb"(?:\s|#[^\n]*\n?)*(\S+)")


def decode_pnm(data: bytes):
    kind = data[1:2]
    pos, fields = 2, []
    needed = 2 if kind in (b"1", b"4") else 3
    while len(fields) < needed:
        m = _PNM_TOKEN.match(data, pos)
        if m is None or not m.group(1).isdigit():
            _fail("PNM", "malformed header")
        fields.append(int(m.group(1)))
        pos = m.end()
    w, h = fields[:2]
    maxval = fields[2] if needed == 3 else 1
    channels = 3 if kind in (b"3", b"6") else 1
    count = w * h * channels
    if kind in (b"1", b"2", b"3"):
        text = re.sub(rb"#[^\n]*", b" ", data[pos:])
        if kind == b"1":  # bits may be written without spaces
            values = np.array([c - 48 for c in text if c in b"01"][:count], np.uint32)
        else:
            values = np.array([int(t) for t in text.split()[:count]], np.uint32)
    elif kind == b"4":
        row_bytes = (w + 7) // 8
        body = np.frombuffer(data, np.uint8, row_bytes * h, pos + 1).reshape(h, row_bytes)
        values = np.unpackbits(body, axis=1)[:, :w].reshape(-1).astype(np.uint32)
    else:
        wide = maxval > 255
        values = np.frombuffer(data, ">u2" if wide else np.uint8, count, pos + 1)
        values = values.astype(np.uint32)
    if values.size != count or maxval <= 0:
        _fail("PNM", f"expected {count} samples, found {values.size}")
    if kind in (b"1", b"4"):
        values = (1 - values) * 255  # 1 is black
    elif maxval != 255:
        values = (values * 255 + maxval // 2) // maxval
    return values.astype(np.uint8).reshape(h, w, channels), "RGB" if channels == 3 else "L"


# ---- TIFF ----------------------------------------------------------------------------

_TIFF_TYPES = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i", 16: "Q"}


def _tiff_tags(data: bytes, order: str) -> dict[int, list[int]]:
    (ifd,) = struct.unpack_from(order + "I", data, 4)
    (n,) = struct.unpack_from(order + "H", data, ifd)
    tags = {}
    for i in range(n):
        entry = ifd + 2 + 12 * i
        tag, kind, count = struct.unpack_from(order + "HHI", data, entry)
        code = _TIFF_TYPES.get(kind)
        if code is None:
            continue  # rationals, text: nothing the pixels need
        size = struct.calcsize(code) * count
        at = entry + 8 if size <= 4 else struct.unpack_from(order + "I", data, entry + 8)[0]
        tags[tag] = list(struct.unpack_from(order + code * count, data, at))
    return tags


def _unpackbits_tiff(strip: bytes) -> bytes:
    """PackBits: a header byte n < 128 copies n + 1 bytes, n > 128 repeats one 257 - n times."""
    out, i = bytearray(), 0
    while i < len(strip):
        n = strip[i]
        if n < 128:
            out += strip[i + 1 : i + 2 + n]
            i += 2 + n
        else:
            if n > 128:
                out += strip[i + 1 : i + 2] * (257 - n)
            i += 2 if n > 128 else 1
    return bytes(out)


def decode_tiff(data: bytes):
    order = "<" if data[:2] == b"II" else ">"
    try:
        tags = _tiff_tags(data, order)
        w, h = tags[256][0], tags[257][0]
        offsets, counts = tags[273], tags[279]
    except (struct.error, KeyError, IndexError) as e:
        _fail("TIFF", f"malformed or tiled file ({e!r}); only stripped baseline TIFF is supported")
    spp, photo = tags.get(277, [1])[0], tags.get(262, [1])[0]
    compression, predictor = tags.get(259, [1])[0], tags.get(317, [1])[0]
    if set(tags.get(258, [1])) != {8} or tags.get(284, [1])[0] != 1:
        _fail("TIFF", "only 8-bit, chunky (PlanarConfiguration 1) images are supported")
    if compression not in (1, 32773) or predictor not in (1, 2) or photo not in (0, 1, 2, 3):
        _fail("TIFF", f"unsupported compression {compression} / photometric {photo}")
    strips = [data[o : o + c] for o, c in zip(offsets, counts)]
    if compression == 32773:
        strips = [_unpackbits_tiff(s) for s in strips]
    body = b"".join(strips)
    if len(body) < w * h * spp:
        _fail("TIFF", f"pixel data holds {len(body)} bytes, expected {w * h * spp}")
    px = np.frombuffer(body, np.uint8, w * h * spp).reshape(h, w, spp)
    if predictor == 2:
        px = np.cumsum(px, axis=1, dtype=np.uint8)  # wraps modulo 256
    if photo == 3:
        table = (np.array(tags[320], np.uint16).reshape(3, -1).T >> 8).astype(np.uint8)
        return table[px[..., 0]], "RGB"
    if photo == 0:
        px = 255 - px
    if photo == 2 and spp >= 3:
        return px[..., :4].copy(), "RGBA" if spp >= 4 else "RGB"
    return px[..., :2].copy(), "LA" if spp >= 2 else "L"
