"""The code of 12.4 Long Sequences and Memory (chapters/12_4_long_sequences.ipynb): its
sizes and byte models (``P.long_sequences``, `sizes`), its exercises' self-checks (`checks`) and
its experiments (`study`)."""
from . import checks, sizes, study

__all__ = ["checks", "sizes", "study"]
