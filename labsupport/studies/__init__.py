"""The experiments of the sections, as plain functions, so that a notebook shows the idea it
teaches and the evidence, not the harness that produces the evidence.

- `positional` (12.3): the section's small forecaster with each encoding and the control
  without any position signal; scoring trained runs on longer windows, with the tokens
  numbered from the window's start or back from the forecast origin; the holiday test
  days; irregular windows numbered by index or by real time; the section's static figures.
- `memory` (12.4): the segment cache written out layer by layer, the reach of a position
  in a segment measured by perturbation, and memories read out by a ridge regression and
  judged by the comparison protocol.
"""
