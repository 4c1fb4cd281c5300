"""Build (once) and find the Ludwig virtualenvs (0.11 and 0.17) the Ludwig integration tests run Ludwig in.

Ludwig is not a prepflow dependency: it runs in its own virtualenv, as a subprocess, so its pins
(transformers, spacy, ...) never meet prepflow's. Each version's venv lives in
``$XDG_CACHE_HOME/prepflow/ludwig-<version>`` (default ``~/.cache/prepflow/ludwig-0.11`` and
``~/.cache/prepflow/ludwig-0.17``; ``$PREPFLOW_LUDWIG_VENV_0_11`` / ``$PREPFLOW_LUDWIG_VENV_0_17`` name
another folder, and ``$PREPFLOW_LUDWIG_VENV`` still names the 0.11 one) and is reused once its marker file
exists; a lock file beside it makes a second test run wait for the build instead of building into the
same folder.

Ludwig 0.11 runs on Python 3.11 (the interpreter running the tests). torch is pinned to the CPU wheel
prepflow itself uses (``tests/data/ludwig_venv_constraints.txt``, passed to pip with ``-c``): any other
torch spec makes pip fetch gigabytes of CUDA wheels. The same file caps pandas, transformers and numpy
below the major versions released after Ludwig 0.11, which it was not written for.

Ludwig 0.17 requires Python >= 3.12 (its ``Requires-Python``); the build looks for ``python3.12`` on
``PATH``, then in pyenv's versions (``$PREPFLOW_PYTHON312`` names one). Its pins are in
``tests/data/ludwig_venv_constraints_0.17.txt``: ``torch==2.13.0`` as prepflow's, but the CPU wheel on this
machine is built for Python 3.11 only (``cp311``) and PyTorch's CPU index cannot be reached, so on 3.12 the
pin resolves to PyPI's ``torch-2.13.0-cp312`` wheel, a CUDA 13 build, with its ``nvidia-*`` libraries and
triton: about 2.7 GB of wheels (torch 527 MB, the rest cuDNN, cuBLAS, NCCL, ...), a 5.9 GB venv (0.11's:
2.4 GB), built in 13 minutes here at load 9, once per machine. That build runs on the CPU (no GPU is
needed to import it; ``CUDA_VISIBLE_DEVICES`` is empty in the tests) and nothing else changes: the other
dependencies are the versions pip resolves for Ludwig 0.17.10 (pandas 3.1, numpy 2.5, transformers 5.24,
torchvision 0.28, torchaudio 2.11, spacy 3.8). The smaller way, Ludwig 0.17 on Python 3.11 with
``--ignore-requires-python`` and the CPU torch (its sources compile on 3.11), is not taken: it would not be
the Python Ludwig 0.17 supports.

PyPI's torchvision and torchaudio wheels for Linux x86-64 are CUDA builds. Against the CPU torch of the
0.11 venv their compiled extensions need ``libc10_cuda.so``, which it does not have (the CPU builds are
only on PyTorch's own index, which cannot be reached here). Both libraries run without their extensions
(the ops that need them raise when called), except for two unguarded lines, so after pip the build

* removes torchaudio's extension files (``torchaudio/lib/*.so``): torchaudio then imports in its
  "not compiled with the extension" mode instead of failing on ``OSError: Could not load this library``;
* installs ``tests/data/ludwig_torchvision_shim.py`` with a ``.pth`` file: it declares the schemas of
  ``torchvision::nms``/``qnms`` when the extension did not load, so that ``import torchvision`` does not
  fail with ``RuntimeError: operator torchvision::nms does not exist``.

The 0.17 venv, with the CUDA torch, loads them as they are and gets neither step. Ludwig imports both
at start-up (image and audio features); the tests use neither. pip's output is kept in ``build.log`` in
the venv folder, and a failure raises ``LudwigVenvError`` with pip's last lines.

Run ``python tests/ludwig_venv.py [0.11|0.17]`` to build one by hand; it prints the venv's path.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIM = HERE / "data" / "ludwig_torchvision_shim.py"
MARKER = ".prepflow-ludwig-ok"


@dataclass(frozen=True)
class LudwigVersion:
    spec: str  # pip requirement
    python: str  # "3.11": the interpreter running the tests; other: found by find_python
    constraints: Path
    cpu_torch: bool  # torch is the CPU wheel: torchvision/torchaudio need the steps of the module docstring


VERSIONS = {
    "0.11": LudwigVersion("ludwig==0.11.*", "3.11", HERE / "data" / "ludwig_venv_constraints.txt", True),
    "0.17": LudwigVersion("ludwig==0.17.*", "3.12", HERE / "data" / "ludwig_venv_constraints_0.17.txt", False),
}
# Kept for callers that predate the 0.17 venv.
LUDWIG_SPEC = VERSIONS["0.11"].spec
CONSTRAINTS = VERSIONS["0.11"].constraints


class LudwigVenvError(RuntimeError):
    """The Ludwig virtualenv could not be built; the message holds the failing command's output."""


def _version(version: str) -> LudwigVersion:
    if version not in VERSIONS:
        raise LudwigVenvError(f"no Ludwig venv recipe for version {version!r} (expected one of {sorted(VERSIONS)})")
    return VERSIONS[version]


def venv_dir(version: str = "0.11") -> Path:
    _version(version)
    explicit = os.environ.get("PREPFLOW_LUDWIG_VENV_" + version.replace(".", "_"))
    if not explicit and version == "0.11":
        explicit = os.environ.get("PREPFLOW_LUDWIG_VENV")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "prepflow" / f"ludwig-{version}"


def ludwig_bin(venv: Path) -> Path:
    return venv / "bin" / "ludwig"


def _python_version(executable: str) -> str | None:
    try:
        proc = subprocess.run([executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_python(minor: str) -> str:
    """An interpreter of Python ``minor`` ("3.12"): ``$PREPFLOW_PYTHON312``, ``python3.12`` on PATH (a pyenv
    shim that is not active fails its probe and is skipped), then pyenv's installed versions."""
    if minor == "3.11":
        return getattr(sys, "_base_executable", sys.executable)
    candidates = [os.environ.get("PREPFLOW_PYTHON" + minor.replace(".", ""), ""), shutil.which(f"python{minor}") or ""]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{minor}.*/bin/python{minor}"), reverse=True)
    candidates += [f"/usr/bin/python{minor}", f"/usr/local/bin/python{minor}"]
    for candidate in filter(None, candidates):
        if _python_version(candidate) == minor:
            return candidate
    raise LudwigVenvError(f"no Python {minor} interpreter found (tried {', '.join(filter(None, candidates))}); "
                          f"set PREPFLOW_PYTHON{minor.replace('.', '')}")


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


def ensure_venv(version: str = "0.11") -> Path:
    """The Ludwig ``version`` venv's folder, built first when it has no marker; raises LudwigVenvError."""
    recipe = _version(version)
    venv = venv_dir(version)
    if (venv / MARKER).exists() and ludwig_bin(venv).exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    # one builder at a time per venv (two test runs on one machine would pip into one folder)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / MARKER).exists() and ludwig_bin(venv).exists():
            return venv  # built by the run that held the lock
        return _build(recipe, venv)


def _build(recipe: LudwigVersion, venv: Path) -> Path:
    python = find_python(recipe.python)
    if venv.exists():
        shutil.rmtree(venv)
    venv.mkdir(parents=True)
    log = venv / "build.log"
    _run([python, "-m", "venv", str(venv)], log)
    _run([str(venv / "bin" / "pip"), "install", "--progress-bar", "off", "-c", str(recipe.constraints), recipe.spec],
         log)
    if recipe.cpu_torch:
        _without_cuda_extensions(venv)
    probe = [str(venv / "bin" / "python"), "-c", "import ludwig, ludwig.api; print(ludwig.__version__)"]
    _run(probe, log)
    (venv / MARKER).write_text(recipe.spec + "\n")
    return venv


if __name__ == "__main__":
    try:
        print(ensure_venv(*sys.argv[1:2]))
    except LudwigVenvError as exc:
        sys.exit(f"ludwig venv: {exc}")
