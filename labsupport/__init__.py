"""labsupport: the shared code of the Chapter 12 companion book.

The map to read before opening a file: every module by layer, with what it holds. A module
imports only from its own layer and the layers below it, so a section may import any concept
module and no concept module imports a section. tests/test_layering.py reads this table and
checks every import, function-level ones included; a package counts as one module, ``name/``.
To add or move a module, edit its line here.

ERRORS
A wrong type raises ``TypeError``; a wrong value raises ``ValueError``. A str, None or a bool
where a number belongs, a float (even 3.0) where an int belongs, a list where a tensor
belongs: TypeError. A count below its least (0 layers, -1 epochs), NaN or inf where a finite
number belongs, a shape, a length or a name that does not fit: ValueError. Every message says
what was checked, what was expected and what arrived, and how to fix it; the checks live in
`validation` (one function per kind of input), never in a bare ``assert``.

LAYERS
1. foundation: the standard library, NumPy and torch only
   units              how bytes and seconds read in tables and messages (format_bytes)
   markdown           Markdown tables and escaping (table, escape, Markdown)
   display            output every client renders: the one table writer, say, show
   byte_models        the bytes attention kernels hold at their peak, computed (naive_bytes, ...)
   links              where the book lives: links to a section (Colab) or a page (GitHub)
   randomstate        keeping the caller's random streams (kept_random_state, set_seed, SEED_LIMIT)
   validation         one validator per kind of input, one message style, one exception policy
   schedules          learning-rate schedules, epoch -> multiplier (type1, type3, Plateau, warmup_cosine)
   devices            where a computation runs (pick_device); the profiler's log lines muted
   scaling            power-law fits on log-log axes (fit_power_law, numpy.polyfit on the logs)
   datasets/          the data the package ships: the hourly Victoria electricity series
2. data, kernels, size presets and the figure style (low: compare draws in its palette)
   data/              the Series (from and to pandas), loaders with checksums, the split, windows, ETT
   attention/         the attention kernels (one signature), what each declares, KERNELS
   profile/           the profiles (cpu, gpu, smoke) and the cards; the registry of the sections'
                      sizes (P.<section>); sizing a sweep for a card; the size table
   plots              the book's figure style (Okabe-Ito colours) and log-log fits
3. measurement and building blocks, on the kernels
   timing/            time, measured peak memory, cost sweeps, matrix-multiply throughput
   positional         position and time encodings (sinusoidal, learned, RoPE, ALiBi, T5, XL)
   layers             multi-head attention and Transformer blocks with a swappable kernel
   provenance         a notebook's run record (device, versions, profile, time, peak) and saved
                      sweeps; torch imported only where a record is made (the Sphinx side needs none)
4. models
   memory             Transformer-XL's segment recurrence and the compressive memory
   models/            the forecasters by family: base (RevIN), recurrent, conv, linear, baselines, patch
5. training
   train              the training loop with early stopping, evaluate, predict
6. claims (below compare, whose verdicts the notebooks check with them)
   report             claims checked quietly: a notice for a reader, a stop under the tests
7. the comparison protocol
   compare            models trained and compared on one task and split, over seeds
8. what the notebooks show and check
   widgets            interactive explorers of encodings, attention weights and costs
   checks/            the self-check framework and the graded tests (the checks live in sections/)
9. the sections: the code that exists for one notebook (a section may import any layer below)
   sections/          one package per notebook: its sizes, its exercises' checks, its studies
apart: entry points that other programs load; they may import any layer, nothing imports them
   sphinx_provenance  gathers the notebooks' run records into "Where the numbers came from"
   sphinx_links       points links to the repository's own documents at the book's pages
"""
__version__ = "0.1.0"
