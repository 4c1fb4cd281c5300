"""Audio with soundfile and numpy: bytes -> float32 ``T x F`` features (Ludwig's audio feature).

Reading: soundfile (WAV, FLAC, OGG, ...), channels averaged to mono (Ludwig keeps only the first
channel), resampled to the feature's ``sampling_rate`` with a polyphase filter
(``scipy.signal.resample_poly``) when the file's rate differs, or failed when ``resample`` is off.
An empty file or one with no samples fails (``zero-length audio``).

Features, as ``ludwig/utils/audio_utils.py`` computes them (window and shift in samples are
``int(seconds * sampling_rate)``, ``num_fft_points`` defaults to the window length):

* ``raw``: the samples, ``T x 1``; ``max_length = int(audio_file_length_limit_in_s * rate)``;
* ``stft``: ``|X|`` (``nfft // 2 + 1`` bins), ``stft_phase``: ``[angle(X), |X|]``, ``group_delay``:
  ``(Re X Re Y + Im X Im Y) / (|X|^2 + 1e-10)`` with ``Y`` the STFT under ``window * n``,
  ``fbank``: ``log(|X|^2 @ mel^T + 1e-10)`` over ``num_filter_bands`` triangular mel filters;
  ``X`` is the FFT of each frame of the pre-emphasized signal (``x[n] - 0.97 x[n-1]``) times a
  symmetric window (``window_type``); frames start every ``shift`` samples, the last one padded
  with zeros, ``ceil((N - window) / shift) + 1`` of them (at least one); ``fbank`` frames have
  their mean removed first. ``max_length`` is the frame count of ``audio_file_length_limit_in_s``.

Only the samples the first ``max_length`` frames need are used, so a long file costs no more than
the limit; ``norm: per_file`` standardizes each feature over those frames (Ludwig: over every
frame of the file; one frame gives zeros where Ludwig gives NaN). Rows are padded with
``padding_value`` to ``max_length``. ``decode`` also returns the file's length in frames (samples
for ``raw``) before the limit, for the length statistics.
"""

from __future__ import annotations

import functools
import io
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from storage.media_io import MediaError, store_file, typed_digest


def _soundfile():
    """soundfile (libsndfile through cffi, not free to import): loaded when audio is read or written, not by
    every process that imports the feature types."""
    import soundfile

    return soundfile


FEATURE_TYPES = ("raw", "stft", "stft_phase", "group_delay", "fbank")
WINDOWS = {"hamming": np.hamming, "hann": np.hanning, "hanning": np.hanning, "blackman": np.blackman,
           "bartlett": np.bartlett, "rectangular": np.ones, "boxcar": np.ones}
PRE_EMPHASIS = 0.97


def samples(seconds: float, rate: int) -> int:
    """Ludwig's ``get_length_in_samp``."""
    return int(rate * seconds)


def frame_count(n: int, window: int, shift: int) -> int:
    """``ceil((n - window) / shift) + 1`` frames, at least one."""
    return 1 if n <= window else 1 + -(-(n - window) // shift)


def feature_dim(feature_type: str, num_fft_points: int, num_filter_bands: int) -> int:
    bins = num_fft_points // 2 + 1
    return {"raw": 1, "stft": bins, "group_delay": bins, "stft_phase": 2 * bins, "fbank": num_filter_bands}[feature_type]


def hz_to_mel(hz):
    return 2595.0 * np.log10(1 + hz / 700.0)


def mel_to_hz(mel):
    return 700.0 * (10 ** (mel / 2595.0) - 1)


@functools.lru_cache(maxsize=16)
def mel_filterbank(num_filter_bands: int, num_fft_points: int, rate: int) -> np.ndarray:
    """``num_filter_bands x (nfft // 2 + 1)`` triangular filters, Ludwig's construction."""
    bins = num_fft_points // 2 + 1
    points = np.linspace(0, hz_to_mel(int(rate / 2)), num_filter_bands + 2)
    edges = np.floor((num_fft_points + 1) / rate * mel_to_hz(points))
    bank = np.zeros((num_filter_bands, bins), dtype=np.float64)
    freqs = np.arange(bins, dtype=np.float64)
    for i in range(num_filter_bands):
        start, mid, end = edges[i], edges[i + 1], edges[i + 2]
        rising = (freqs >= int(start)) & (freqs < int(mid))
        falling = (freqs >= int(mid)) & (freqs < int(end))
        bank[i, rising] = (freqs[rising] - start) / (mid - start)
        bank[i, falling] = (end - freqs[falling]) / (end - mid)
    return bank.astype(np.float32).astype(np.float64)  # Ludwig builds it in float32


def frames_of(x: np.ndarray, window: int, shift: int, zero_mean: bool) -> np.ndarray:
    """``T x window`` frames, the last one zero-padded; ``zero_mean`` removes each frame's mean
    over its real samples (padding stays zero)."""
    n = len(x)
    count = frame_count(n, window, shift)
    total = (count - 1) * shift + window
    padded = np.zeros(total, dtype=np.float64)
    padded[:n] = x
    frames = np.lib.stride_tricks.sliding_window_view(padded, window)[::shift][:count].copy()
    if zero_mean:
        starts = np.arange(count) * shift
        real = np.clip(n - starts, 1, window)
        frames -= (frames.sum(axis=1) / real)[:, None] * (np.arange(window)[None, :] < real[:, None])
    return frames


@dataclass(frozen=True)
class AudioCodec:
    feature_type: str
    sampling_rate: int
    window_length: int  # samples
    window_shift: int  # samples
    num_fft_points: int
    window_type: str
    num_filter_bands: int
    norm: str | None
    padding_value: float
    max_length: int
    resample: bool = True
    kind: str = "audio"

    @property
    def feature_dim(self) -> int:
        return feature_dim(self.feature_type, self.num_fft_points, self.num_filter_bands)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.max_length, self.feature_dim)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "AudioCodec":
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})

    def fill(self) -> np.ndarray:
        return np.full(self.shape, self.padding_value, dtype=np.float32)

    # ---- decoding --------------------------------------------------------------------------------
    def signal(self, data: bytes) -> np.ndarray:
        """Mono float64 samples at ``sampling_rate``."""
        x, rate = read_audio(data)
        if rate != self.sampling_rate:
            if not self.resample:
                raise MediaError(f"sampling rate {rate} Hz differs from the feature's {self.sampling_rate} Hz and "
                                 "resample is false")
            x = resample(x, rate, self.sampling_rate)
        return x

    def decode(self, data: bytes) -> tuple[np.ndarray, int]:
        x = self.signal(data)
        feats, length = self.features(x)
        out = self.fill()
        keep = min(len(feats), self.max_length)
        out[:keep] = feats[:keep]
        return out, length

    def features(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """``(T x F float64 features of the first max_length frames, the file's length in frames)``."""
        if self.feature_type == "raw":
            feats = x[:self.max_length, None]
            length = len(x)
        else:
            window, shift = self.window_length, self.window_shift
            length = frame_count(len(x), window, shift)
            x = x[:(self.max_length - 1) * shift + window]
            feats = self._spectral(x)
        if self.norm == "per_file":
            mean = feats.mean(axis=0)
            std = feats.std(axis=0, ddof=1) if len(feats) > 1 else np.zeros_like(mean)
            feats = (feats - mean) / (std + 1.0e-10)
        return feats, length

    def _spectral(self, x: np.ndarray) -> np.ndarray:
        emphasized = np.concatenate((x[:1], x[1:] - PRE_EMPHASIS * x[:-1]))
        fbank = self.feature_type == "fbank"
        frames = frames_of(emphasized, self.window_length, self.window_shift, zero_mean=fbank)
        window = WINDOWS[self.window_type](self.window_length)
        spec = np.fft.rfft(frames * window, n=self.num_fft_points)
        if self.feature_type == "stft":
            return np.abs(spec)
        if self.feature_type == "stft_phase":
            return np.concatenate((np.angle(spec), np.abs(spec)), axis=1)
        if self.feature_type == "group_delay":
            spec_n = np.fft.rfft(frames * (window * np.arange(self.window_length)), n=self.num_fft_points)
            numerator = spec.real * spec_n.real + spec.imag * spec_n.imag
            return numerator / (np.abs(spec) ** 2 + 1e-10)
        power = np.abs(spec) ** 2
        bank = mel_filterbank(self.num_filter_bands, self.num_fft_points, self.sampling_rate)
        return np.log(power @ bank.T + 1.0e-10)


def read_audio(data: bytes) -> tuple[np.ndarray, int]:
    """``(mono float64 samples, sampling rate)``; unreadable or empty audio is a ``MediaError``."""

    if not data:
        raise MediaError("empty file (0 bytes)")
    try:
        x, rate = _soundfile().read(io.BytesIO(data), dtype="float64", always_2d=True)
    except Exception as exc:  # libsndfile's errors on untrusted bytes are this value's failure
        raise MediaError(f"not readable audio ({type(exc).__name__}: {exc})") from None
    if x.shape[0] == 0:
        raise MediaError("zero-length audio (0 samples)")
    return x.mean(axis=1) if x.shape[1] > 1 else x[:, 0], int(rate)


def probe_rate(data: bytes) -> int:
    if not data:
        raise MediaError("empty file (0 bytes)")
    try:
        return int(_soundfile().info(io.BytesIO(data)).samplerate)
    except Exception as exc:
        raise MediaError(f"not readable audio ({type(exc).__name__}: {exc})") from None


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    from scipy.signal import resample_poly  # scipy (heavy): only when a file must be resampled

    g = math.gcd(rate_in, rate_out)
    return resample_poly(x, rate_out // g, rate_in // g)


# ---- in-memory values ----------------------------------------------------------------------------

SUBTYPES = {"float32": "FLOAT", "float64": "DOUBLE", "int16": "PCM_16", "int32": "PCM_32", "uint8": "PCM_U8"}


def as_frames(arr: np.ndarray) -> np.ndarray:
    """1-D samples, or 2-D frames x channels (channels x frames when the first axis is short)."""
    if arr.ndim == 1:
        return arr
    if arr.ndim == 2:
        if arr.shape[1] <= 8:
            return arr
        if arr.shape[0] <= 8:
            return arr.T
    raise ValueError(f"expected 1-D samples or a frames x channels array, got shape {arr.shape}")


def store_value(cache_dir: str, feature: str, value: Any, default_rate: int | None) -> str:
    """An in-memory audio value -> its ``media-cache:`` reference: encoded bytes as they are, arrays
    and ``{"array", "sampling_rate"}`` dicts as WAV at their own sample type (lossless)."""

    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            ext = "." + _soundfile().info(io.BytesIO(data)).format.lower()
        except Exception:  # not audio soundfile knows: kept as is, it fails when decoded
            ext = ".bin"
        name = typed_digest("bytes", data) + ext

        def write_bytes(path):
            path.write_bytes(data)

        return store_file(cache_dir, feature, name, write_bytes)
    rate = default_rate
    if isinstance(value, dict):
        rate = value.get("sampling_rate", rate)
        value = value["array"]
    if rate is None:
        raise ValueError("an audio array needs a sampling rate: pass {'array': ..., 'sampling_rate': ...} "
                         "or set the feature's sampling_rate")
    arr = as_frames(np.asarray(value))
    subtype = SUBTYPES.get(arr.dtype.name)
    if subtype is None:
        raise ValueError(f"audio samples of dtype {arr.dtype} are not supported; use float32/64 or int16/32")
    name = typed_digest("audio", arr.dtype.str, str(arr.shape), str(int(rate)), np.ascontiguousarray(arr).tobytes())

    def write_wav(path):
        _soundfile().write(str(path), arr, int(rate), subtype=subtype, format="WAV")

    return store_file(cache_dir, feature, name + ".wav", write_wav)
