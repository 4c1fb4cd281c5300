"""Audio features against a direct numpy computation of Ludwig's formulas (frame by frame, full FFT,
explicit mel filters), on generated tones written as WAV and FLAC by soundfile."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import soundfile as sf

from storage.media import MediaError
from storage.media_audio import AudioCodec, read_audio
from tasks.config.loader import parse_config
from tasks.features import build_all

RATE = 8000


def tone(freqs=(440.0, 1250.0), seconds=0.37, rate=RATE, channels=1, seed=0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = sum(0.3 * np.sin(2 * np.pi * f * t) for f in freqs)
    x = x + 0.01 * np.random.default_rng(seed).standard_normal(len(t))
    return np.stack([x] * channels, axis=1) if channels > 1 else x


def encoded(x: np.ndarray, rate=RATE, fmt="WAV", subtype="PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def codec(**preprocessing) -> AudioCodec:
    config = parse_config({"input_features": [{"name": "a", "type": "audio", "preprocessing": preprocessing}]})
    feature = build_all(config)[0]
    return feature.codec_for(preprocessing.get("sampling_rate", RATE))


# ---- the reference: Ludwig's audio_utils, written out loop by loop -----------------------------------

def ref_frames(data, window, shift, zero_mean):
    n = len(data)
    count = max(1, int(math.ceil((n - window) / float(shift) + 1)))
    out = np.zeros((count, window))
    for i in range(count):
        start = shift * i
        last = i == count - 1
        end = start + window if not last else n
        chunk = data[start:end]
        if zero_mean:
            chunk = chunk - np.mean(chunk)
        out[i, :len(chunk)] = chunk
    return out


def ref_stft(x, window, shift, nfft, weights, zero_mean=False, ramp=False):
    emphasized = np.array([x[0]] + [x[i] - 0.97 * x[i - 1] for i in range(1, len(x))])
    frames = ref_frames(emphasized, window, shift, zero_mean)
    w = np.hamming(window) if weights == "hamming" else np.hanning(window)
    if ramp:
        w = w * np.arange(window)
    spectra = [np.fft.fft(frame * w, n=nfft)[:nfft // 2 + 1] for frame in frames]
    return np.array(spectra)


def ref_mel(bands, nfft, rate):
    upper = 2595.0 * np.log10(1 + int(rate / 2) / 700.0)
    mel = np.linspace(0, upper, bands + 2)
    bins = np.floor((nfft + 1) / rate * (700.0 * (10 ** (mel / 2595.0) - 1)))
    bank = np.zeros((bands, nfft // 2 + 1), dtype=np.float32)
    for i in range(bands):
        a, b, c = bins[i], bins[i + 1], bins[i + 2]
        for f in range(int(a), int(b)):
            bank[i, f] = (f - a) / (b - a)
        for f in range(int(b), int(c)):
            bank[i, f] = (c - f) / (c - b)
    return bank


def ref_features(x, kind, window, shift, nfft, bands=80, weights="hamming"):
    if kind == "fbank":
        power = np.abs(ref_stft(x, window, shift, nfft, weights, zero_mean=True)) ** 2
        return np.log(power @ ref_mel(bands, nfft, RATE).T.astype(np.float64) + 1e-10)
    spec = ref_stft(x, window, shift, nfft, weights)
    if kind == "stft":
        return np.abs(spec)
    if kind == "stft_phase":
        return np.concatenate([np.angle(spec), np.abs(spec)], axis=1)
    ramped = ref_stft(x, window, shift, nfft, weights, ramp=True)
    return (spec.real * ramped.real + spec.imag * ramped.imag) / (np.abs(spec) ** 2 + 1e-10)


@pytest.mark.parametrize("kind", ["stft", "stft_phase", "group_delay", "fbank"])
def test_spectral_features_match_a_direct_numpy_computation(kind):
    x = tone()
    data = encoded(x, subtype="FLOAT")
    c = codec(type=kind, audio_file_length_limit_in_s=1.0, num_filter_bands=24)
    out, length = c.decode(data)
    window, shift = int(0.04 * RATE), int(0.02 * RATE)  # 320 and 160 samples
    expected = ref_features(read_audio(data)[0], kind, window, shift, window, bands=24)
    assert length == len(expected) == math.ceil((len(x) - window) / shift) + 1
    assert out.shape == (c.max_length, c.feature_dim) == (math.ceil((RATE - window) / shift) + 1, expected.shape[1])
    got = out[:length].astype(np.float64)
    if kind == "stft_phase":  # a real bin's phase is +pi or -pi depending on the sign of a zero imaginary part
        half = expected.shape[1] // 2
        wrapped = np.angle(np.exp(1j * (got[:, :half] - expected[:, :half])))
        assert np.abs(wrapped).max() < 2e-5
        got, expected = got[:, half:], expected[:, half:]
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=2e-5, atol=2e-5)
    assert (out[length:] == 0).all()  # padding_value


def test_fbank_defaults_are_ludwigs_and_num_fft_points_widens_the_spectrum():
    c = codec()
    assert (c.feature_type, c.window_length, c.window_shift, c.window_type, c.num_filter_bands) == \
        ("fbank", 320, 160, "hamming", 80)
    assert c.max_length == math.ceil((7.5 * RATE - 320) / 160) + 1 and c.feature_dim == 80
    wide = codec(type="stft", num_fft_points=512, window_type="hann", audio_file_length_limit_in_s=1.0)
    out, length = wide.decode(encoded(tone(), subtype="FLOAT"))
    expected = ref_features(read_audio(encoded(tone(), subtype="FLOAT"))[0], "stft", 320, 160, 512, weights="hann")
    assert out.shape[1] == 257
    np.testing.assert_allclose(out[:length], expected.astype(np.float32), rtol=2e-5, atol=2e-5)


def test_long_files_are_cut_at_the_limit_without_changing_the_kept_frames():
    x = tone(seconds=2.0)
    c = codec(type="stft", audio_file_length_limit_in_s=0.5)
    out, length = c.decode(encoded(x, subtype="FLOAT"))
    full = ref_features(read_audio(encoded(x, subtype="FLOAT"))[0], "stft", 320, 160, 320)
    assert length == len(full) > c.max_length
    np.testing.assert_allclose(out, full[:c.max_length].astype(np.float32), rtol=2e-5, atol=2e-5)


def test_raw_and_per_file_norm():
    x = tone(seconds=0.25)
    data = encoded(x, subtype="FLOAT")
    c = codec(type="raw", audio_file_length_limit_in_s=0.5, norm="per_file")
    out, length = c.decode(data)
    samples = read_audio(data)[0]
    assert length == len(samples) and out.shape == (4000, 1)
    expected = (samples - samples.mean()) / (samples.std(ddof=1) + 1e-10)
    np.testing.assert_allclose(out[:length, 0], expected.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert (out[length:] == 0).all()


def test_wav_and_flac_of_the_same_tone_give_the_same_features_and_stereo_is_averaged():
    x = tone()
    pcm = np.round(x * 32767).astype(np.int16)  # the same 16-bit samples in both containers
    c = codec(audio_file_length_limit_in_s=1.0)
    wav, _ = c.decode(encoded(pcm, fmt="WAV", subtype="PCM_16"))
    flac, _ = c.decode(encoded(pcm, fmt="FLAC", subtype="PCM_16"))
    assert np.array_equal(wav, flac) and not np.array_equal(wav, c.fill())
    stereo = np.stack([x, 0.5 * x], axis=1)
    mono, _ = read_audio(encoded(stereo, subtype="FLOAT"))
    np.testing.assert_allclose(mono, 0.75 * x, atol=1e-6)


def test_a_file_at_another_rate_is_resampled_or_fails_when_resampling_is_off():
    x = tone(freqs=(500.0,), seconds=0.5, rate=16000)
    data = encoded(x, rate=16000, subtype="FLOAT")
    c = codec(type="raw", audio_file_length_limit_in_s=1.0)
    out, length = c.decode(data)
    assert length == 4000  # 0.5 s at 8 kHz
    spectrum = np.abs(np.fft.rfft(out[:length, 0]))
    assert abs(np.argmax(spectrum) * RATE / length - 500.0) < 4.0  # the tone stays at 500 Hz
    with pytest.raises(MediaError, match="sampling rate 16000 Hz differs from the feature's 8000 Hz and resample is false"):
        codec(type="raw", resample=False).decode(data)


def test_unreadable_and_zero_length_audio_fail():
    c = codec()
    with pytest.raises(MediaError, match="empty file"):
        c.decode(b"")
    with pytest.raises(MediaError, match="zero-length audio"):
        c.decode(encoded(np.zeros(0)))
    with pytest.raises(MediaError, match="not readable audio"):
        c.decode(encoded(tone())[:30])  # a truncated header
    with pytest.raises(MediaError, match="not readable audio"):
        c.decode(b"definitely not a wav file")


def test_bad_options_are_config_errors():
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="num_fft_points"):
        codec(type="stft", num_fft_points=64)
    with pytest.raises(ConfigError, match="'type' parameter of audio feature 'a' must be one of"):
        codec(type="mfcc")


def test_the_sampling_rate_is_the_first_readable_file_of_the_fit_rows():
    from core.errors import DataError

    config = parse_config({"input_features": [{"name": "a", "type": "audio", "preprocessing": {"type": "raw"}}]})
    feature = build_all(config)[0]
    sample = [b"not audio", encoded(tone(rate=16000), rate=16000), encoded(tone())]
    meta = feature.finalize_media(iter(sample))
    assert meta["sampling_rate_in_hz"] == 16000 and meta["preprocessing"]["sampling_rate"] == 16000
    with pytest.raises(DataError, match=r"audio feature 'a': no readable audio file among the fit rows to take the "
                                        r"sampling rate from; set sampling_rate"):
        feature.finalize_media(iter([b"not audio", b""]))
    fixed = build_all(parse_config({"input_features": [
        {"name": "a", "type": "audio", "preprocessing": {"type": "raw", "sampling_rate": 8000}}]}))[0]
    assert fixed.finalize_media(iter(()))["sampling_rate_in_hz"] == 8000
