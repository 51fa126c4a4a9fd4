"""Experiments behind the profiles' sizes: run as ``python -m tools.experiments.<name>`` (README.md)."""
