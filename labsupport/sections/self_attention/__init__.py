"""The code of 12.1 Self-Attention (chapters/12_1_self_attention.ipynb): its sizes
(``P.self_attention``, `sizes`), its exercises' self-checks (`checks`, with the two checks of
attention's core that the lab reuses and the reference it falls back on, `reference`) and the
encoder-decoder comparison the notebook runs (`study`)."""
from . import checks, reference, sizes, study

__all__ = ["checks", "reference", "sizes", "study"]
