"""``python -m labsupport.profile [--card NAME ...]``: the gpu profile's sizes for named cards
(`CARDS`) as a Markdown table, or this machine's profile and its sizes."""
from __future__ import annotations

import argparse

from .cards import CARDS
from .choose import current
from .table import sizes_table


def main(argv=None) -> None:
    """Print the table for ``--card`` (repeat for several), else this machine's profile."""
    parser = argparse.ArgumentParser(prog="python -m labsupport.profile",
                                     description="The gpu profile's sizes for named cards.")
    parser.add_argument("--card", action="append", choices=sorted(CARDS),
                        help="a card to size for (repeat for several); default: this machine")
    args = parser.parse_args(argv)
    if args.card:
        print(sizes_table([current("gpu", card=name) for name in args.card]))
        return
    P = current()
    print(P.describe())
    print(sizes_table([P]))


if __name__ == "__main__":
    main()
