"""Images with Pillow: bytes -> uint8 ``C x H x W`` (DESIGN section 3).

Decoding: ``Image.open`` (a picture larger than ``PIL.Image.MAX_IMAGE_PIXELS`` fails as a
decompression bomb before any pixel is decoded), then conversion to the target channels with
Pillow's own rules (1: ``L``, ITU-R 601-2 luma; 3: ``RGB``; 4: ``RGBA``, opaque alpha added; a
gray picture becomes three equal channels, where Ludwig pads with zero channels), then
``resize_method``: ``interpolate`` (Pillow's bilinear resampling with antialiasing, as
torchvision's ``resize``) or ``crop_or_pad`` (centered crop and/or zero padding). With
``jpeg_draft`` (off by default) a JPEG much larger than the target is decoded at 1/2, 1/4 or 1/8
scale by libjpeg (DCT scaling, never below the target size; what Pillow's ``thumbnail`` does)
before the resize: several times less decoding work, pixels slightly different from a full decode.
A truncated or corrupt file fails when its pixels are decoded. Failures are ``MediaError``.

Plain files skip ``Image.open``: an 8-bit baseline/progressive JPEG (gray or YCbCr) or an 8-bit,
non-interlaced gray/RGB/RGBA PNG whose header segments are all ones that Pillow's plugin would only
store (``_plain_jpeg``, ``_plain_png``: checked as strictly as the plugin checks them) goes straight
to Pillow's own decoder (``jpeg``, ``zip``) through the public ``Image.frombytes(mode, size, data,
decoder_name, args)`` with the arguments ``Image.open`` would give it, so the pixels are the same;
the per-image Python of the plugins (marker walk, chunk reads, ``load``'s read loop), which holds the
GIL and limits the decode threads, is skipped (it costs the most on small pictures; figures in
``benchmarks/RESULTS.md``). Anything else, and a plain file whose decoder does not
finish cleanly, takes the general path, whose result or error is then the answer. Only Pillow's
public API is used.

In-memory values (encoded bytes, numpy arrays HWC or CHW, PIL images) are written to the media
cache by ``store_value``: bytes as they are, arrays and PIL images as lossless PNG.
"""

from __future__ import annotations

import io
import warnings
import zlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from storage.media_io import MediaError, store_file, typed_digest

# prepflow checks the pixel limit itself and fails the image (see ImageCodec); Pillow's warning
# between 1x and 2x the limit would only repeat that.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)

MODES = {1: "L", 3: "RGB", 4: "RGBA"}
EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "BMP": ".bmp", "WEBP": ".webp", "TIFF": ".tif"}
RESIZE_METHODS = ("interpolate", "crop_or_pad")


def open_image(data: bytes) -> Image.Image:
    """The image's header is read (no pixels yet); an empty, unknown or too large file fails."""
    if not data:
        raise MediaError("empty file (0 bytes)")
    try:
        im = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise MediaError(f"decompression bomb ({exc})") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise MediaError(f"not a readable image ({type(exc).__name__}: {exc})") from None
    limit = Image.MAX_IMAGE_PIXELS
    if limit and im.width * im.height > limit:
        raise MediaError(f"decompression bomb: {im.width} x {im.height} = {im.width * im.height} pixels exceeds "
                         f"Pillow's limit of {limit} (PIL.Image.MAX_IMAGE_PIXELS)")
    return im


# ---- plain JPEG/PNG: Pillow's decoder without Image.open ------------------------------------------

_JPEG_SOF = (0xC0, 0xC1, 0xC2)  # baseline, extended sequential, progressive (Huffman)
_JPEG_MODES = {1: "L", 3: "RGB"}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_MODES = {(8, 0): "L", (8, 2): "RGB", (8, 6): "RGBA"}  # (bit depth, colour type) -> mode = rawmode
_PNG_INFO_CHUNKS = {b"gAMA": 4, b"cHRM": 32, b"sRGB": 1, b"pHYs": 9}  # only set info; their exact lengths


def _size_ok(width: int, height: int) -> bool:
    """A size the general path would open without a decompression-bomb error or warning."""
    limit = Image.MAX_IMAGE_PIXELS
    return width > 0 and height > 0 and not (limit and width * height > limit)


def _plain_jpeg(data: bytes) -> tuple[str, int, int] | None:
    """``(mode, width, height)`` of a JPEG whose segments before the scan are only SOI, a JFIF APP0,
    DQT (well-formed tables), DHT, DRI, COM and one 8-bit SOF0/1/2 of 1 or 3 components, each whole;
    else None. For such a file ``JpegImagePlugin`` stores what it reads and decodes the whole file
    with ``jpeg_decoder(mode, mode, "")``."""
    n, pos, found = len(data), 2, None
    while pos + 4 <= n and data[pos] == 0xFF:
        marker = data[pos + 1]
        length = (data[pos + 2] << 8) | data[pos + 3]
        end = pos + 2 + length
        if length < 2 or end > n:
            return None
        if marker == 0xDA:  # start of scan: the plugin's header walk ends here
            return found
        seg = data[pos + 4:end]
        if marker in _JPEG_SOF:
            if found is not None or len(seg) < 6 or seg[0] != 8 or seg[5] not in _JPEG_MODES \
                    or len(seg) != 6 + 3 * seg[5]:
                return None
            width, height = (seg[3] << 8) | seg[4], (seg[1] << 8) | seg[2]
            if not _size_ok(width, height):
                return None
            found = (_JPEG_MODES[seg[5]], width, height)
        elif marker == 0xDB:  # DQT: tables of 1 + 64 * precision bytes, as the plugin checks
            while seg:
                size = 1 + 64 * (1 if seg[0] // 16 == 0 else 2)
                if len(seg) < size:
                    return None
                seg = seg[size:]
        elif marker == 0xE0:
            if not (seg.startswith(b"JFIF\0") and len(seg) >= 12):
                return None
        elif marker not in (0xC4, 0xDD, 0xFE):  # DHT, DRI, COM: skipped or stored
            return None
        pos = end
    return None


def _plain_png(data: bytes) -> tuple[str, int, int, bytes] | None:
    """``(mode, width, height, zlib stream)`` of a PNG made of IHDR (8-bit gray, RGB or RGBA, not
    interlaced), optional gAMA/cHRM/sRGB/pHYs of their exact sizes, IDAT chunks and IEND, every chunk
    whole and every CRC before the image data right (the plugin checks those); else None."""
    if not data.startswith(_PNG_SIGNATURE) or len(data) < 33 or data[12:16] != b"IHDR":
        return None
    n, pos, idat, mode, size = len(data), 8, [], None, (0, 0)
    while pos + 12 <= n:
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        end = pos + 12 + length
        if end > n:
            return None
        if kind == b"IDAT":
            idat.append(data[pos + 8:end - 4])
        elif kind == b"IEND":
            return (mode, *size, b"".join(idat)) if idat and mode else None
        elif idat:  # only IDAT chunks, then IEND
            return None
        else:
            if int.from_bytes(data[end - 4:end], "big") != zlib.crc32(data[pos + 4:end - 4]):
                return None
            body = data[pos + 8:end - 4]
            if kind == b"IHDR":
                if pos != 8 or length != 13 or body[10:13] != b"\0\0\0":  # compression, filter, interlace
                    return None
                mode = _PNG_MODES.get((body[8], body[9]))
                size = (int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big"))
                if mode is None or not _size_ok(*size):
                    return None
            elif _PNG_INFO_CHUNKS.get(kind) != length:
                return None
        pos = end
    return None


def _decode_plain(data: bytes) -> Image.Image | None:
    """A plain JPEG/PNG (see above) decoded by Pillow's decoder (``Image.frombytes`` with the decoder's
    name and the arguments ``Image.open(...).load()`` would give it), so the pixels are the same;
    None when the file is not plain or the decoder does not finish cleanly (then the general path
    decodes it, or fails with its own message)."""
    if data[:3] == b"\xff\xd8\xff":
        header = _plain_jpeg(data)
        if header is None:
            return None
        mode, width, height = header
        name, args, payload = "jpeg", (mode, ""), data
    elif data[:1] == b"\x89":
        header = _plain_png(data)
        if header is None:
            return None
        mode, width, height, payload = header
        name, args = "zip", mode
    else:
        return None
    try:  # Image.frombytes runs the named decoder over the whole payload; an unfinished decode is a ValueError
        return Image.frombytes(mode, (width, height), payload, name, args)
    except Exception:  # corrupt or truncated, or no memory for the picture: the general path reports it
        return None


def channels_of(im: Image.Image) -> int:
    if im.mode == "P":
        return 4 if "transparency" in im.info else 3
    return len(im.getbands())


def probe(data: bytes) -> tuple[int, int, int]:
    """``(height, width, channels)`` from the header alone."""
    im = open_image(data)
    return im.height, im.width, channels_of(im)


def nearest_channels(mean: float) -> int:
    """The supported channel count (1, 3, 4) closest to ``mean``; ties go to the smaller."""
    return min((1, 3, 4), key=lambda c: (abs(c - mean), c))


def crop_or_pad(arr: np.ndarray, height: int, width: int) -> np.ndarray:
    """Centered crop and/or zero padding of an ``H x W x C`` array to ``height x width``."""
    h, w = arr.shape[:2]
    out = np.zeros((height, width, arr.shape[2]), dtype=arr.dtype)
    ch, cw = min(h, height), min(w, width)
    sy, sx = (h - ch) // 2, (w - cw) // 2
    dy, dx = (height - ch) // 2, (width - cw) // 2
    out[dy:dy + ch, dx:dx + cw] = arr[sy:sy + ch, sx:sx + cw]
    return out


@dataclass(frozen=True)
class ImageCodec:
    height: int
    width: int
    num_channels: int
    resize_method: str = "interpolate"
    jpeg_draft: bool = False
    kind: str = "image"

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.num_channels, self.height, self.width)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ImageCodec":
        return cls(**{k: data[k] for k in ("height", "width", "num_channels", "resize_method")},
                   jpeg_draft=bool(data.get("jpeg_draft", False)))

    def fill(self) -> np.ndarray:
        return np.zeros(self.shape, dtype=np.uint8)

    def decode(self, data: bytes) -> tuple[np.ndarray, int]:
        """``(C x H x W uint8, 0)``; ``MediaError`` when the bytes are not a usable image."""
        target = MODES[self.num_channels]
        im = _decode_plain(data) if not (self.jpeg_draft and self.resize_method == "interpolate") else None
        if im is None:
            im = open_image(data)
        try:
            if self.jpeg_draft and self.resize_method == "interpolate" and im.format == "JPEG":
                im.draft(None, (self.width, self.height))  # libjpeg scales by 1/2..1/8, never below the target
            if im.mode != target:
                im = im.convert(target)
            if self.resize_method == "interpolate" and im.size != (self.width, self.height):
                im = im.resize((self.width, self.height), Image.Resampling.BILINEAR)
            arr = np.asarray(im)
        except Image.DecompressionBombError as exc:
            raise MediaError(f"decompression bomb ({exc})") from None
        except Exception as exc:  # any decoder failure on untrusted bytes is this value's failure
            raise MediaError(f"corrupt or truncated image ({type(exc).__name__}: {exc})") from None
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if self.resize_method == "crop_or_pad" and arr.shape[:2] != (self.height, self.width):
            arr = crop_or_pad(arr, self.height, self.width)
        return np.ascontiguousarray(arr.transpose(2, 0, 1)), 0


# ---- in-memory values ----------------------------------------------------------------------------

def _sniff_extension(data: bytes) -> str:
    try:
        fmt = Image.open(io.BytesIO(data)).format
    except Exception:  # not an image Pillow knows: kept as is, it fails when decoded
        return ".bin"
    return EXTENSIONS.get(fmt or "", f".{(fmt or 'bin').lower()}")


def as_hwc(arr: np.ndarray) -> np.ndarray:
    """A 2-D (H x W) or 3-D (H x W x C, or C x H x W when the last axis cannot be channels) uint8 array
    as H x W x C."""
    if arr.ndim == 2:
        arr = arr[:, :, None]
    elif arr.ndim != 3:
        raise ValueError(f"expected a 2-D or 3-D array, got shape {arr.shape}")
    elif arr.shape[-1] not in (1, 3, 4) and arr.shape[0] in (1, 3, 4):
        arr = arr.transpose(1, 2, 0)
    if arr.shape[-1] not in (1, 3, 4):
        raise ValueError(f"expected 1, 3 or 4 channels (HWC or CHW), got shape {arr.shape}")
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * 255
    if arr.dtype != np.uint8:
        raise ValueError(f"expected uint8 pixels, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr)


def store_value(cache_dir: str, feature: str, value: Any) -> str:
    """An in-memory image value -> its ``media-cache:`` reference (the file is written once)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        name = typed_digest("bytes", data) + _sniff_extension(data)

        def write_bytes(path):
            path.write_bytes(data)

        return store_file(cache_dir, feature, name, write_bytes)
    if isinstance(value, Image.Image):
        im = value
        palette = bytes(im.getpalette() or []) if im.mode == "P" else b""
        name = typed_digest("pil", im.mode, f"{im.width}x{im.height}", im.tobytes(), palette,
                            repr(im.info.get("transparency"))) + ".png"
    else:
        arr = as_hwc(np.asarray(value))
        name = typed_digest("array", str(arr.shape), arr.tobytes()) + ".png"
        im = None

    def write_png(path):
        image = im if im is not None else Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr)
        if image.mode not in ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"):
            image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
        image.save(path, format="PNG")

    return store_file(cache_dir, feature, name, write_png)
