"""The code that exists for one section, one package per notebook, named after it:

- `self_attention`        chapters/12_1_self_attention.ipynb
- `transformer`           chapters/12_2_transformer.ipynb
- `positional_encodings`  chapters/12_3_positional_encodings.ipynb
- `long_sequences`        chapters/12_4_long_sequences.ipynb
- `efficient_attention`   chapters/12_5_efficient_attention.ipynb
- `lab`                   chapters/12_lab_transformer_forecaster.ipynb

Each holds the section's sizes (``sizes``: a small dataclass per profile, registered so that a
notebook reads ``P.<section>.<size>``), its exercises' self-checks (``checks``) and whatever
else exists only for it (studies, reference answers, the lab's racers). A section package may
import any concept module of labsupport; no concept module imports a section
(tests/test_layering.py). Importing this package imports none of them: a notebook imports its
own, ``from labsupport.sections import self_attention as section``;
``python -m labsupport.sections --card T4`` imports them all and prints their card-dependent sizes.
"""

NAMES = ("self_attention", "transformer", "positional_encodings", "long_sequences",
         "efficient_attention", "lab")
