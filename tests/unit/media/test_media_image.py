"""Images made with Pillow: decoding, channel conversion, both resize methods, bad files (truncated,
corrupt, empty, decompression bombs), size inference, source resolution and media_root."""

from __future__ import annotations

import io
import os
import re
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from core.errors import ConfigError, DataError
from storage import media
from storage.media import MediaError, resolve
from storage.media_image import ImageCodec, as_hwc, crop_or_pad, probe, store_value
from tasks.config.loader import parse_config
from tasks.features import build_all


def picture(h=12, w=16, mode="RGB", seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    arr = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    return Image.fromarray(arr[:, :, 0] if channels == 1 else arr)


def encode(im: Image.Image, fmt="PNG") -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return buf.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG that claims ``width x height`` gray pixels: a decompression bomb's header."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def test_decode_gives_uint8_chw_equal_to_pillows_own_conversion_and_resize():
    im = picture(12, 16)
    out, _ = ImageCodec(6, 8, 3).decode(encode(im))
    expected = np.asarray(im.resize((8, 6), Image.Resampling.BILINEAR)).transpose(2, 0, 1)
    assert out.dtype == np.uint8 and out.shape == (3, 6, 8) and np.array_equal(out, expected)
    gray, _ = ImageCodec(12, 16, 1).decode(encode(im))
    assert gray.shape == (1, 12, 16) and np.array_equal(gray[0], np.asarray(im.convert("L")))
    rgb_of_gray, _ = ImageCodec(12, 16, 3).decode(encode(picture(mode="L")))
    assert (rgb_of_gray[0] == rgb_of_gray[1]).all() and (rgb_of_gray[1] == rgb_of_gray[2]).all()
    rgba, _ = ImageCodec(12, 16, 4).decode(encode(im))
    assert (rgba[3] == 255).all() and np.array_equal(rgba[:3], np.asarray(im).transpose(2, 0, 1))


def test_crop_or_pad_centers_the_picture():
    arr = np.arange(5 * 7, dtype=np.uint8).reshape(5, 7, 1)
    cropped = crop_or_pad(arr, 3, 3)
    assert np.array_equal(cropped[:, :, 0], arr[1:4, 2:5, 0])
    padded = crop_or_pad(arr, 9, 11)
    assert np.array_equal(padded[2:7, 2:9, 0], arr[:, :, 0]) and padded[:2].sum() == 0 and padded[:, :2].sum() == 0
    out, _ = ImageCodec(4, 20, 1, "crop_or_pad").decode(encode(picture(12, 16, "L")))
    assert out.shape == (1, 4, 20) and (out[0, :, :2] == 0).all()


def test_jpeg_draft_decodes_large_jpegs_at_a_reduced_scale_close_to_a_full_decode():
    y, x = np.mgrid[0:256, 0:256]
    smooth = np.stack([x, y, (x + y) // 2], axis=2).astype(np.uint8)
    data = encode(Image.fromarray(smooth), "JPEG")
    full, _ = ImageCodec(32, 32, 3).decode(data)
    draft, _ = ImageCodec(32, 32, 3, jpeg_draft=True).decode(data)
    assert draft.shape == full.shape and not np.array_equal(draft, full)
    assert np.abs(draft.astype(int) - full.astype(int)).mean() < 2.0
    png = encode(Image.fromarray(smooth), "PNG")  # other formats are not affected
    assert np.array_equal(ImageCodec(32, 32, 3, jpeg_draft=True).decode(png)[0], ImageCodec(32, 32, 3).decode(png)[0])
    assert ImageCodec.from_json({"height": 1, "width": 1, "num_channels": 1, "resize_method": "interpolate"}) \
        == ImageCodec(1, 1, 1)


def test_jpeg_and_other_formats_decode():
    for fmt in ("JPEG", "BMP", "GIF", "WEBP", "TIFF"):
        out, _ = ImageCodec(12, 16, 3).decode(encode(picture(), fmt))
        assert out.shape == (3, 12, 16), fmt


@pytest.mark.parametrize("data,reason", [
    (b"", "empty file"),
    (b"GIF89a this is not a picture at all", "not a readable image"),
    (encode(picture(64, 64), "JPEG")[:1500], "corrupt or truncated image"),
    (encode(picture(64, 64), "JPEG")[:300], "not a readable image"),  # cut inside the header
    (encode(picture(64, 64), "PNG")[:200], "corrupt or truncated image"),
    (png_header_only(100_000, 100_000), "decompression bomb"),  # 10^10 pixels: Pillow refuses to open it
    (png_header_only(10_000, 10_000), "decompression bomb: 10000 x 10000"),  # 10^8: over the limit, under 2x
])
def test_bad_images_fail_with_a_reason(data, reason):
    with pytest.raises(MediaError, match=reason):
        ImageCodec(8, 8, 3).decode(data)


def test_probe_reads_the_header_only():
    assert probe(encode(picture(12, 16, "RGBA"))) == (12, 16, 4)
    with pytest.raises(MediaError, match="decompression bomb"):
        probe(png_header_only(10_000, 10_000))


def image_feature(**preprocessing):
    config = parse_config({"input_features": [{"name": "im", "type": "image", "preprocessing": preprocessing}]})
    return build_all(config)[0]


def test_size_and_channels_are_inferred_like_ludwig():
    sample = [encode(picture(10, 20, "RGB")), encode(picture(31, 40, "RGBA")), b"broken", encode(picture(12, 30, "L"))]
    meta = image_feature().finalize_media(iter(sample))
    # mean of the readable ones: heights (10, 31, 12) -> 17.67, widths (20, 40, 30) -> 30; channels 8/3 -> 3
    assert (meta["height"], meta["width"], meta["num_channels"]) == (18, 30, 3)
    assert meta["codec"] == {"kind": "image", "height": 18, "width": 30, "num_channels": 3,
                             "resize_method": "interpolate", "jpeg_draft": False}
    capped = image_feature(infer_image_max_height=15, infer_image_max_width=25).finalize_media(iter(sample))
    assert (capped["height"], capped["width"]) == (15, 25)
    first = image_feature(infer_image_dimensions=False, infer_image_num_channels=False).finalize_media(iter(sample))
    assert (first["height"], first["width"], first["num_channels"]) == (10, 20, 3)
    fixed = image_feature(height=5, width=6, num_channels=1).finalize_media(iter(()))
    assert fixed["preprocessing"] == {"height": 5, "width": 6, "num_channels": 1, "resize_method": "interpolate"}
    with pytest.raises(DataError, match="no readable image among the fit rows"):
        image_feature().finalize_media(iter([b"broken"]))


def test_options_are_checked():
    with pytest.raises(ConfigError, match="set both height and width"):
        image_feature(height=5)
    with pytest.raises(ConfigError, match="'num_channels' parameter of image feature 'im' must be one of 1, 3, 4"):
        image_feature(num_channels=2)
    assert image_feature(in_memory=False).mode == "lazy_cached" and image_feature().mode == "eager"


# ---- sources ---------------------------------------------------------------------------------------

def test_resolve_relative_absolute_url_and_cache_references(tmp_path):
    base = str(tmp_path / "data")
    assert resolve("img/a.png", base) == os.path.join(base, "img", "a.png")
    assert resolve("/abs/b.png", base) == "/abs/b.png"
    assert resolve("file:///abs/c.png", base) == "/abs/c.png"
    assert resolve("s3://bucket/x/../y.png", base) == "s3://bucket/x/../y.png"
    assert resolve("y.png", "s3://bucket/set") == "s3://bucket/set/y.png"
    assert resolve("media-cache:im/ab.png", base, cache_dir=str(tmp_path / "c")) == \
        str(tmp_path / "c" / "media" / "im" / "ab.png")
    with pytest.raises(MediaError):
        resolve("media-cache:im/../../etc/passwd", base, cache_dir=str(tmp_path / "c"))


def test_media_root_keeps_paths_inside_it(tmp_path):
    base = tmp_path / "data"
    (base / "images").mkdir(parents=True)
    outside = tmp_path / "secret.png"
    outside.write_bytes(encode(picture()))
    os.symlink(outside, base / "images" / "link.png")
    assert resolve("a.png", str(base), media_root="images") == str(base / "images" / "a.png")
    assert resolve(str(base / "images" / "b.png"), str(base), media_root=".") == str(base / "images" / "b.png")
    for raw in ("../secret.png", "../../secret.png", str(outside), "link.png"):
        with pytest.raises(MediaError, match="outside media_root|escapes media_root"):
            resolve(raw, str(base), media_root="images")
    assert resolve("s3://b/set/x.png", "s3://b", media_root="s3://b/set") == "s3://b/set/x.png"
    with pytest.raises(MediaError, match="outside media_root"):
        resolve("s3://b/set/../other/x.png", "s3://b", media_root="s3://b/set")


def test_read_bytes_from_a_url_and_missing_files(tmp_path):
    import fsspec

    data = encode(picture())
    with fsspec.open("memory://media-test/a.png", "wb") as fh:
        fh.write(data)
    assert media.read_bytes("memory://media-test/a.png") == data
    with pytest.raises(MediaError, match="file not found"):
        media.read_bytes(str(tmp_path / "nope.png"))
    with pytest.raises(MediaError, match="file not found"):
        media.read_bytes("memory://media-test/nope.png")
    with pytest.raises(MediaError, match="is a directory"):
        media.read_bytes(str(tmp_path))


# ---- in-memory values --------------------------------------------------------------------------------

def test_in_memory_values_are_stored_once_by_content(tmp_path):
    arr = np.asarray(picture(6, 5))
    ref = store_value(str(tmp_path), "im", arr)
    assert ref.startswith("media-cache:im/") and ref.endswith(".png")
    path = tmp_path / "media" / ref.removeprefix("media-cache:")
    assert np.array_equal(np.asarray(Image.open(path)), arr)
    mtime = path.stat().st_mtime_ns
    assert store_value(str(tmp_path), "im", arr.transpose(2, 0, 1)) == ref  # CHW: the same picture
    assert store_value(str(tmp_path), "im", Image.fromarray(arr)) != ref  # a PIL image hashes by its own type
    assert path.stat().st_mtime_ns == mtime
    jpeg = encode(picture(), "JPEG")
    jref = store_value(str(tmp_path), "im", jpeg)
    assert jref.endswith(".jpg") and (tmp_path / "media" / jref.removeprefix("media-cache:")).read_bytes() == jpeg
    with pytest.raises(ValueError, match="uint8"):
        as_hwc(np.zeros((4, 4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="1, 3 or 4 channels"):
        as_hwc(np.zeros((5, 6, 7), dtype=np.uint8))


# ---- plain JPEG/PNG go straight to Pillow's decoder: the same pixels as Image.open ----------------

def _pillow_reference(data: bytes, codec: ImageCodec) -> np.ndarray:
    im = Image.open(io.BytesIO(data)).convert({1: "L", 3: "RGB", 4: "RGBA"}[codec.num_channels])
    arr = np.asarray(im.resize((codec.width, codec.height), Image.Resampling.BILINEAR))
    return (arr[:, :, None] if arr.ndim == 2 else arr).transpose(2, 0, 1)


def _saved(im: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _smooth(h=57, w=75, mode="RGB", seed=3) -> Image.Image:
    """Gradients plus noise (JPEG-like content), odd sizes so that the resize really filters."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h), (x * y) % 256], axis=2)
    arr = np.clip(base + rng.integers(-30, 31, base.shape), 0, 255).astype(np.uint8)
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    return Image.fromarray(arr[:, :, 0] if channels == 1 else arr[:, :, :channels])


def _text_chunk():
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Software", "prepflow tests")
    return info


PLAIN = {
    "jpeg rgb q90": _saved(_smooth(), "JPEG", quality=90),
    "jpeg rgb 4:4:4": _saved(_smooth(), "JPEG", quality=75, subsampling=0),
    "jpeg progressive": _saved(_smooth(), "JPEG", quality=85, progressive=True),
    "jpeg optimized, restart markers": _saved(_smooth(), "JPEG", optimize=True, restart_marker_blocks=2),
    "jpeg gray": _saved(_smooth(mode="L"), "JPEG"),
    "jpeg with a comment": _saved(_smooth(), "JPEG", comment=b"made by prepflow's tests"),
    "jpeg 70 kB (fed in one call, not 64 KiB blocks)": _saved(_smooth(300, 280), "JPEG", quality=100),
    "png rgb": _saved(_smooth(), "PNG"),
    "png gray": _saved(_smooth(mode="L"), "PNG"),
    "png rgba": _saved(_smooth(mode="RGBA"), "PNG"),
    "png with pHYs (dpi)": _saved(_smooth(), "PNG", dpi=(96, 96)),
    "png of several IDAT chunks": _saved(_smooth(400, 300), "PNG", compress_level=0),
}

NOT_PLAIN = {  # decoded by the general path: the same result as before
    "png palette": _saved(_smooth().convert("P"), "PNG"),
    "png rgb with tRNS": _saved(_smooth(), "PNG", transparency=(1, 2, 3)),
    "png 16-bit gray": _saved(Image.fromarray((np.arange(57 * 75, dtype=np.uint16) * 7).reshape(57, 75)), "PNG"),
    "png gray+alpha": _saved(_smooth(mode="RGBA").convert("LA"), "PNG"),
    "png with text": _saved(_smooth(), "PNG", pnginfo=_text_chunk()),
    "jpeg cmyk": _saved(_smooth().convert("CMYK"), "JPEG"),
    "jpeg with exif": _saved(_smooth(), "JPEG", exif=Image.Exif()),
    "jpeg with icc profile": _saved(_smooth(), "JPEG", icc_profile=b"\0" * 200),
}


@pytest.mark.parametrize("name", sorted(PLAIN))
@pytest.mark.parametrize("codec", [ImageCodec(24, 32, 3), ImageCodec(24, 32, 1), ImageCodec(90, 110, 4),
                                   ImageCodec(57, 75, 3)], ids=["rgb-down", "gray", "rgba-up", "same-size"])
def test_plain_files_skip_image_open_and_decode_to_the_same_pixels(name, codec):
    from storage.media_image import _decode_plain

    data = PLAIN[name]
    fast = _decode_plain(data)
    assert fast is not None, f"{name}: expected the plain path"
    reference = Image.open(io.BytesIO(data))
    reference.load()
    assert fast.mode == reference.mode and fast.size == reference.size
    assert np.array_equal(np.asarray(fast), np.asarray(reference))
    out, _ = codec.decode(data)
    assert out.dtype == np.uint8 and np.array_equal(out, _pillow_reference(data, codec))


@pytest.mark.parametrize("name", sorted(NOT_PLAIN))
def test_other_files_take_the_general_path_with_the_same_pixels(name):
    from storage.media_image import _decode_plain

    data = NOT_PLAIN[name]
    assert _decode_plain(data) is None
    codec = ImageCodec(24, 32, 3)
    assert np.array_equal(codec.decode(data)[0], _pillow_reference(data, codec))


def test_interlaced_png_takes_the_general_path():
    from storage.media_image import _decode_plain

    good = PLAIN["png rgb"]
    ihdr_at = 8
    body = bytearray(good[ihdr_at + 8:ihdr_at + 8 + 13])
    body[12] = 1  # Adam7: the plain path refuses it before decoding anything
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + bytes(body)) & 0xFFFFFFFF)
    data = good[:ihdr_at + 8] + bytes(body) + crc + good[ihdr_at + 8 + 13 + 4:]
    assert _decode_plain(data) is None


@pytest.mark.parametrize("name", ["jpeg rgb q90", "png rgb", "png of several IDAT chunks"])
def test_damaged_plain_files_fail_as_they_did_through_image_open(name, monkeypatch):
    import storage.media_image as mi

    data = PLAIN[name]
    damaged = {"truncated": data[:len(data) * 2 // 3], "cut in the header": data[:40]}
    if name.startswith("png"):
        bad_crc = bytearray(data)
        bad_crc[29] ^= 0xFF  # IHDR's CRC: Image.open refuses the file
        damaged["bad header CRC"] = bytes(bad_crc)
        garbage = bytearray(data)
        first_idat = data.index(b"IDAT") + 4
        garbage[first_idat:first_idat + 16] = b"\xff" * 16  # not a zlib stream
        damaged["corrupt image data"] = bytes(garbage)
    codec = ImageCodec(8, 8, 3)
    messages = {}
    for what, bad in damaged.items():
        assert mi._decode_plain(bad) is None, what
        with pytest.raises(MediaError) as got:
            codec.decode(bad)
        messages[what] = re.sub(r" at 0x[0-9a-f]+", "", str(got.value))
    monkeypatch.setattr(mi, "_decode_plain", lambda data: None)  # the general path alone
    for what, bad in damaged.items():
        with pytest.raises(MediaError) as got:
            codec.decode(bad)
        assert messages[what] == re.sub(r" at 0x[0-9a-f]+", "", str(got.value)), what


def test_the_plain_path_respects_the_decompression_bomb_limit(monkeypatch):
    from storage.media_image import _decode_plain

    data = PLAIN["png rgb"]
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 57 * 75 - 1)
    assert _decode_plain(data) is None
    with pytest.raises(MediaError, match="decompression bomb"):
        ImageCodec(8, 8, 3).decode(data)


def test_only_public_pillow_names_are_used():
    """No underscore name of Pillow (``Image._getdecoder``, ``Image.core``, ``Image.Image()._new`` ...)."""
    import ast

    import storage.media_image as mi

    tree = ast.parse(open(mi.__file__, encoding="utf-8").read())
    pil_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 and n.module.split(".")[0] == "PIL" for a in n.names}
    private = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and (n.attr.startswith("_") or n.attr == "core")
               and any(isinstance(x, ast.Name) and x.id in pil_names for x in ast.walk(n.value))]
    assert pil_names and not private
