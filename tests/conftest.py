from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tol(dtype):
    """assert_close tolerances by dtype (STYLE.md)."""
    return {torch.float64: dict(atol=1e-10, rtol=1e-10),
            torch.float32: dict(atol=1e-5, rtol=1.3e-6),
            torch.float16: dict(atol=1e-3, rtol=1e-3),
            torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}[dtype]


def toc_files():
    """The book's pages in _toc.yml order, as paths without suffix ("intro", "chapters/12_1_...")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for entry in toc.get("chapters", []):
        files.append(entry["file"])
        files.extend(section["file"] for section in entry.get("sections", []))
    return files
