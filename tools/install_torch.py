"""Install the pinned torch into the environment that runs this script, the build that suits
the machine: what `make` runs before the rest of requirements.txt.

    python tools/install_torch.py                 # TORCH=auto: CUDA where nvidia-smi is, else CPU
    python tools/install_torch.py --torch cpu     # force the CPU build
    python tools/install_torch.py --torch cuda    # force PyPI's build (CUDA on Linux)

On Linux, PyPI's torch is the CUDA build, which brings NVIDIA's libraries (2.7 GB of wheels)
whether or not the machine has a GPU. The CPU build (192 MB) comes from PyTorch's own index,
https://download.pytorch.org/whl/cpu, and satisfies the same pin (2.13.0+cpu is 2.13.0).
Where that index cannot be reached (a machine that sees only the package registries), torch
comes from pip's configured index instead, with one line saying so; the probe gives up after
`PROBE_S` seconds. On macOS PyPI's torch has no CUDA libraries, so it is taken from there.
Standard library only: it runs before anything is installed.
"""
from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_S = 5.0
ROOT = Path(__file__).resolve().parents[1]


def pinned_torch(requirements: Path = ROOT / "requirements.txt") -> str:
    """The ``torch==...`` line of requirements.txt."""
    for line in requirements.read_text().splitlines():
        if re.match(r"^torch==", line.strip()):
            return line.strip()
    raise SystemExit(f"install_torch: no torch== pin in {requirements}")


def choose(asked: str, *, has_nvidia: bool, system: str) -> tuple[str, str]:
    """(build, why): ``cpu`` or ``pypi``, for ``asked`` (auto, cpu, cuda)."""
    if asked == "cuda":
        return "pypi", "TORCH=cuda: PyPI's build (CUDA on Linux)"
    if system == "Darwin":
        return "pypi", "macOS: PyPI's build, which has no CUDA libraries"
    if asked == "cpu":
        return "cpu", "TORCH=cpu: the CPU build"
    if has_nvidia:
        return "pypi", "TORCH=auto: an NVIDIA GPU (nvidia-smi found): PyPI's CUDA build"
    return "cpu", "TORCH=auto: no NVIDIA GPU (nvidia-smi not found): the CPU build"


def reachable(url: str, timeout: float = PROBE_S) -> tuple[bool, str]:
    """Whether ``url`` answers within ``timeout`` seconds, and why not."""
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
        return True, ""
    except Exception as err:                     # DNS, refused, timeout, TLS: all mean "not here"
        return False, f"{type(err).__name__}: {getattr(err, 'reason', err)}"


def pip(*args: str) -> int:
    return subprocess.call([sys.executable, "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", *args])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="auto", choices=("auto", "cpu", "cuda"),
                        help="which build: auto (CUDA where nvidia-smi is), cpu, cuda")
    args = parser.parse_args(argv)
    pin = pinned_torch()
    build, why = choose(args.torch, has_nvidia=shutil.which("nvidia-smi") is not None,
                        system=platform.system())
    if build == "cpu":
        start = time.perf_counter()
        ok, reason = reachable(f"{CPU_INDEX}/torch/")
        if not ok:
            print(f"install_torch: {why}, but {CPU_INDEX} cannot be reached ({reason}, "
                  f"{time.perf_counter() - start:.1f} s): torch comes from pip's configured index")
            return pip(pin)
        print(f"install_torch: {why}, from {CPU_INDEX}")
        status = pip("--upgrade", "--extra-index-url", CPU_INDEX, pin)
        if status:
            return status
        cuda = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                              capture_output=True, text=True).stdout.strip()
        if cuda:
            print(f"install_torch: pip installed a CUDA build (CUDA {cuda}) although the CPU one was asked "
                  f"for; was {CPU_INDEX} reachable? (see pip's warnings above)", file=sys.stderr)
            return 1
        return 0
    print(f"install_torch: {why}")
    return pip(pin)


if __name__ == "__main__":
    sys.exit(main())
