"""Write the repository URL of _config.yml into every notebook's setup cell.

The URL is one setting: `repository.url` in _config.yml (it drives the book's
repository and Colab buttons). After changing it, run

    python tools/set_repository.py

so that the notebooks' first cell clones the same repository on Colab.
"""
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
PATTERN = re.compile(r'^REPOSITORY = ".*"$', flags=re.M)


def main() -> int:
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        setup = next(c for c in nb.cells if c.cell_type == "code")
        updated = PATTERN.sub(f'REPOSITORY = "{url}"', setup.source)
        if updated != setup.source:
            setup.source = updated
            nbformat.write(nb, path)
            print(f"{path.name}: REPOSITORY = {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
