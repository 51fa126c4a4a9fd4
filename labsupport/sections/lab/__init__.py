"""The code of the lab (chapters/12_lab_transformer_forecaster.ipynb): its sizes and byte
models (``P.lab``, `sizes`), the steps' self-checks (`checks`), the reference answers later
cells fall back on (`reference`) and the race's networks (`racers`)."""
from . import checks, racers, reference, sizes

__all__ = ["checks", "racers", "reference", "sizes"]
