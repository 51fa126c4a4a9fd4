"""The code of 12.5 Efficient and Sparse Attention (chapters/12_5_efficient_attention.ipynb):
its sizes and byte models (``P.efficient_attention``, `sizes`), its exercises' self-checks
(`checks`) and the plumbing of its studies (`study`)."""
from . import checks, sizes, study

__all__ = ["checks", "sizes", "study"]
