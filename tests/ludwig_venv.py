"""Build (once) and find the Ludwig 0.11 virtualenv the Ludwig integration tests run Ludwig in.

Ludwig is not a prepflow dependency: it runs in its own virtualenv, as a subprocess, so its pins
(transformers, spacy, ...) never meet prepflow's. The venv lives in
``$XDG_CACHE_HOME/prepflow/ludwig-0.11`` (default ``~/.cache/prepflow/ludwig-0.11``, or
``$PREPFLOW_LUDWIG_VENV``) and is reused once its marker file exists.

torch is pinned to the CPU wheel prepflow itself uses (``tests/data/ludwig_venv_constraints.txt``,
passed to pip with ``-c``): any other torch spec makes pip fetch gigabytes of CUDA wheels. The same
file caps pandas, transformers and numpy below the major versions released after Ludwig 0.11, which
it was not written for.

PyPI's torchvision and torchaudio wheels for Linux x86-64 are CUDA builds: their compiled extensions need
``libc10_cuda.so``, which the CPU torch wheel does not have (the CPU builds are only on PyTorch's own
index, which cannot be reached here). Both libraries run without their extensions (the ops that need them
raise when called), except for two unguarded lines, so after pip the build

* removes torchaudio's extension files (``torchaudio/lib/*.so``): torchaudio then imports in its
  "not compiled with the extension" mode instead of failing on ``OSError: Could not load this library``;
* installs ``tests/data/ludwig_torchvision_shim.py`` with a ``.pth`` file: it declares the schemas of
  ``torchvision::nms``/``qnms`` when the extension did not load, so that ``import torchvision`` does not
  fail with ``RuntimeError: operator torchvision::nms does not exist``.

Ludwig imports both at start-up (image and audio features); the tests use neither. pip's output is kept in ``build.log`` in the venv folder, and a failure
raises ``LudwigVenvError`` with pip's last lines.

Run ``python tests/ludwig_venv.py`` to build it by hand; it prints the venv's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

LUDWIG_SPEC = "ludwig==0.11.*"
HERE = Path(__file__).resolve().parent
CONSTRAINTS = HERE / "data" / "ludwig_venv_constraints.txt"
SHIM = HERE / "data" / "ludwig_torchvision_shim.py"
MARKER = ".prepflow-ludwig-ok"


class LudwigVenvError(RuntimeError):
    """The Ludwig virtualenv could not be built; the message holds the failing command's output."""


def venv_dir() -> Path:
    explicit = os.environ.get("PREPFLOW_LUDWIG_VENV")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "prepflow" / "ludwig-0.11"


def ludwig_bin(venv: Path) -> Path:
    return venv / "bin" / "ludwig"


def _run(cmd: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise LudwigVenvError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}; see {log}:\n{tail}")


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _without_cuda_extensions(venv: Path) -> None:
    """torchaudio without its CUDA-built extension; torchvision importable without its own (module docstring)."""
    site = _site_packages(venv)
    for lib in (site / "torchaudio" / "lib").glob("*.so"):
        lib.unlink()
    shutil.copyfile(SHIM, site / "prepflow_torchvision_shim.py")
    (site / "prepflow_torchvision_shim.pth").write_text("import prepflow_torchvision_shim\n")


def ensure_venv() -> Path:
    """The Ludwig venv's folder, built first when it has no marker; raises LudwigVenvError."""
    venv = venv_dir()
    if (venv / MARKER).exists() and ludwig_bin(venv).exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    venv.mkdir(parents=True)
    log = venv / "build.log"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)], log)
    _run([str(venv / "bin" / "pip"), "install", "--progress-bar", "off", "-c", str(CONSTRAINTS), LUDWIG_SPEC], log)
    _without_cuda_extensions(venv)
    probe = [str(venv / "bin" / "python"), "-c", "import ludwig, ludwig.api; print(ludwig.__version__)"]
    _run(probe, log)
    (venv / MARKER).write_text(LUDWIG_SPEC + "\n")
    return venv


if __name__ == "__main__":
    try:
        print(ensure_venv())
    except LudwigVenvError as exc:
        sys.exit(f"ludwig venv: {exc}")
