"""The code of 12.3 Positional and Temporal Encodings
(chapters/12_3_positional_encodings.ipynb): its sizes (``P.positional_encodings``, `sizes`), its
exercises' self-checks (`checks`) and its experiments and figures (`study`)."""
from . import checks, sizes, study

__all__ = ["checks", "sizes", "study"]
