"""labsupport: the shared code of the Chapter 12 companion book.

Modules: `attention` (kernels), `layers` (multi-head attention and blocks), `data`
(the series, the split, windows, patches), `timing` (time and measured peak memory),
`profile` (cpu/gpu size presets), `checks` (exercise self-checks), `plots` (style).
"""
__version__ = "0.1.0"
