"""The code of 12.5 Efficient and Sparse Attention (chapters/12_5_efficient_attention.ipynb):
its sizes and byte models (``P.efficient_attention``, `sizes`) and its exercises' self-checks
(`checks`)."""
from . import checks, sizes

__all__ = ["checks", "sizes"]
