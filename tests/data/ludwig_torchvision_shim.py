"""Installed into the Ludwig test virtualenv only (tests/ludwig_venv.py), with a .pth file that imports it.

PyPI's torchvision 0.28.0 for Linux x86-64 is a CUDA build: its ``_C.so`` needs ``libc10_cuda.so``, which the
CPU torch wheel pinned there does not have, so the extension does not load (torchvision allows that: its ops
then raise when called). But ``torchvision/_meta_registrations.py`` registers fake kernels for
``torchvision::nms`` and ``torchvision::qnms`` without checking, and ``import torchvision`` (which Ludwig does
at start-up, for image features) fails with ``RuntimeError: operator torchvision::nms does not exist``.

This declares those two operators' schemas (as torchvision's C++ declares them) just before that module runs,
only when the extension did not load. Calling them still fails; no test uses image features or detection ops.
"""

import importlib.abc
import sys


class _DeclareMissingOps(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision._meta_registrations":
            sys.meta_path.remove(self)
            import torch
            import torchvision.extension

            if not torchvision.extension._has_ops():
                for op in ("nms", "qnms"):
                    torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        return None


sys.meta_path.insert(0, _DeclareMissingOps())
