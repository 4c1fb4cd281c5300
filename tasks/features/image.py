"""image: pixels uint8 ``n x C x H x W`` (eager), or a slot into the split's media table (lazy modes).

Options (Ludwig's names and defaults): ``height`` and ``width`` (both or neither), else inferred
from up to ``infer_image_sample_size`` (100) images of the fit rows, in input order: the rounded
mean height and width, capped at ``infer_image_max_height``/``_width`` (256); with
``infer_image_dimensions: false`` the first image's size. ``num_channels`` (1, 3 or 4), else the
sample's mean channel count rounded to the nearest of those (the first image's with
``infer_image_num_channels: false``). ``resize_method``: ``interpolate`` or ``crop_or_pad``;
``jpeg_draft: true`` lets libjpeg decode large JPEGs at a reduced scale first (faster, pixels differ
slightly from a full decode; see ``storage.media_image``).
Inference reads image headers only. Metadata: ``height``, ``width``, ``num_channels``,
``resize_method``, ``mode`` and ``codec`` (everything the loader and the Preprocessor need to
decode the same way); the resolved values are also written into ``preprocessing`` as Ludwig does.

Ludwig's model-side options ``scaling``, ``standardize_image`` and ``requires_equal_dimensions`` are
accepted and ignored: the artifact holds raw uint8 pixels.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import Field, model_validator

from storage.media_image import ImageCodec, nearest_channels, probe
from tasks.features.media import MediaFeature, MediaPreprocessing


class ImagePreprocessing(MediaPreprocessing):
    height: int | None = Field(default=None, gt=0)
    width: int | None = Field(default=None, gt=0)
    num_channels: Literal[1, 3, 4] | None = None
    resize_method: Literal["interpolate", "crop_or_pad"] = "interpolate"
    jpeg_draft: bool = False
    infer_image_dimensions: bool = True
    infer_image_num_channels: bool = True
    infer_image_max_height: int = Field(default=256, gt=0)
    infer_image_max_width: int = Field(default=256, gt=0)
    infer_image_sample_size: int = Field(default=100, gt=0)
    scaling: Any = None  # Ludwig model-side, ignored
    standardize_image: Any = None  # Ludwig model-side, ignored
    requires_equal_dimensions: Any = None  # Ludwig, ignored (every image is resized)

    @model_validator(mode="after")
    def _both_sizes(self) -> "ImagePreprocessing":
        if (self.height is None) != (self.width is None):
            raise ValueError("set both height and width, or neither (both are then inferred)")
        return self


class ImageFeature(MediaFeature):
    codec_type = ImageCodec  # what ``codec(metadata)`` rebuilds from the metadata's ``codec``
    type_name = "image"
    media_kind = "image"
    Preprocessing = ImagePreprocessing

    def finalize_media(self, sample: Iterator[bytes]) -> dict:
        # Pillow is imported only when an image feature is used

        o = self.options
        height, width, channels = o.height, o.width, o.num_channels
        if height is None or channels is None:
            averaged = (height is None and o.infer_image_dimensions) or (channels is None and o.infer_image_num_channels)
            want = o.infer_image_sample_size if averaged else 1
            probes = self.probe_sample(sample, probe, want, "no readable image among the fit rows to infer "
                                       f"{'height/width' if height is None else 'num_channels'} from; set them in the "
                                       "config")
            if height is None:
                if o.infer_image_dimensions:
                    height = round(min(sum(p[0] for p in probes) / len(probes), o.infer_image_max_height))
                    width = round(min(sum(p[1] for p in probes) / len(probes), o.infer_image_max_width))
                else:
                    height, width = probes[0][0], probes[0][1]
            if channels is None:
                channels = (nearest_channels(sum(p[2] for p in probes) / len(probes)) if o.infer_image_num_channels
                            else nearest_channels(probes[0][2]))
        codec = ImageCodec(int(height), int(width), int(channels), o.resize_method, o.jpeg_draft)
        resolved = {"height": codec.height, "width": codec.width, "num_channels": codec.num_channels,
                    "resize_method": codec.resize_method}
        return {**resolved, "mode": self.mode, "codec": codec.to_json(), "preprocessing": resolved}
