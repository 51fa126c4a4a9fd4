"""The profile a notebook reads (`Profile`, ``P = profile.current()``) and how it is chosen:
by name, else ``$LABSUPPORT_PROFILE`` (`ENV_VAR`), else ``gpu`` with CUDA and ``cpu`` without
(`default_name`). A section's sizes are ``P.<section>`` (`labsupport.profile.registry`).

>>> P = current("smoke")
>>> P.name, P.card, P.sweep_dtype
('smoke', None, torch.float32)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..units import format_bytes
from ..validation import check_instance
from .cards import CARDS, MEMORY_FRACTION, REFERENCE_CARD, Card
from .registry import registered, sizes_of

__all__ = ["ENV_VAR", "PRESETS", "Profile", "current", "default_name"]

ENV_VAR = "LABSUPPORT_PROFILE"

PRESETS = ("cpu", "gpu", "smoke")
_CPU_DTYPE, _CPU_BACKEND = torch.float32, "flash"      # PyTorch's CPU flash kernel takes float32


@dataclass(frozen=True, kw_only=True, repr=False)
class Profile:
    """A preset where it runs: ``name``, ``device``, ``card`` (the card the gpu profile was
    sized for; None for cpu and smoke), ``source`` (why this profile runs) and ``card_note``
    ("" for this machine's card, else why another was used). The cost sweeps' dtype and the
    SDPA backend their fused kernel runs are ``sweep_dtype`` and ``fused_backend``; each
    section's sizes are ``P.<section>`` (``P.long_sequences.wall_lengths``), made from what the
    section registered when read."""

    name: str
    device: torch.device
    card: Card | None = None
    source: str = ""
    card_note: str = ""

    @property
    def sweep_dtype(self) -> torch.dtype:
        return self.card.sweep_dtype if self.card is not None else _CPU_DTYPE

    @property
    def fused_backend(self) -> str:
        return self.card.fused_backend if self.card is not None else _CPU_BACKEND

    if not TYPE_CHECKING:         # hidden from type checkers, which then flag an unknown name
        def __getattr__(self, key) -> Any:
            """A section's sizes, ``P.<section>``; only for a name that is no attribute."""
            if key.startswith("_"):                 # copy and pickle look these up first
                raise AttributeError(key)
            sizes = sizes_of(key)
            if sizes is None:
                known = ", ".join(registered()) or "none yet"
                raise AttributeError(f"profile {self.__dict__.get('name')!r} has no sizes named {key!r}: a "
                                     f"section's sizes are registered when its package is imported "
                                     f"(import labsupport.sections.{key}); registered: {known}")
            return sizes.for_profile(self.name, self.card)

    def __repr__(self) -> str:
        return (f"Profile(name={self.name!r}, device={self.device!r}, card={self.card!r}, "
                f"source={self.source!r}, card_note={self.card_note!r})")

    def __str__(self) -> str:
        if self.card is None:
            return f"profile {self.name!r} on {self.device}"
        card = str(self.card)
        if self.card_note:
            card = f"{card[:-1]}; {self.card_note})"
        dtype = _dtype_name(self.sweep_dtype)
        return f"profile {self.name!r} on {self.device}, sized for {card}: {dtype} sweeps"

    def describe(self) -> str:
        """Two lines for a reader: which profile runs and why (device, memory, dtype), and how
        to pick another."""
        other = "gpu" if self.name == "cpu" else "cpu"
        choose = (f'Another profile: LABSUPPORT_PROFILE={other} before starting Jupyter, or '
                  f'os.environ["LABSUPPORT_PROFILE"] = "{other}" before the imports '
                  f"(profiles: {', '.join(sorted(PRESETS))}).")
        return f"{self._what()}\n{choose}"

    def _what(self) -> str:
        head = f"Profile {self.name!r} ({self.source})" if self.source else f"Profile {self.name!r}"
        dtype = _dtype_name(self.sweep_dtype)
        if self.card is None:
            if self.name == "smoke":
                return f"{head}: the least work that runs every line; its results are not for reading."
            return f"{head}: sizes for a 2-core laptop, minutes per notebook; sweeps in {dtype}."
        card, note = self.card, f"; {self.card_note}" if self.card_note else ""
        major, minor = card.capability
        return (f"{head}: sized for {card.name} ({format_bytes(card.total_bytes)}, "
                f"{format_bytes(card.free_bytes)} free, compute capability {major}.{minor}{note}): "
                f"sweeps in {dtype} with SDPA's {self.fused_backend} backend, each point within "
                f"{MEMORY_FRACTION:.0%} of the free memory ({format_bytes(card.usable_bytes)}).")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def default_name() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def current(name: str | None = None, *, card: Card | str | None = None) -> Profile:
    """The profile ``name``, else ``$LABSUPPORT_PROFILE``, else the default for this machine.

    The gpu profile is sized for ``card`` (a `Card`, or a name in `CARDS`: sizes for that card
    on any machine), else for this machine's card, else for the reference card
    (``CARDS[REFERENCE_CARD]``) where none can be read.
    """
    name, source = _choose(name)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "gpu":
        if card is not None:
            raise ValueError(f"card= sizes the gpu profile; profile {name!r} has fixed sizes; "
                             "pass name='gpu' with a card, or no card")
        return Profile(name=name, device=device, source=source)
    sized_for, note = _card(card)
    return Profile(name="gpu", device=device, card=sized_for, source=source, card_note=note)


def _choose(name: str | None) -> tuple[str, str]:
    """The profile's name and why it was chosen."""
    if name:
        source = "asked for by name"
    elif os.environ.get(ENV_VAR):
        name, source = os.environ[ENV_VAR], f"from ${ENV_VAR}"
    else:
        name = default_name()
        source = "the default with CUDA" if name == "gpu" else "the default without CUDA"
    if name not in PRESETS:
        raise ValueError(f"unknown profile {name!r} (from argument or ${ENV_VAR}); "
                         f"expected one of {sorted(PRESETS)}")
    return name, source


def _card(card: Card | str | None) -> tuple[Card, str]:
    """The card to size the gpu profile for, and a note unless it is this machine's."""
    if card is None:
        found = Card.detect()
        if found is not None:
            return found, ""
        return CARDS[REFERENCE_CARD], "the reference card: no CUDA device could be read here"
    if isinstance(card, str):
        if card not in CARDS:
            raise ValueError(f"unknown card {card!r}; expected one of {sorted(CARDS)} "
                             "or a profile.Card")
        return CARDS[card], "named, not this machine's"
    check_instance("card", card, Card, f"a profile.Card or a card's name in {sorted(CARDS)}")
    return card, "given, not this machine's"
