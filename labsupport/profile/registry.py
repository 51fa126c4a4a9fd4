"""Each section's sizes, registered where the section's code lives: a frozen dataclass of the
section's own fields, one instance per profile (`SectionSizes`). A profile reads them as
``P.<section>.<field>`` once the section's package is imported (`labsupport.sections`);
nothing here knows any section.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, kw_only=True)
... class DemoSizes:
...     lengths: tuple
>>> demo = register("demo_section", cpu=DemoSizes(lengths=(1024, 2048)),
...                 gpu=lambda card: DemoSizes(lengths=(4096,)))
>>> demo.for_profile("smoke", None).lengths
(1024, 2048)
>>> unregister("demo_section")
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..validation import check_instance

__all__ = ["SectionSizes", "register", "unregister", "registered"]

_SECTIONS: dict[str, SectionSizes] = {}


@dataclass(frozen=True)
class SectionSizes:
    """How one section's sizes are made: ``cpu`` and ``smoke`` are instances of the section's
    dataclass (``smoke`` defaults to ``cpu``), ``gpu`` an instance or ``gpu(card)`` returning one
    sized for a `labsupport.profile.Card`; ``by_card`` names the fields that depend on the card
    (the size table of ``python -m labsupport.sections`` shows them)."""

    name: str
    cpu: Any
    smoke: Any
    gpu: Any
    by_card: tuple[str, ...] = ()

    def for_profile(self, profile: str, card) -> Any:
        """The sizes of profile ``profile`` (``cpu``, ``smoke`` or ``gpu``, sized for ``card``)."""
        if profile == "cpu":
            return self.cpu
        if profile == "smoke":
            return self.smoke
        return self.gpu(card) if callable(self.gpu) else self.gpu


def register(name: str, *, cpu, smoke=None, gpu=None, by_card: tuple[str, ...] = ()) -> SectionSizes:
    """Register a section's sizes under ``name`` (``P.<name>``); ``smoke`` and ``gpu`` default
    to ``cpu``. Registering a name again replaces it (a module re-imported)."""
    check_instance("section name", name, str, "the name P.<name> reads, e.g. 'self_attention'")
    if not name.isidentifier():
        raise ValueError(f"section name {name!r} must be a Python identifier (it is read as P.{name})")
    for preset, value in (("cpu", cpu), ("smoke", smoke)):
        if value is not None and not dataclasses.is_dataclass(value):
            raise TypeError(f"register({name!r}): {preset} must be an instance of the section's sizes "
                            f"dataclass, got {type(value).__name__}")
    fields = {f.name for f in dataclasses.fields(cpu)}
    unknown = sorted(set(by_card) - fields)
    if unknown:
        raise ValueError(f"register({name!r}): by_card names {unknown}, which are not fields of "
                         f"{type(cpu).__name__} ({sorted(fields)})")
    sizes = SectionSizes(name, cpu, cpu if smoke is None else smoke, cpu if gpu is None else gpu,
                         tuple(by_card))
    _SECTIONS[name] = sizes
    return sizes


def unregister(name: str) -> None:
    """Remove ``name`` (tests and examples that register a section of their own)."""
    _SECTIONS.pop(name, None)


def registered() -> MappingProxyType:
    """Every registered section's sizes by name, read-only, in the order registered."""
    return MappingProxyType(_SECTIONS)


def sizes_of(name: str) -> SectionSizes | None:
    """The registered sizes of section ``name``, or None."""
    return _SECTIONS.get(name)


