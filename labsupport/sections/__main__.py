"""``python -m labsupport.sections [--card NAME ...]``: every section's card-dependent sizes for
named cards (`labsupport.profile.CARDS`) as a Markdown table, or this machine's profile."""
from __future__ import annotations

import argparse
import importlib

from ..profile import CARDS, current, sizes_table
from . import NAMES


def main(argv=None) -> None:
    """Print the table for ``--card`` (repeat for several), else this machine's profile."""
    parser = argparse.ArgumentParser(prog="python -m labsupport.sections",
                                     description="The gpu profile's sizes for named cards, per section.")
    parser.add_argument("--card", action="append", choices=sorted(CARDS),
                        help="a card to size for (repeat for several); default: this machine")
    args = parser.parse_args(argv)
    for name in NAMES:
        importlib.import_module(f"{__package__}.{name}")
    if args.card:
        print(sizes_table([current("gpu", card=name) for name in args.card]))
        return
    P = current()
    print(P.describe())
    print(sizes_table([P]))


if __name__ == "__main__":
    main()
