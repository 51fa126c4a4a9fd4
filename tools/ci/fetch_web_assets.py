"""Fetch, from the npm registry, the JavaScript the built pages load from CDNs.

The rendered book loads MathJax 3 and the ipywidgets HTML manager (with require.js)
from public CDNs. The browser test (tests/test_browser.py) serves local copies
instead, so it runs offline but for the package registries. This script downloads
pinned versions from registry.npmjs.org, checks each tarball against the registry's
sha512 integrity pinned below, and extracts only the files the pages load:

    .cache/web-assets/mathjax/es5/...               MathJax 3.2.2 (what mathjax@3 resolves to)
    .cache/web-assets/html-manager/dist/...         @jupyter-widgets/html-manager 1.0.6
    .cache/web-assets/requirejs/require.js          requirejs 2.3.4

    python -m tools.ci.fetch_web_assets [--dest DIR]

It is idempotent: a package whose files are already extracted (a stamp file records
its integrity) is not downloaded again.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEST = ROOT / ".cache" / "web-assets"
REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class Package:
    name: str          # npm name
    version: str
    integrity: str     # the registry's dist.integrity (sha512, base64)
    folder: str        # where under DEST its files go
    keep: tuple        # path prefixes inside the tarball's package/ to extract

    @property
    def url(self) -> str:
        base = self.name.rsplit("/", 1)[-1]
        return f"{REGISTRY}/{self.name}/-/{base}-{self.version}.tgz"


PACKAGES = (
    # The pages load .../mathjax@3/es5/tex-mml-chtml.js; at run time it loads its CHTML
    # fonts and, on demand, TeX extensions (autoload) and the menu's ui modules.
    Package("mathjax", "3.2.2",
            "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
            "mathjax",
            ("es5/tex-mml-chtml.js", "es5/input/tex/extensions/", "es5/output/chtml/fonts/",
             "es5/ui/", "LICENSE")),
    # myst-nb's default nb_ipywidgets_js. embed-amd.js is one bundle (controls, base and
    # output widgets built in); its CSS loads the Font Awesome files beside it.
    Package("@jupyter-widgets/html-manager", "1.0.6",
            "sha512-+Mn+Ra8wyIHrYaUpfmf9A3dsLkt/NuwzPQN8sthdxBD35VV5cOJbpmgMhNR27n/rmP3mKyEe0PWCJrtZrXTXDQ==",
            "html-manager",
            ("dist/embed-amd.js", "dist/embed.js.LICENSE.txt", "LICENSE",
             *(f"dist/{h}.{ext}" for h, ext in (
                 ("23f19bb08961f37aaf69", "eot"), ("77206a6bb316fa0aded5", "eot"),
                 ("9bbb245e67a133f6e486", "eot"), ("2f517e09eb2ca6650ff5", "svg"),
                 ("4689f52cc96215721344", "svg"), ("7a8b4f130182d19a2d7c", "svg"),
                 ("491974d108fe4002b2aa", "ttf"), ("527940b104eb2ea366c8", "ttf"),
                 ("be9ee23c0c6390141475", "ttf"), ("2285773e6b4b172f07d9", "woff"),
                 ("bb58e57c48a3e911f15f", "woff"), ("eeccf4f66002c6f2ba24", "woff"),
                 ("1551f4f60c37af51121f", "woff2"), ("7a3337626410ca2f4071", "woff2"),
                 ("d878b0a6a1144760244f", "woff2"))))),
    # The pages load cdnjs .../require.js/2.3.4/require.min.js; npm ships require.js.
    Package("requirejs", "2.3.4",
            "sha512-qPD5gRrj6kGQ0ZySAJgqbArkaDqPMbQIT0zSZDkIv1mfA17w/tR2Faq5l2qqRf2CdQx6FWln9nUrgd2UDzb19A==",
            "requirejs", ("require.js",)),
)


class FetchError(RuntimeError):
    pass


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _download(url: str, timeout: float = 120) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"could not download {url}: {exc}") from exc


def fetch(package: Package, dest: Path) -> Path:
    """Extract `package`'s kept files into dest/package.folder (once); return that folder."""
    target = dest / package.folder
    stamp = target / ".integrity"
    if stamp.is_file() and stamp.read_text().strip() == package.integrity:
        return target
    data = _download(package.url)
    got = _integrity(data)
    if got != package.integrity:
        raise FetchError(f"{package.url}: integrity mismatch, expected {package.integrity}, got {got}")
    tmp = dest / f".{package.folder}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    found = set()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith("package/"):
                continue
            rel = member.name[len("package/"):]
            prefix = next((p for p in package.keep if rel == p or (p.endswith("/") and rel.startswith(p))),
                          None)
            if prefix is None or ".." in Path(rel).parts:
                continue
            found.add(prefix)
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(member).read())
    missing = sorted(set(package.keep) - found)
    if missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FetchError(f"{package.url}: the tarball lacks {missing}")
    (tmp / ".integrity").write_text(package.integrity + "\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def fetch_all(dest: Path = DEFAULT_DEST) -> dict[str, Path]:
    """Fetch every package (idempotent); return {folder: path}."""
    dest.mkdir(parents=True, exist_ok=True)
    return {p.folder: fetch(p, dest) for p in PACKAGES}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"default {DEFAULT_DEST}")
    args = parser.parse_args(argv)
    try:
        for folder, path in fetch_all(args.dest).items():
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            print(f"{folder}: {path} ({size / 1e6:.1f} MB)")
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
