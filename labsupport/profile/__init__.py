"""Size presets: ``cpu`` (a 2-core laptop, minutes per notebook), ``gpu`` (bigger sweeps and
models, sized for the card it runs on) and ``smoke`` (the least training and the shortest
sweeps, only to check that a notebook runs) for tests.

The default is ``gpu`` when CUDA is available and ``cpu`` otherwise; the environment
variable ``LABSUPPORT_PROFILE`` overrides it (``LABSUPPORT_PROFILE=cpu`` on a GPU
machine reproduces the laptop run). A profile changes sizes only: every output that
the regression tests check is the same under all of them.

The gpu profile reads its card (`Card.detect`). The card's memory sets the sweeps' lengths
and memory budgets: every point meant to run holds at most ``MEMORY_FRACTION`` of the memory
free when the profile is made, by a byte model of what that sweep allocates at its peak; the
sweeps meant to hit the out-of-memory wall end at a length the whole card cannot hold. The
card's compute capability sets the sweeps' dtype (``sweep_dtype``) and the SDPA backend their
fused kernel should run (``fused_backend``). Training sizes do not depend on the card.
``python -m labsupport.profile --card T4 --card L4 --card A100-80GB`` prints the sizes for
named cards (`CARDS`).

One job per module; every public name is imported from here:

- `presets`: `Sizes` (one named field per setting, `SETTINGS`), the ``cpu`` and ``smoke``
  presets, the gpu profile's training sizes (`GPU_FIXED`) and the lab's (`LAB_TRAINING`);
- `cards`: `Card` and its detection, `CARDS`, `REFERENCE_CARD`, `MEMORY_FRACTION`;
- `sizing`: the gpu profile's sweeps for a card, from `labsupport.byte_models`;
- `choose`: `Profile` (a `Sizes` with its name, device and card), `current`, `default_name`,
  `ENV_VAR`, `PRESETS`;
- `table` and `__main__`: the sizes per card as a Markdown table, and the command that prints it.

>>> current("cpu").name
'cpu'
>>> t4 = current("gpu", card="T4")
>>> t4.sweep_dtype, t4.fused_backend, max(t4.bill_lengths)
(torch.float16, 'efficient', 32768)
"""
from .cards import CARDS, MEMORY_FRACTION, REFERENCE_CARD, Card
from .choose import ENV_VAR, PRESETS, Profile, current, default_name
from .presets import GPU_FIXED, LAB_TRAINING, SETTINGS, Sizes

__all__ = ["ENV_VAR", "MEMORY_FRACTION", "PRESETS", "GPU_FIXED", "LAB_TRAINING", "SETTINGS",
           "CARDS", "REFERENCE_CARD", "Card", "Sizes", "Profile", "current", "default_name"]
