"""Size presets: ``cpu`` (a 2-core laptop, minutes per notebook), ``gpu`` (bigger sweeps and
models, sized for the card it runs on) and ``smoke`` (the least training and the shortest
sweeps, only to check that a notebook runs) for tests.

The default is ``gpu`` when CUDA is available and ``cpu`` otherwise; the environment
variable ``LABSUPPORT_PROFILE`` overrides it (``LABSUPPORT_PROFILE=cpu`` on a GPU
machine reproduces the laptop run). A profile changes sizes only: every output that
the regression tests check is the same under all of them.

The sizes themselves belong to the sections: each section's package registers a small
frozen dataclass of its own sizes, one instance per preset (`register`), and a notebook reads
them as ``P.<section>.<size>``. The gpu profile reads its card (`Card.detect`): the card's
memory sets the sweeps' lengths and budgets (each section sizes its own with the helpers of
`sizing` and its byte models), its compute capability the sweeps' dtype (``P.sweep_dtype``)
and the SDPA backend their fused kernel should run (``P.fused_backend``).

One job per module; every public name is imported from here:

- `cards`: `Card` and its detection, `CARDS`, `REFERENCE_CARD`, `MEMORY_FRACTION`;
- `registry`: `register`, `registered`, `SectionSizes`;
- `sizing`: sizing a sweep for a card (`fitting`, `with_wall`, `budgeted`, `powers`);
- `choose`: `Profile`, `current`, `default_name`, `ENV_VAR`, `PRESETS`;
- `table`: the card-dependent sizes as a Markdown table (`sizes_table`).

>>> current("cpu").name
'cpu'
>>> t4 = current("gpu", card="T4")
>>> t4.sweep_dtype, t4.fused_backend
(torch.float16, 'efficient')
"""
from .cards import CARDS, MEMORY_FRACTION, REFERENCE_CARD, Card
from .choose import ENV_VAR, PRESETS, Profile, current, default_name
from .registry import SectionSizes, register, registered, unregister
from .sizing import budgeted, fitting, powers, with_wall
from .table import sizes_table

__all__ = ["ENV_VAR", "MEMORY_FRACTION", "PRESETS", "CARDS", "REFERENCE_CARD", "Card", "Profile",
           "current", "default_name", "SectionSizes", "register", "registered", "unregister",
           "budgeted", "fitting", "powers", "with_wall", "sizes_table"]
