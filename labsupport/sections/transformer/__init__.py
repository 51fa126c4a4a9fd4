"""The code of 12.2 The Transformer Block (chapters/12_2_transformer.ipynb): its sizes
(``P.transformer``, `sizes`), its exercises' self-checks (`checks`) and teacher forcing inside
the comparison protocol (`seq2seq`)."""
from . import checks, seq2seq, sizes

__all__ = ["checks", "seq2seq", "sizes"]
