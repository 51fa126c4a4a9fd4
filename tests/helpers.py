"""What several test modules share: tolerances, attention inputs and a float64 reference,
the book's pages, and ETT-format files. Fixtures live in conftest.py; these are plain
functions, imported by name (``from helpers import qkv, tol``)."""
from __future__ import annotations

import hashlib
import numbers
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import yaml

from tools.book.build_book import executed_config

ROOT = Path(__file__).resolve().parents[1]


def policy_error(value, *, integer: bool = False) -> type:
    """The exception the package's policy (labsupport/__init__.py, ERRORS) names for ``value``,
    refused where a number belongs (an int, with ``integer``): ``TypeError`` when its type is
    wrong (a bool, a str, None, a float where an int belongs), else ``ValueError`` (the right
    type out of range: 0, -1, NaN, inf)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return TypeError
    if integer and not isinstance(value, numbers.Integral):
        return TypeError
    return ValueError


def tol(dtype) -> dict:
    """``assert_close`` tolerances by dtype (float32 about 1e-5, half precision 1e-3)."""
    return {torch.float64: dict(atol=1e-10, rtol=1e-10),
            torch.float32: dict(atol=1e-5, rtol=1.3e-6),
            torch.float16: dict(atol=1e-3, rtol=1e-3),
            torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}[dtype]


def qkv(L: int, S: int | None = None, *, D: int = 8, Dv: int = 6, B: int = 2, H: int = 3,
        dtype=torch.float32, seed: int = 0, grad: bool = False):
    """Seeded attention inputs q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv) (S defaults
    to L), from their own generator (the global one is left alone); ``grad`` makes them
    leaves that require gradients."""
    S = L if S is None else S
    g = torch.Generator().manual_seed(seed * 7919 + L * 100 + S)
    out = (torch.randn(B, H, L, D, generator=g, dtype=dtype),
           torch.randn(B, H, S, D, generator=g, dtype=dtype),
           torch.randn(B, H, S, Dv, generator=g, dtype=dtype))
    return tuple(t.requires_grad_() for t in out) if grad else out


def reference(q, k, v, allowed=None):
    """float64 softmax attention written with einsum, independent of the kernels under test;
    ``allowed``: a bool mask, True = may attend."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...ld,...sd->...ls", q, k) / q.shape[-1] ** 0.5     # (..., L, S)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("...ls,...sd->...ld", scores.softmax(-1), v)          # (..., L, Dv)


def seeded(build, seed: int = 0):
    """``build()`` with torch's random state set to ``seed`` and then restored: a module with
    random weights built at import time (a test table's entry) is then the same whatever was
    imported or run before it."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build()


def toc_files() -> list[str]:
    """The book's pages in _toc.yml order, as paths without suffix ("intro", "chapters/12_1_...")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for entry in toc.get("chapters", []):
        files.append(entry["file"])
        files.extend(section["file"] for section in entry.get("sections", []))
    return files


# --- the HTML book -----------------------------------------------------------------------------

BROWSER_ASSETS = "browser-test"  # under _static/ of a test build only (the theme owns _static/vendor)


def local_assets_config(config: dict) -> dict:
    """``config`` (a _config.yml) with execution off and MathJax and the widget JavaScript
    pointed at local copies under ``_static/browser-test/``, which tests/test_browser.py
    copies into its build (tools/ci/fetch_web_assets.py); the build itself needs none of them."""
    sphinx_config = executed_config(config)["sphinx"].setdefault("config", {})
    # Relative paths are relative to _static/ (Sphinx's mathjax_path and add_js_file).
    sphinx_config["mathjax_path"] = f"{BROWSER_ASSETS}/mathjax/es5/tex-mml-chtml.js"
    sphinx_config["nb_ipywidgets_js"] = {  # order matters: require.js first, as in myst-nb's default
        f"{BROWSER_ASSETS}/requirejs/require.js": {},
        f"{BROWSER_ASSETS}/html-manager/dist/embed-amd.js": {},
    }
    return config


def build_book(source: Path, out: Path, *options: str) -> Path:
    """Build the book in ``source`` into ``out`` from its committed outputs, with
    `local_assets_config`; return the HTML folder. ``options``: e.g. "-W", "-n"."""
    config = local_assets_config(yaml.safe_load((source / "_config.yml").read_text()))
    config_path = out / "_config.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))  # keeps require.js first
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jb), "build", str(source), "--config", str(config_path), "--path-output", str(out),
         "--all", *options], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return out / "_build" / "html"


# --- ETT-small files, generated offline -----------------------------------------------------

ETT_HEADER = "date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT"
ETT_EXTRA = 5                                # rows after month 20, which the split leaves unused


@lru_cache(maxsize=None)
def ett_bytes(name: str) -> bytes:
    """A file like ETT-small/{name}.csv: 20 months of 30 days plus ETT_EXTRA rows from 2016-07-01."""
    step = 15 if name.startswith("ETTm") else 60
    rows = 20 * 30 * 24 * 60 // step + ETT_EXTRA
    stamps = np.datetime64("2016-07-01T00:00") + np.arange(rows) * np.timedelta64(step, "m")
    lines = [ETT_HEADER]
    for i, t in enumerate(stamps.astype(str)):
        values = ",".join(f"{j + i / 1000:.3f}" for j in range(7))   # a trend: train mean != full mean
        lines.append(f"{t.replace('T', ' ')}:00,{values}")
    return ("\n".join(lines) + "\n").encode()


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def write_ett(root, name: str = "ETTh1", content: bytes | None = None) -> bytes:
    """Write ``root/{name}.csv`` (default: `ett_bytes`); return what was written."""
    content = ett_bytes(name) if content is None else content
    (root / f"{name}.csv").write_bytes(content)
    return content
