"""Sampling noise of the drift statistics: what each one reaches without any drift, at the sizes compared.

Two samples of one distribution never have the same frequencies: a statistic measured on ``n1`` reference
and ``n2`` new values is positive by chance alone, and the more so the smaller the samples (89 validation
rows give the population stability index of ten bins about 0.12 on average, over the usual warn threshold
of 0.1). Each statistic's **noise** is its no-drift level: its expectation without drift plus ``Z`` of its
standard deviations, with ``s = 1/n1 + 1/n2``:

* PSI over ``k`` bins (the bins that either sample fills): ``n1 n2 / (n1 + n2) * PSI`` is about chi-square
  with ``k - 1`` degrees of freedom, so the noise is ``(k - 1) s + Z sqrt(2 (k - 1)) s``;
* L-infinity over ids: each id's frequency difference has the standard deviation ``sqrt(f (1 - f) s)``
  (``f``: the id's frequency in the two samples pooled); the noise is ``Z`` times the largest one;
* OOV rate and missing rate (differences of two proportions): ``Z sqrt(f (1 - f) s)``, ``f`` the rate in the
  two samples pooled.

A statistic is judged by how far it passes its noise (``judged``): ``warn`` when ``value - noise`` passes
the warn threshold, ``fail`` when it passes the fail one; the noise vanishes as the samples grow.
"""

from __future__ import annotations

import math

import numpy as np

Z = 2.0  # standard deviations of the no-drift distribution that sampling alone may reach


def _scale(n1: float, n2: float) -> float | None:
    return 1.0 / n1 + 1.0 / n2 if n1 > 0 and n2 > 0 else None


def psi(reference_counts, new_counts) -> float:
    """PSI's noise: ``(k - 1) s + Z sqrt(2 (k - 1)) s`` over the ``k`` bins that either sample fills."""
    ref = np.asarray(reference_counts, dtype=np.float64)
    new = np.asarray(new_counts, dtype=np.float64)
    n = min(len(ref), len(new))
    scale = _scale(ref.sum(), new.sum())
    dof = int(np.count_nonzero((ref[:n] + new[:n]) > 0)) - 1
    if scale is None or dof < 1:
        return 0.0
    return float(dof * scale + Z * math.sqrt(2.0 * dof) * scale)


def proportion(count1: float, n1: float, count2: float, n2: float) -> float:
    """The noise of a difference of two proportions (``count1 / n1`` and ``count2 / n2``)."""
    scale = _scale(n1, n2)
    if scale is None:
        return 0.0
    f = (count1 + count2) / (n1 + n2)
    return float(Z * math.sqrt(max(f * (1.0 - f), 0.0) * scale))


def linf(reference_counts, new_counts, skip: int | None = None) -> float:
    """L-infinity's noise: ``Z`` times the largest standard deviation of one id's frequency difference (the
    reference's kept ids and its pooled rest; ``skip``: the ``<UNK>`` id, which the OOV rate judges)."""
    ref = np.asarray(reference_counts, dtype=np.float64)
    new = np.asarray(new_counts, dtype=np.float64)
    top = len(ref) - 1
    new = np.append(np.pad(new[:top], (0, max(top - len(new[:top]), 0))), new[top:].sum())
    scale = _scale(ref.sum(), new.sum())
    if scale is None:
        return 0.0
    pooled = (ref + new) / (ref.sum() + new.sum())
    if skip is not None and skip < top:
        pooled[skip] = 0.0
    return float(Z * math.sqrt(float(np.max(pooled * (1.0 - pooled))) * scale))


def oov(reference_counts, unk: int | None, new_counts) -> float:
    """The OOV rate's noise (the share of the ``<UNK>`` id in each sample)."""
    ref = np.asarray(reference_counts, dtype=np.float64)
    new = np.asarray(new_counts, dtype=np.float64)
    if unk is None or unk >= len(ref) - 1:
        return 0.0
    return proportion(ref[unk], ref.sum(), new[unk] if unk < len(new) else 0.0, new.sum())


def judged(value: float, noise: float) -> float:
    """What a threshold is compared with: how far ``value`` passes its noise."""
    return value - noise
