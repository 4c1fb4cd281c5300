"""audio: features float32 ``n x T x F`` (eager), or a slot into the split's media table (lazy modes).

Options (Ludwig's names and defaults; computed by ``storage.media_audio``): ``type`` raw | stft |
stft_phase | group_delay | fbank (default fbank), ``window_length_in_s`` 0.04, ``window_shift_in_s``
0.02, ``num_fft_points`` (default: the window length in samples), ``window_type`` hamming,
``num_filter_bands`` 80, ``audio_file_length_limit_in_s`` 7.5, ``norm`` per_file | none (default
none), ``padding_value`` 0. prepflow adds ``sampling_rate`` (default: the first readable file of the
fit rows, as Ludwig) and ``resample`` (default true: a file at another rate is resampled; false:
it fails as a decode error naming the rates).

Metadata (Ludwig's keys): ``feature_dim``, ``sampling_rate_in_hz``, ``max_length`` (frames; samples
for raw), ``reshape`` = [max_length, feature_dim], plus ``mode`` and ``codec``.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import Field

from core.errors import ConfigError
from storage.media_audio import AudioCodec, frame_count, probe_rate, samples
from tasks.features.media import MediaFeature, MediaPreprocessing


class AudioPreprocessing(MediaPreprocessing):
    type: Literal["raw", "stft", "stft_phase", "group_delay", "fbank"] = "fbank"
    audio_file_length_limit_in_s: float = Field(default=7.5, gt=0)
    window_length_in_s: float = Field(default=0.04, gt=0)
    window_shift_in_s: float = Field(default=0.02, gt=0)
    num_fft_points: int | None = Field(default=None, gt=0)
    window_type: Literal["hamming", "hann", "hanning", "blackman", "bartlett", "rectangular", "boxcar"] = "hamming"
    num_filter_bands: int = Field(default=80, gt=0)
    norm: Literal["per_file", "none"] | None = None
    padding_value: float = 0.0
    sampling_rate: int | None = Field(default=None, gt=0)
    resample: bool = True
    audio_feature: Any = None  # Ludwig < 0.5 nested these options under audio_feature; not supported


class AudioFeature(MediaFeature):
    codec_type = AudioCodec  # what ``codec(metadata)`` rebuilds from the metadata's ``codec``
    type_name = "audio"
    media_kind = "audio"
    Preprocessing = AudioPreprocessing

    def finalize_media(self, sample: Iterator[bytes]) -> dict:
        o = self.options
        if o.audio_feature is not None:
            raise ConfigError(f"{self.describe()}: preprocessing.audio_feature (Ludwig < 0.5) is not supported; put "
                              "its keys (type, window_length_in_s, ...) directly under preprocessing")
        rate = o.sampling_rate
        if rate is None:
            rate = self.probe_sample(sample, probe_rate, 1, "no readable audio file among the fit rows to take the "
                                     "sampling rate from; set sampling_rate")[0]
        codec = self.codec_for(rate)
        return {"feature_dim": codec.feature_dim, "sampling_rate_in_hz": rate, "max_length": codec.max_length,
                "reshape": [codec.max_length, codec.feature_dim], "mode": self.mode, "codec": codec.to_json(),
                "preprocessing": {"sampling_rate": rate, "num_fft_points": codec.num_fft_points}}

    def codec_for(self, rate: int) -> AudioCodec:
        o = self.options
        window, shift = samples(o.window_length_in_s, rate), samples(o.window_shift_in_s, rate)
        limit = samples(o.audio_file_length_limit_in_s, rate)
        if o.type != "raw" and (window < 1 or shift < 1):
            raise ConfigError(f"{self.describe()}: window_length_in_s and window_shift_in_s must each be at least one "
                              f"sample at {rate} Hz (got {window} and {shift} samples)")
        nfft = o.num_fft_points or max(window, 1)
        if o.type != "raw" and nfft < window:
            raise ConfigError(f"{self.describe()}: num_fft_points ({nfft}) must be at least the window length in "
                              f"samples ({window} at {rate} Hz)")
        max_length = limit if o.type == "raw" else frame_count(limit, window, shift)
        if max_length < 1:
            raise ConfigError(f"{self.describe()}: audio_file_length_limit_in_s is shorter than one sample at {rate} Hz")
        norm = None if o.norm in (None, "none") else o.norm
        return AudioCodec(o.type, int(rate), window, shift, nfft, o.window_type, o.num_filter_bands, norm,
                          float(o.padding_value), int(max_length), o.resample)
