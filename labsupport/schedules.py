"""Learning-rate schedules for `labsupport.train.fit`: an epoch (from 0) -> a multiplier of lr.

The official ones of the papers the book compares with (`SCHEDULES`: DLinear's ``type1``,
PatchTST's ``type3``), a `Plateau` that cuts the rate when validation stops improving (which
`fit` applies), and the book's `warmup_cosine`. `resolve` turns what ``fit(schedule=...)``
accepts (None, a name, a `Plateau`, a callable) into the multiplier, and `rate` checks the
multiplier it gives for an epoch.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .validation import check_count

__all__ = ["SCHEDULES", "Plateau", "warmup_cosine", "resolve", "rate", "multiplier_at"]


def _constant(epoch: int) -> float:
    return 1.0


def _type1(epoch: int) -> float:
    """LTSF-Linear's (DLinear's) ``type1``: lr for two epochs, then halved every epoch."""
    return 0.5 ** max(0, epoch - 1)


def _type3(epoch: int) -> float:
    """PatchTST's ``type3``: lr for four epochs, then x0.9 every epoch."""
    return 0.9 ** max(0, epoch - 3)


# epoch (from 0) -> multiplier of lr. The official scripts call adjust_learning_rate(epoch + 1)
# after each epoch, so epoch e trains at the rate those functions give for e (e >= 1) and at
# lr for e = 0: type1 lr * 0.5 ** max(0, e - 1), type3 lr * 0.9 ** max(0, e - 3). `fit` applies
# them with torch.optim.lr_scheduler.LambdaLR.
@dataclass(frozen=True)
class Plateau:
    """Lower the learning rate when validation stops improving: after every epoch whose
    validation loss is no better than the best so far, the rate is multiplied by ``factor``.
    `fit` runs it as PyTorch's ``ReduceLROnPlateau(factor=factor, patience=0, threshold=0,
    threshold_mode="abs", eps=0)``. With `fit`'s early stopping (``patience`` p) a run then
    stops after p epochs without improvement with its rate cut p times: it ends annealed *and*
    by early stopping, so a short budget is not what ends it.

    Math: ``lr_e = lr * factor ** n_e``, ``n_e`` the epochs before e that did not improve.
    """

    factor: float = 0.5

    def __post_init__(self):
        expected = (f"Plateau factor must be a number in (0, 1), got {self.factor!r}; "
                    "0.5 halves the rate after an epoch without improvement")
        if isinstance(self.factor, bool) or not isinstance(self.factor, numbers.Real):
            raise TypeError(expected)
        if not 0 < self.factor < 1:
            raise ValueError(expected)

    def __call__(self, epoch: int) -> float:
        return 1.0                        # the multiplier before any cut; fit applies the cuts


SCHEDULES = {"constant": _constant, "type1": _type1, "type3": _type3, "plateau": Plateau()}
_SCHEDULE_HELP = ("schedule must be None, 'constant', 'type1', 'type3', 'plateau', a Plateau(...) or a "
                  "callable epoch -> multiplier")


def resolve(schedule):
    """The multiplier ``fit(schedule=...)`` means: None -> constant, a name -> `SCHEDULES`'s entry,
    a callable (a `Plateau` among them) as given; else raise naming what arrived."""
    if schedule is None:
        return _constant
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(f"{_SCHEDULE_HELP}, got {schedule!r}")
        return SCHEDULES[schedule]
    if not callable(schedule):
        raise TypeError(f"{_SCHEDULE_HELP}, got {type(schedule).__name__} {schedule!r}")
    return schedule


def multiplier_at(multiplier, epoch: int) -> float:
    """``multiplier(epoch)``, refused unless it is a finite number > 0."""
    factor = multiplier(epoch)
    expected = f"schedule({epoch}) returned {factor!r}; expected a multiplier > 0 of lr"
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise TypeError(expected)
    if not 0 < factor < math.inf:
        raise ValueError(expected)
    return factor


def rate(lr: float, multiplier, epoch: int) -> float:
    """``lr * multiplier(epoch)``, the multiplier checked by `multiplier_at`."""
    return lr * multiplier_at(multiplier, epoch)


def warmup_cosine(epochs: int, *, warmup: int = 1, floor: float = 0.05):
    """A learning-rate multiplier per epoch for `fit(schedule=...)`: a linear warm-up over
    ``warmup`` epochs, then a cosine from 1 down to ``floor`` at the last of ``epochs``
    (so a short budget ends annealed rather than mid-stride). ``floor`` in (0, 1]: fit
    refuses a learning rate of 0.

    Math: ``m(e) = (e + 1) / (warmup + 1)`` for e < warmup, else
    ``floor + (1 - floor) (1 + cos(pi (e - warmup) / (epochs - 1 - warmup))) / 2``. The last
    epoch is always at ``floor``: with ``warmup = epochs - 1`` the cosine's one epoch is the
    last, at ``floor`` (``warmup_cosine(2)``: 0.5, then 0.05). A one-epoch budget
    (``warmup=0``) runs at lr: there is no later epoch to anneal in.

    >>> [round(warmup_cosine(4)(e), 3) for e in range(4)]
    [0.5, 1.0, 0.525, 0.05]
    """
    epochs = check_count("epochs", epochs, least=1, what="the epoch budget")
    warmup = check_count("warmup", warmup, least=0, what="epochs of linear warm-up")
    if warmup >= epochs:
        raise ValueError(f"warmup must be below epochs (warm-up epochs, then the cosine), got warmup "
                         f"{warmup}, epochs {epochs}; pass warmup=0 for a one-epoch budget")
    expected = (f"floor must be a number in (0, 1] (the last epoch's multiplier of lr), got {floor!r}; 0 "
                "would make the last epoch's learning rate 0, which fit refuses: pass e.g. floor=0.05")
    if isinstance(floor, bool) or not isinstance(floor, numbers.Real):
        raise TypeError(expected)
    if not 0.0 < floor <= 1.0:
        raise ValueError(expected)

    span = epochs - 1 - warmup                  # epochs of the cosine after its first

    def multiplier(epoch: int) -> float:
        if epoch < warmup:
            return (epoch + 1) / (warmup + 1)
        if span == 0:                           # the cosine's one epoch is the budget's last
            return 1.0 if epochs == 1 else floor
        done = min(1.0, (epoch - warmup) / span)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * done))

    return multiplier
