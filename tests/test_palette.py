"""The book's colours stay distinguishable for colour-blind readers.

Colour-vision deficiency is simulated with the matrices of Machado, Oliveira and Fernandes
(2009, severity 1.0) applied in linear RGB; distances are CIE76 Delta E in CIELAB.

- The colour cycle that ``labsupport.plots.use_book_style()`` sets is the Okabe-Ito palette,
  and every pair of its colours stays at least ``MIN_DELTA_E`` apart under protanopia,
  deuteranopia and tritanopia (matplotlib's default tab10 fails the same test).
- Every colormap the book uses (the style's default, ``plots.heatmap``'s default, and every
  ``cmap="..."`` in labsupport and the notebooks) has a lightness that rises or falls
  steadily under each simulation, so its order survives colour blindness and greyscale
  (jet and turbo fail).
"""
import inspect
import itertools
import json
import re
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib import colors as mcolors

from labsupport import plots

ROOT = Path(__file__).resolve().parents[1]
MIN_DELTA_E = 12.0
OKABE_ITO = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"}
SIMULATIONS = {  # Machado et al. 2009, severity 1.0, on linear RGB
    "normal vision": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779],
                            [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}


def _linear(rgb):
    rgb = np.asarray(rgb, dtype=float)
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(linear_rgb):
    """CIELAB (D65) of linear sRGB rows (N, 3) -> (N, 3)."""
    xyz = linear_rgb @ np.array([[0.4124, 0.3576, 0.1805],
                                 [0.2126, 0.7152, 0.0722],
                                 [0.0193, 0.1192, 0.9505]]).T
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def simulate_lab(colours, matrix):
    rgb = np.array([mcolors.to_rgb(c) for c in colours])
    return _lab(np.clip(_linear(rgb) @ matrix.T, 0, 1))


def closest_pairs(colours):
    """For each vision, (smallest Delta E between two of `colours`, the pair)."""
    out = {}
    for vision, matrix in SIMULATIONS.items():
        lab = simulate_lab(colours, matrix)
        out[vision] = min((float(np.linalg.norm(lab[i] - lab[j])), (colours[i], colours[j]))
                          for i, j in itertools.combinations(range(len(colours)), 2))
    return out


def palette_problems(colours):
    return [f"{vision}: {a} and {b} only {d:.1f} apart (need {MIN_DELTA_E})"
            for vision, (d, (a, b)) in closest_pairs(colours).items() if d < MIN_DELTA_E]


def colormap_problems(name, samples=64):
    rgb = mpl.colormaps[name](np.linspace(0, 1, samples))[:, :3]
    problems = []
    for vision, matrix in SIMULATIONS.items():
        lightness = _lab(np.clip(_linear(rgb) @ matrix.T, 0, 1))[:, 0]
        steps = np.diff(lightness)
        if not ((steps > 0).all() or (steps < 0).all()) or abs(lightness[-1] - lightness[0]) < 50:
            problems.append(f"{name} under {vision}: lightness not monotonic over a range of 50")
    return problems


def book_cycle():
    with mpl.rc_context():
        plots.use_book_style()
        return [mcolors.to_hex(c).upper() for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]


def test_the_book_style_cycles_through_okabe_ito():
    cycle = book_cycle()
    assert cycle == [c.upper() for c in plots.PALETTE]
    assert set(cycle) <= OKABE_ITO, set(cycle) - OKABE_ITO
    assert len(cycle) >= 6


def test_the_colour_cycle_is_distinguishable_with_colour_blindness():
    assert palette_problems(book_cycle()) == []


def test_the_palette_check_rejects_a_palette_that_is_not_safe():
    tab10 = [mcolors.to_hex(c) for c in mpl.colormaps["tab10"].colors[:7]]
    assert any(p.startswith(("protanopia", "deuteranopia")) for p in palette_problems(tab10))


def used_colormaps():
    """Every colormap name the book uses: style and heatmap defaults, explicit cmap= values."""
    with mpl.rc_context():
        plots.use_book_style()
        names = {mpl.rcParams["image.cmap"]: "use_book_style (image.cmap)"}
    names.setdefault(inspect.signature(plots.heatmap).parameters["cmap"].default, "plots.heatmap default")
    pattern = re.compile(r"""cmap\s*=\s*["']([A-Za-z0-9_]+)["']""")
    for path in sorted((ROOT / "labsupport").rglob("*.py")):
        for name in pattern.findall(path.read_text()):
            names.setdefault(name, str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                for name in pattern.findall("".join(cell["source"])):
                    names.setdefault(name, str(path.relative_to(ROOT)))
    return names


def test_every_colormap_keeps_its_order_with_colour_blindness():
    used = used_colormaps()
    assert {"viridis", "cividis"} <= set(used), used
    problems = [f"{p} (used in {where})" for name, where in used.items() for p in colormap_problems(name)]
    assert problems == []


@pytest.mark.parametrize("name", ["jet", "turbo"])
def test_the_colormap_check_rejects_rainbow_maps(name):
    assert colormap_problems(name)


def test_every_notebook_applies_the_book_style():
    def code(path):
        return "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                       if c["cell_type"] == "code")
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb"))
    missing = [p.name for p in notebooks if "use_book_style()" not in code(p)]
    assert missing == [], f"notebooks that never call plots.use_book_style(): {missing}"
