"""The code of 12.1 Self-Attention (chapters/12_1_self_attention.ipynb): its sizes
(``P.self_attention``, `sizes`), its exercises' self-checks (`checks`) and the reference answers
later cells fall back on (`reference`)."""
from . import checks, reference, sizes

__all__ = ["checks", "reference", "sizes"]
