"""How quantities read in tables and messages: bytes and seconds, one format each.

It imports nothing but the standard library, so every layer can use it.

>>> format_bytes(1_234_567), format_bytes(None), format_seconds(754.2)
('1.2 MB', 'not measured', '12 min 34 s')
"""
from __future__ import annotations

NOT_MEASURED = "not measured"


def format_bytes(n) -> str:
    """``12.3 MB`` (decimal units: kB, MB, GB); ``not measured`` for ``None``."""
    if n is None:
        return NOT_MEASURED
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def format_seconds(seconds) -> str:
    """``48 s``, ``12 min 34 s``, ``1 h 02 min``; ``not measured`` for ``None``."""
    if seconds is None:
        return NOT_MEASURED
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
