"""Nothing the user holds changes behind their back: every public function of
labsupport, called on valid inputs, leaves each argument as it was and the global torch,
NumPy and ``random`` generators where they were.

`CASES` holds one valid call per public name; `EXEMPT` names the rest, each with its reason.
A new public function fails `test_every_public_name_is_covered` until it is added to one.
Modules are built outside the measured call: their constructors draw initial weights from
the global generator, as every ``torch.nn`` module does (`set_seed` makes that reproducible);
their forward passes (in eval mode) are measured.
"""
import copy
import dataclasses
import functools
import importlib
import inspect
import random
from functools import partial

import numpy as np
import pytest
import torch

import helpers
from labsupport import attention as A
from labsupport import byte_models as B
from labsupport import compare as C
from labsupport import data as D
from labsupport import devices as Dv
from labsupport import display as Ds
from labsupport import layers as Ly
from labsupport import markdown as Md
from labsupport import memory as M
from labsupport import models as Mo
from labsupport import positional as P
from labsupport import provenance as Pv
from labsupport import report as R
from labsupport import scaling as Sc
from labsupport import schedules as S
from labsupport import timing as T
from labsupport import train as Tr
from labsupport import units as U
from labsupport import validation as V

MODULES = ["attention", "layers", "positional", "memory", "models", "data", "train", "timing", "plots",
           "widgets", "profile", "report", "provenance", "validation", "compare", "devices",
           "randomstate", "scaling", "units", "schedules", "byte_models", "markdown", "display"]

EXEMPT = {
    # records and exceptions: no behaviour to test
    "attention.KernelSpec": "a frozen record", "attention.LinearAttentionState": "a record",
    "profile.Card": "a record", "schedules.Plateau": "a frozen record of a schedule (fit applies it)",
    "data.ChecksumError": "an exception", "validation.NonFiniteError": "an exception", "data.EttData": "a record", "data.ForecastTask": "a record",
    "memory.MemoryState": "a record", "timing.Timing": "a record", "profile.Profile": "a record",
    "profile.SectionSizes": "a frozen record of a section's presets",
    "provenance.RunStart": "a record",
    "train.Metrics": "a record", "train.History": "a record",
    "compare.TrainingRecord": "a record", "compare.Entry": "a record", "compare.RunFailure": "a record",
    "compare.PairedTest": "a frozen record",
    "report.ClaimNotConfirmed": "an exception", "markdown.Markdown": "a str that marks a table note",
    # the claim record is the process's own state, kept for the closing line: that is its job
    "report.claims_held": "reads the claim record", "report.forget_claims": "empties the claim record",
    "report.claims_not_held": "reads the claim record", "report.strict": "reads an environment variable",
    "compare.legend": "reads a Comparison's record (tests/test_studies.py)",
    "compare.verdict_table": "prints a Comparison's record (tests/test_studies.py)",
    "profile.register": "registering a section's sizes in the process's registry is its job",
    "profile.unregister": "removes a registered section: its job",
    "profile.registered": "reads the registry",
    "compare.Comparison": "a record of results: its methods read and print it (tests/test_compare.py)",
    "positional.AttentionPosition": "an abstract base; its subclasses are measured",
    "models.Forecaster": "a base class; its subclasses are measured",
    # a documented job that is a side effect
    "attention.attention_kernel": "declares a spec: setting .spec on the kernel it decorates is its job",
    "randomstate.set_seed": "seeding the global generators is its documented job",
    "plots.use_book_style": "setting matplotlib's rcParams is its documented job",
    # covered elsewhere
    "widgets.encoding_explorer": "an explorer: draws with encoding_figure, measured here",
    "widgets.attention_explorer": "an explorer: draws with attention_figure, measured here",
    "widgets.cost_explorer": "an explorer: draws with cost_figure, measured here",
    "widgets.Explorer": "a record: an explorer's HTML and frames (tests/test_explorers.py)",
    "widgets.figure_png": "closing the figure it saves is its documented job (tests/test_explorers.py)",
}


def t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def qkv(L=6, S=None):
    """Small inputs: one sequence, two heads of 4 (the sizes of the position modules below)."""
    return helpers.qkv(L, S, B=1, H=2, D=4, Dv=4)


def built(cls, *args, **kwargs):
    """A module built with a fixed seed, in eval mode, without touching the global generator."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return cls(*args, **kwargs).eval()


def series(T_=60, C=2):
    stamps = np.datetime64("2020-01-01T00:00") + np.arange(T_) * np.timedelta64(60, "m")
    return D.Series(stamps, np.random.default_rng(0).normal(size=(T_, C)).astype(np.float32),
                    tuple(f"c{i}" for i in range(C)), "toy")


def vic_file():
    return D.data_dir() / D.VIC_ELEC_FILE


@functools.lru_cache(maxsize=1)
def _sweep():
    return T.cost_sweep({"naive": A.naive_attention}, [8, 16], reps=1, progress=False,
                        make_inputs=lambda L: qkv(L))


def sweep_rows():
    return copy.deepcopy(_sweep())


def case(fn, *args, **kwargs):
    return fn, args, kwargs


ON = (torch.arange(6), torch.arange(6))           # query and key positions
CASES = {   # name: () -> (callable, args, kwargs)
    # attention
    "attention.kernel_spec": lambda: case(A.kernel_spec, partial(A.local_attention, window=2)),
    "attention.kernel_name": lambda: case(A.kernel_name, A.sdpa),
    "attention.explicit_attention": lambda: case(A.explicit_attention, "local", *qkv(),
                                                 mask=torch.ones(6, 6, dtype=torch.bool)),
    "attention.causal_mask": lambda: case(A.causal_mask, 4),
    "attention.naive_attention": lambda: case(A.naive_attention, *qkv(5, 7), mask=t(5, 7) > 0, bias=t(5, 7)),
    "attention.flash_attention": lambda: case(A.flash_attention, *qkv(5, 7), bias=t(5, 7), block_size=2),
    "attention.sdpa": lambda: case(A.sdpa, *qkv(5, 7), mask=torch.ones(7, dtype=torch.bool)),
    "attention.sdpa_backends": lambda: case(A.sdpa_backends, *qkv()),
    "attention.sdpa_backend_used": lambda: case(A.sdpa_backend_used, *qkv()),
    "attention.band_mask": lambda: case(A.band_mask, 5, 1),
    "attention.longformer_mask": lambda: case(A.longformer_mask, 6, 1, [0, 3]),
    "attention.local_attention": lambda: case(A.local_attention, *qkv(), window=2, is_causal=True),
    "attention.longformer_attention": lambda: case(A.longformer_attention, *qkv(), window=1,
                                                   global_tokens=torch.tensor([0, 4])),
    "attention.LinformerAttention": lambda: case(built(A.LinformerAttention, 6, 3), *qkv()),
    "attention.linear_attention": lambda: case(A.linear_attention, *qkv(), is_causal=True, chunk_size=4),
    "attention.linear_attention_recurrent": lambda: case(
        A.linear_attention_recurrent, *qkv(), return_state=True,
        state=A.LinearAttentionState(t(1, 2, 4, 4), t(1, 2, 4).abs())),
    "attention.orthogonal_random_features": lambda: case(A.orthogonal_random_features, 6, 4, generator=0),
    "attention.favor_features": lambda: case(A.favor_features, t(5, 4), t(6, 4)),
    "attention.performer_attention": lambda: case(A.performer_attention, *qkv(), num_features=8,
                                                  generator=torch.Generator().manual_seed(1)),
    "attention.get_kernel": lambda: case(A.get_kernel, "performer"),
    # layers
    "layers.MultiHeadAttention": lambda: case(built(Ly.MultiHeadAttention, 8, 2, kernel="local"), t(2, 5, 8),
                                              mask=torch.ones(5, 5, dtype=torch.bool), return_weights=True),
    "layers.FeedForward": lambda: case(built(Ly.FeedForward, 8, 16), t(2, 5, 8)),
    "layers.TokenBatchNorm": lambda: case(built(Ly.TokenBatchNorm, 8), t(2, 5, 8)),
    "layers.make_norm": lambda: case(Ly.make_norm, "batch", 8),
    "layers.TransformerBlock": lambda: case(built(Ly.TransformerBlock, 8, 2, 16, 0.1), t(2, 5, 8), is_causal=True),
    "layers.TransformerEncoder": lambda: case(built(Ly.TransformerEncoder, 8, 2, 2, 16, 0.1), t(2, 5, 8),
                                              return_weights=True),
    "layers.DecoderBlock": lambda: case(built(Ly.DecoderBlock, 8, 2, 16, 0.1), t(2, 5, 8), t(2, 7, 8)),
    # positional
    "positional.sinusoidal_features": lambda: case(P.sinusoidal_features, torch.arange(5.0), 8),
    "positional.sinusoidal_encoding": lambda: case(P.sinusoidal_encoding, 5, 8),
    "positional.SinusoidalPositionalEncoding": lambda: case(built(P.SinusoidalPositionalEncoding, 8), t(2, 5, 8)),
    "positional.LearnedPositionalEncoding": lambda: case(built(P.LearnedPositionalEncoding, 5, 8), t(2, 5, 8)),
    "positional.Time2Vec": lambda: case(built(P.Time2Vec, 8), t(2, 5, 8), positions=torch.arange(5.0)),
    "positional.NoPositionalEncoding": lambda: case(built(P.NoPositionalEncoding), t(2, 5, 8)),
    "positional.RotaryEmbedding": lambda: case(built(P.RotaryEmbedding, 4), t(2, 3, 5, 4), positions=torch.arange(5)),
    "positional.alibi_slopes": lambda: case(P.alibi_slopes, 4),
    "positional.alibi_bias": lambda: case(P.alibi_bias, 2, 5, q_pos=torch.arange(5), k_pos=torch.arange(5)),
    "positional.ALiBi": lambda: case(built(P.ALiBi, 2).bias, *qkv()[:2], *ON),
    "positional.relative_position_bucket": lambda: case(P.relative_position_bucket, torch.arange(-5, 5)),
    "positional.RelativePositionBias": lambda: case(built(P.RelativePositionBias, 2).bias, *qkv()[:2], *ON),
    "positional.XLRelativePosition": lambda: case(built(P.XLRelativePosition, 2, 4).bias, *qkv()[:2], *ON),
    "positional.make_positional_encoding": lambda: case(P.make_positional_encoding, "sinusoidal", d_model=8,
                                                        max_len=5),
    "positional.make_attention_position": lambda: case(P.make_attention_position, "rope", n_heads=2, head_dim=4),
    "data.time_features": lambda: case(D.time_features, series().timestamps, np.zeros(60)),
    # memory
    "memory.memory_mask": lambda: case(M.memory_mask, 4, 3),
    "memory.CompressiveMemory": lambda: case(built(M.CompressiveMemory, 8, mem_len=4, cmem_len=2, rate=2).update,
                                             t(2, 4, 8), t(2, 2, 8), t(2, 4, 8)),
    "memory.attention_reconstruction_loss": lambda: case(
        M.attention_reconstruction_loss, built(Ly.MultiHeadAttention, 8, 2), t(2, 3, 8), t(2, 4, 8),
        built(M.CompressiveMemory, 8, mem_len=4, cmem_len=2, rate=2, compression="conv")),
    "memory.SegmentRecurrentEncoder": lambda: case(built(M.SegmentRecurrentEncoder, 8, 2, 1, mem_len=4), t(2, 5, 8)),
    "memory.run_segments": lambda: case(M.run_segments, built(M.SegmentRecurrentEncoder, 8, 2, 1, mem_len=4),
                                        t(2, 9, 8), 4, return_memory=True),
    # models
    "models.check_window": lambda: case(Mo.check_window, t(2, 12, 1), 12, 1),
    "models.GRUForecaster": lambda: case(built(Mo.GRUForecaster, lookback=12, horizon=3, hidden=8), t(2, 12, 1)),
    "models.PatchGRUForecaster": lambda: case(built(Mo.PatchGRUForecaster, lookback=12, horizon=3, patch_len=4,
                                                    stride=2, hidden=8), t(2, 12, 1)),
    "models.CausalConv1d": lambda: case(built(Mo.CausalConv1d, 2, 3, 3), t(2, 2, 12)),
    "models.TemporalBlock": lambda: case(built(Mo.TemporalBlock, 2, 3, 3, 2), t(2, 2, 12)),
    "models.TCNForecaster": lambda: case(built(Mo.TCNForecaster, lookback=12, horizon=3, hidden=4), t(2, 12, 1)),
    "models.MovingAverage": lambda: case(built(Mo.MovingAverage, 5), t(2, 12, 1)),
    "models.LinearForecaster": lambda: case(built(Mo.LinearForecaster, lookback=12, horizon=3, kernel_size=5),
                                            t(2, 12, 1)),
    "models.seasonal_naive": lambda: case(Mo.seasonal_naive, t(2, 12, 1), 4, 6),
    "models.InstanceNorm": lambda: case(built(Mo.InstanceNorm, 1).normalise, t(2, 12, 1)),
    "models.PatchTransformer": lambda: case(built(Mo.PatchTransformer, lookback=48, horizon=6, patch_len=12,
                                                  d_model=8, n_heads=2, pos_encoding="alibi"),
                                            t(2, 48, 1), return_weights=True),
    # data
    "data.Series": lambda: case(series().select, "c1", "c0"),
    "data.data_dir": lambda: case(D.data_dir),
    "data.sha256_of": lambda: case(D.sha256_of, vic_file()),
    "data.verify_sha256": lambda: case(D.verify_sha256, vic_file(), D.VIC_ELEC_SHA256),
    "data.load_csv": lambda: case(D.load_csv, vic_file(), columns=["holiday", "demand_mw"]),
    "data.load_vic_elec": lambda: case(D.load_vic_elec),
    "data.temporal_split": lambda: case(D.temporal_split, D.load_vic_elec(), context=24),
    "data.Standardizer": lambda: case(D.Standardizer().fit(np.arange(20.0).reshape(10, 2)).transform, t(3, 2)),
    "data.ett_borders": lambda: case(D.ett_borders, "ETTh1", context=10),
    "data.load_ett": lambda: case(D.load_ett, "ETTh1", _ett_root(), False, sha256=None),
    "data.make_windows": lambda: case(D.make_windows, np.arange(40.0).reshape(20, 2), 5, 2, stride=3),
    "data.patchify": lambda: case(D.patchify, t(2, 20), patch_len=4, stride=3),
    "data.patch_grid": lambda: case(D.patch_grid, 336, 24, 12),
    "data.book_task": lambda: case(D.book_task, train_stride=500, eval_stride=500, calendar=True),
    # train
    "devices.pick_device": lambda: case(Dv.pick_device, "cpu"),
    "devices.quiet_stderr": lambda: case(_quietly, t(3)),
    "train.fit": lambda: case(_fit_a_new_model, (t(40, 12, 1), t(40, 3, 1, seed=1)),
                              (t(10, 12, 1, seed=2), t(10, 3, 1, seed=3))),
    "train.predict": lambda: case(Tr.predict, _small_patch_model(), t(5, 12, 1), batch_size=2),
    "train.evaluate": lambda: case(Tr.evaluate, _small_patch_model(), (t(5, 12, 1), t(5, 3, 1, seed=1))),
    "train.window_errors": lambda: case(Tr.window_errors, _small_patch_model(), (t(5, 12, 1), t(5, 3, 1, seed=1)),
                                        scaler=D.Standardizer().fit(np.arange(8.0).reshape(4, 2)), channels=[1]),
    "train.check_fit_options": lambda: case(Tr.check_fit_options, epochs=3, lr=0.1, clip=None,
                                            schedule=S.warmup_cosine(3)),
    "validation.check_batch_size": lambda: case(V.check_batch_size, np.int64(8)),
    "randomstate.kept_random_state": lambda: case(_seeds_inside_a_kept_state),
    "randomstate.seeded_torch": lambda: case(_draws_inside_seeded_torch),
    # timing
    "timing.time_call": lambda: case(T.time_call, A.naive_attention, *qkv(), reps=2),
    "timing.cpu_peak_supported": lambda: case(T.cpu_peak_supported),
    "timing.peak_memory": lambda: case(T.peak_memory, A.naive_attention, *qkv()),
    "units.format_bytes": lambda: case(U.format_bytes, 123456),
    "markdown.escape": lambda: case(Md.escape, "a_b | <c>"),
    "markdown.table": lambda: case(Md.table, ["kernel", "ms"], [["naive", "2.8"], ["flash", "1.0"]]),
    # byte models: plain arithmetic on sizes
    **{f"byte_models.{name}": (lambda name=name, kwargs=kwargs: case(getattr(B, name), 512, **kwargs)) for name, kwargs in {
        "naive_bytes": dict(batch=2, heads=4, causal=True, size=2), "inputs_bytes": dict(heads=4),
        "fused_bytes": dict(heads=4, size=2, block=64)}.items()},
    "units.format_seconds": lambda: case(U.format_seconds, 754.2),
    "scaling.fit_power_law": lambda: case(Sc.fit_power_law, np.array([1.0, 2, 4, 8]), np.array([1.0, 4, 16, 64])),
    "timing.is_out_of_memory": lambda: case(T.is_out_of_memory, RuntimeError("CUDA out of memory")),
    "timing.LargestTensor": lambda: case(_largest, t(4, 4)),
    "timing.attention_inputs": lambda: case(T.attention_inputs, 8, head_dim=4),
    "timing.attention_flops": lambda: case(T.attention_flops, 8, is_causal=True),
    "timing.cost_sweep": lambda: case(T.cost_sweep, {"naive": A.naive_attention, "performer": A.KERNELS["performer"]},
                                      [8, 16], reps=1, progress=False, make_inputs=lambda L: qkv(L)),
    "timing.sweep_exponent": lambda: case(T.sweep_exponent, sweep_rows(), "naive", last=2),
    "timing.matmul_peak_tflops": lambda: case(T.matmul_peak_tflops, "cpu", torch.float32, sizes=(32,), reps=1),
    "timing.add_peak_fraction": lambda: case(T.add_peak_fraction, sweep_rows(),
                                             T.MatmulPeak(1.0, torch.float32, "cpu")),
    "timing.matmul_peak": lambda: case(T.matmul_peak, "cpu", torch.float32, sizes=(32,), reps=1),
    "timing.MatmulPeak": lambda: case(T.MatmulPeak, 1.0, torch.bfloat16, "cpu"),
    "timing.dtype_name": lambda: case(T.dtype_name, torch.bfloat16),
    "timing.dtype_error": lambda: case(T.dtype_error, A.naive_attention, 8, torch.bfloat16),
    "timing.predict_peak": lambda: case(T.predict_peak, sweep_rows(), 64),
    "timing.profiler_active": lambda: case(T.profiler_active),
    "timing.peak_resident_bytes": lambda: case(T.peak_resident_bytes, A.naive_attention, *qkv()),
    # plots and widgets
    "plots.heatmap": lambda: case(_on_axes(_plots().heatmap), t(4, 5), xlabel="x", ylabel="y", colorbar="v"),
    "plots.loglog_fit": lambda: case(_on_axes(_plots().loglog_fit), np.array([1.0, 2, 4, 8]),
                                     np.array([1.0, 4, 16, 64]), label="naive"),
    "widgets.encoding_figure": lambda: case(_closing(_widgets().encoding_figure), "rope", d_model=8, length=16),
    "widgets.attention_figure": lambda: case(_closing(_widgets().attention_figure), t(6),
                                             t(2, 3, 6).softmax(-1), query=1),
    "widgets.cost_figure": lambda: case(_closing(_widgets().cost_figure),
                                        [Pv.save_sweep(sweep_rows(), _tmp() / "s.json")]),
    # profile, report, validation
    "profile.default_name": lambda: case(importlib.import_module("labsupport.profile").default_name),
    "profile.current": lambda: case(importlib.import_module("labsupport.profile").current, "cpu"),
    "report.claim": lambda: case(R.claim, "a claim", torch.tensor(True), peaks=[t(3), np.arange(4.0)]),
    "report.claims_checked": lambda: case(R.claims_checked, "cpu, torch 2.13.0"),
    "display.table": lambda: case(Ds.table, ["a", "b"], [[1, 2.5], [3, 4.0]], formats={1: "{:.1f}"}),
    "display.say": lambda: case(Ds.say, "a sentence with 0.082 in it"),
    "display.show": lambda: case(Ds.show, "**a**", "a"),
    "display.in_notebook": lambda: case(Ds.in_notebook),
    "display.describe_value": lambda: case(Ds.describe_value, t(3)),
    "timing.sweep_table": lambda: case(T.sweep_table, sweep_rows()),
    "timing.precision_note": lambda: case(T.precision_note, {"naive": A.naive_attention}, 8, torch.bfloat16),
    "profile.sizes_table": lambda: case(importlib.import_module("labsupport.profile").sizes_table,
                                        [importlib.import_module("labsupport.profile").current("gpu", card="T4")]),
    "profile.fitting": lambda: case(importlib.import_module("labsupport.profile").fitting,
                                    importlib.import_module("labsupport.profile").CARDS["T4"], "x", 1024, 4096,
                                    256, lambda L: L * L),
    "profile.powers": lambda: case(importlib.import_module("labsupport.profile").powers, 4, 64),
    "profile.with_wall": lambda: case(importlib.import_module("labsupport.profile").with_wall, (1024, 2048),
                                      lambda L: 8 * L * L, importlib.import_module("labsupport.profile").CARDS["T4"]),
    "profile.budgeted": lambda: case(importlib.import_module("labsupport.profile").budgeted,
                                     importlib.import_module("labsupport.profile").CARDS["T4"], "x", 1024, 65536,
                                     256, lambda L: 8 * L * L, lambda L: 1000 * L, lambda L: 4000 * L),
    "provenance.cpu_model": lambda: case(Pv.cpu_model),
    "provenance.device_description": lambda: case(Pv.device_description, "cpu"),
    "provenance.start_run": lambda: case(Pv.start_run),
    "provenance.run_record": lambda: case(Pv.run_record, Pv.start_run()),
    "provenance.record_run": lambda: case(Pv.record_run, Pv.start_run()),
    "provenance.peak_text": lambda: case(Pv.peak_text, _record()),
    "provenance.describe": lambda: case(Pv.describe, _record()),
    "provenance.summary": lambda: case(Pv.summary, _record()),
    "validation.check_instance": lambda: case(V.check_instance, "x", 1, int, "an int"),
    "timing.session_peak_bytes": lambda: case(T.session_peak_bytes, "cpu"),
    "provenance.machine_name": lambda: case(Pv.machine_name),
    "provenance.save_sweep": lambda: case(Pv.save_sweep, sweep_rows(), _tmp() / "sweep.json", title="t"),
    "provenance.load_sweep": lambda: case(Pv.load_sweep, Pv.save_sweep(sweep_rows(), _tmp() / "s.json")),
    "validation.check_attention_inputs": lambda: case(V.check_attention_inputs, *qkv(),
                                                      mask=torch.ones(6, dtype=torch.bool), scale=0.5),
    "validation.check_positive_int": lambda: case(V.check_positive_int, "n", np.int64(3)),
    "validation.check_finite_number": lambda: case(V.check_finite_number, "scale", 0.5),
    "validation.check_positive_number": lambda: case(V.check_positive_number, "eps", 1e-8),
    "validation.check_nonnegative_number": lambda: case(V.check_nonnegative_number, "penalty", 0.0),
    "validation.check_bool": lambda: case(V.check_bool, "revin", np.True_),
    "validation.check_rank": lambda: case(V.check_rank, "x", t(2, 3), 2, "(B, C)"),
    "validation.check_nonnegative_int": lambda: case(V.check_nonnegative_int, "n", 0),
    "validation.check_dropout": lambda: case(V.check_dropout, "dropout", 0.1),
    "validation.check_distinct_positive_ints": lambda: case(V.check_distinct_positive_ints, "lengths", [32, 16]),
    "validation.check_self_attention": lambda: case(V.check_self_attention, "local", *qkv()),
    "validation.check_no_mask": lambda: case(V.check_no_mask, "linear", None, "why"),
    "validation.check_shape": lambda: case(V.check_shape, "x", t(2, 3), (2, 3), "(B, C)"),
    "validation.check_finite_tensors": lambda: case(V.check_finite_tensors, {"q": t(2, 3), "k": t(3)}),
    "validation.checked_finite": lambda: case(_inside_checked_finite, *qkv()),
}


def _inside_checked_finite(q, k, v):
    with V.checked_finite():
        return A.naive_attention(q, k, v, is_causal=True)


def _ridge():
    """A fitted RidgeForecaster (fitting changes the model: that is its job), then its forecast."""
    model = built(Mo.RidgeForecaster, lookback=8, horizon=2)
    model.fit((t(50, 8, 1), t(50, 2, 1, seed=1)), (t(20, 8, 1, seed=2), t(20, 2, 1, seed=3)))
    return case(model, t(4, 8, 1))


CASES["models.RidgeForecaster"] = _ridge
CASES["positional.interleave_halves"] = lambda: case(P.interleave_halves, np.int64(6))

def _compare():
    """Two seeds of a small DLinear beside the ridge and the naive: the task's tensors and
    the global generators must not change (each run seeds inside a fork)."""
    spec = C.Trainable(_small_dlinear)
    return case(C.compare, _tiny_task(), {"DLinear": spec}, revin=True, seeds=2, naive_period=6, epochs=2,
                batch_size=16, progress=False)


def _hourly_series():
    """Ten days of an hourly sine, a Series."""
    stamps = np.arange("2024-01-01", "2024-01-11", dtype="datetime64[h]")
    return D.Series(stamps, np.sin(np.arange(len(stamps)) / 3.0)[:, None].astype(np.float32), ("x",))


def _tiny_task():
    """60 windows of 12 steps in, 3 out: 40 to train on, 10 to validate, 10 to test."""
    x = t(60, 12, 1)
    y = t(60, 3, 1, seed=1)
    return D.ForecastTask((x[:40], y[:40]), (x[40:50], y[40:50]), (x[50:], y[50:]),
                          D.Standardizer().fit(np.zeros((4, 1), dtype=np.float32) + np.arange(4.0)[:, None]),
                          ("c0",), 12, 3, eval_stride=3)


def _small_dlinear(revin):
    return Mo.LinearForecaster(lookback=12, horizon=3, kernel_size=5, revin=revin)


CASES.update({
    "compare.compare": _compare,
    "compare.rescore": lambda: case(C.rescore, C.compare(
        _tiny_task(), {"A": C.Trainable(_small_dlinear)}, revin=False, seeds=2, naive_period=6, epochs=2,
        batch_size=16, progress=False), _tiny_task(), naive_period=6),
    "data.make_task": lambda: case(D.make_task, _hourly_series(), lookback=24, horizon=6, fractions=(0.6, 0.2)),
    "compare.mean_range": lambda: case(C.mean_range, np.array([0.1, 0.12])),
    "compare.diebold_mariano": lambda: case(C.diebold_mariano, t(30).double(), overlap=2),
    "validation.check_count": lambda: case(V.check_count, "epochs", np.int64(3), least=1, what="the budget"),
    "validation.check_real": lambda: case(V.check_real, "lr", np.float32(0.5), what="a rate", fix="", positive=True),
    "validation.check_text": lambda: case(V.check_text, "unit", None, optional=True),
    "validation.check_windows": lambda: case(V.check_windows, "test", (t(4, 12, 1), t(4, 3, 1, seed=1))),
    "validation.count_windows": lambda: case(V.count_windows, (t(4, 12, 1), None)),
    "schedules.warmup_cosine": lambda: case(S.warmup_cosine, 4, warmup=1),
    "schedules.resolve": lambda: case(S.resolve, "type3"),
    "schedules.rate": lambda: case(S.rate, 0.1, S.Plateau(), 0),
    "schedules.multiplier_at": lambda: case(S.multiplier_at, S.Plateau(), 0),
    "data.read_times": lambda: case(D.read_times, ["2020-01-01 00:00", "2020-01-01T01:00"], lambda i: f"row {i}"),
    "compare.Trainable": lambda: case(C.Trainable, lambda revin: None, seeds=[0, 2], lr=0.1),
})


def _draws_inside_seeded_torch():
    """Drawing from the global torch generator inside `seeded_torch` leaves the caller's as it was."""
    from labsupport.randomstate import seeded_torch
    with seeded_torch(3, torch.device("cpu")) as generator:
        return torch.rand(2), torch.randperm(4, generator=generator)


def _seeds_inside_a_kept_state():
    """Seeding and drawing inside `kept_random_state` leave the caller's streams as they were."""
    from labsupport.randomstate import kept_random_state, set_seed
    with kept_random_state():
        set_seed(11)
        return torch.rand(2), np.random.rand(2), random.random()


def _small_patch_model():
    return built(Mo.PatchTransformer, lookback=12, horizon=3, patch_len=4, stride=4, d_model=8, n_heads=2,
                 n_layers=1, dropout=0.2)


def _fit_a_new_model(train, val):
    """fit changes the model it trains (its job): measured on a fresh one, with dropout, so
    that training draws random numbers; the data and the global generators must not change."""
    return Tr.fit(_small_patch_model(), train, val, epochs=2, batch_size=8, progress=False)


_TMP = {}


def _record():
    return dict(device="Example CPU (2 threads)", torch="2.13.0", cuda=None, python="3.11.7", profile="cpu",
                wall_s=754.2, peak_gpu_bytes=None, peak_rss_bytes=1.9e9, finished="2026-01-01 12:00 UTC")


def _tmp():
    return _TMP["path"]


def _ett_root():
    root = _tmp() / "ett"
    root.mkdir(exist_ok=True)
    helpers.write_ett(root)
    return root


def _quietly(x):
    with Dv.quiet_stderr():
        return x * 2


def _largest(x):
    with T.LargestTensor() as probe:
        (x @ x.T).sum()
    return probe.numel


def _plots():
    import matplotlib
    matplotlib.use("Agg")
    from labsupport import plots
    return plots


def _widgets():
    _plots()
    from labsupport import widgets
    return widgets


def _on_axes(draw):
    import matplotlib.pyplot as plt

    def call(*args, **kwargs):
        fig, ax = plt.subplots()
        try:
            return draw(ax, *args, **kwargs)
        finally:
            plt.close(fig)
    return call


def _closing(figure_fn):
    import matplotlib.pyplot as plt

    def call(*args, **kwargs):
        result = figure_fn(*args, **kwargs)
        plt.close("all")
        return result
    return call


def defined_in(obj, mod) -> bool:
    """``obj`` is defined in module ``mod``, or for a package (`labsupport.attention`) in one
    of its modules: a name each module re-exports from elsewhere is counted where it lives."""
    return obj.__module__ == mod.__name__ or (hasattr(mod, "__path__")
                                               and obj.__module__.startswith(mod.__name__ + "."))


def public_names():
    names = []
    for m in MODULES:
        mod = importlib.import_module(f"labsupport.{m}")
        names += [f"{m}.{n}" for n, obj in vars(mod).items()
                  if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                  and defined_in(obj, mod)]
    return names


def test_every_public_name_is_covered():
    names = set(public_names())
    assert names - set(CASES) - set(EXEMPT) == set(), "add a case (or an exemption with its reason)"
    assert set(CASES) - names == set() and set(EXEMPT) - names == set(), "a case names nothing public"


def same(a, b) -> bool:
    """Deep equality that understands tensors, arrays, modules, generators and records."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.isclose(a.detach(), b.detach(), rtol=0, atol=0, equal_nan=True).all())
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, torch.nn.Module):
        return same(a.state_dict(), b.state_dict()) and a.training == b.training
    if isinstance(a, torch.Generator):          # a generator passed in advances: that is what it is for
        return True
    if isinstance(a, D.Series):
        return same((a.timestamps, a.values, a.columns), (b.timestamps, b.values, b.columns))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):      # a ForecastTask: its fields
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, D.Standardizer):
        return same((a.mean, a.std), (b.mean, b.std))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return True


def global_state():
    return torch.get_rng_state(), np.random.get_state()[1].copy(), np.random.get_state()[2], random.getstate()


def side_effects(fn, args, kwargs) -> list[str]:
    """What calling ``fn(*args, **kwargs)`` changed that the caller holds: arguments (by
    position or keyword), the module a bound method belongs to, the global generators."""
    owner = getattr(fn, "__self__", None)
    owner = owner if isinstance(owner, torch.nn.Module) else None
    args_before, kwargs_before, owner_before = copy.deepcopy((args, kwargs, owner))
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    rng = global_state()
    fn(*args, **kwargs)
    after = global_state()
    found = [f"argument {i}" for i, (a, b) in enumerate(zip(args_before, args)) if not same(a, b)]
    found += [f"argument {k}=" for k in kwargs if not same(kwargs_before[k], kwargs[k])]
    found += ["its module"] if owner is not None and not same(owner_before, owner) else []
    found += ["the global torch generator"] if not torch.equal(after[0], rng[0]) else []
    found += ["NumPy's global generator"] if not (np.array_equal(after[1], rng[1]) and after[2] == rng[2]) else []
    found += ["the random module's generator"] if after[3] != rng[3] else []
    return found


def test_side_effects_are_seen():
    def scales_in_place(x, *, y):
        x.mul_(2)
        y[0] = 1.0
        return np.random.rand() + random.random() + torch.rand(1)
    assert side_effects(scales_in_place, (t(3),), {"y": np.zeros(2)}) == [
        "argument 0", "argument y=", "the global torch generator", "NumPy's global generator",
        "the random module's generator"]
    layer = built(torch.nn.Linear, 2, 2)
    assert side_effects(layer.reset_parameters, (), {}) == ["its module", "the global torch generator"]
    assert side_effects(lambda task: task.test[1].add_(1.0), (_tiny_task(),), {}) == ["argument 0"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_public_function_changes_neither_its_arguments_nor_the_global_generators(name, tmp_path):
    _TMP["path"] = tmp_path
    fn, args, kwargs = CASES[name]()
    assert side_effects(fn, args, kwargs) == [], f"{name} changed what the caller holds"


@pytest.mark.parametrize("call", [
    lambda: A.performer_attention(*qkv(), num_features=8),
    lambda: A.orthogonal_random_features(6, 4),
])
def test_drawing_from_the_global_generator_is_documented_where_it_happens(call):
    """generator=None draws from the global generator, as the docstrings say; an int seed
    or a torch.Generator (above) leaves it alone."""
    torch.manual_seed(7)
    rng = torch.get_rng_state()
    call()
    assert not torch.equal(torch.get_rng_state(), rng)


# --- the comparison protocol and fit on every path: success, failure, Stop --------------------------

class _Faulty(torch.nn.Module):
    """A tiny forecaster with dropout (training draws random numbers) that forecasts NaN in its
    ``nan_from``-th training call on, or raises KeyboardInterrupt (Stop) at its ``stop_at``-th."""

    def __init__(self, revin=False, nan_from=None, stop_at=None):
        super().__init__()
        self.inner, self.drop = _small_dlinear(revin), torch.nn.Dropout(0.2)
        self.revin, self.nan_from, self.stop_at, self.calls = self.inner.revin, nan_from, stop_at, 0

    def forward(self, x):
        y = self.inner(self.drop(x))
        if self.training:
            self.calls += 1
            if self.calls == self.stop_at:
                raise KeyboardInterrupt
            if self.nan_from is not None and self.calls >= self.nan_from:
                return y * float("nan")
        return y


def _counted(build, fail_on, error):
    """``build``, raising ``error`` at its ``fail_on``-th call (the first is the check before training)."""
    calls = [0]

    def wrapped(revin):
        calls[0] += 1
        if calls[0] == fail_on:
            raise error
        return build(revin)
    return wrapped


def _raises(fn, error):
    """``fn``, that must raise ``error``: the state after the raise is what is measured."""
    def call(*args, **kwargs):
        with pytest.raises(error):
            fn(*args, **kwargs)
    return call


# --- the ridge, as a property: random sizes, data and options, on success and on failure -----

def _ridge_case(seed):
    """Random sizes and options, and windows that are views (not contiguous), float32 or 64."""
    rng = np.random.default_rng(seed)
    L, T, C, N = (int(v) for v in (rng.integers(2, 12), rng.integers(1, 5), rng.integers(1, 4), rng.integers(3, 40)))
    dtype = (torch.float32, torch.float64)[seed % 2]
    g = torch.Generator().manual_seed(seed)
    data = [torch.randn(n, C, steps, generator=g, dtype=dtype).transpose(1, 2) for n, steps in
            ((N, L), (N, T), (N // 2 + 1, L), (N // 2 + 1, T))]                   # (n, steps, C) views
    penalties = [float(p) for p in rng.choice([0.0, 1e-3, 1.0, 1e3], size=int(rng.integers(1, 4)))]
    options = dict(lookback=L, horizon=T, channels=C, penalties=penalties, revin=bool(seed % 3 == 0))
    return options, (data[0], data[1]), (data[2], data[3])


def _compare_case(models, fn=C.compare, **options):
    return case(fn, _tiny_task(), models, revin=False, seeds=2, naive_period=6, epochs=2, batch_size=16,
                progress=False, **options)


COMPARE_PATHS = {
    "success": lambda: _compare_case({"A": C.Trainable(lambda revin: _Faulty(revin))}),
    "a run that raises": lambda: _compare_case(
        {"A": C.Trainable(_counted(_Faulty, 3, RuntimeError("boom"))), "B": C.Trainable(_Faulty)}),
    "a run that diverges with nothing to keep": lambda: _compare_case(
        {"A": C.Trainable(lambda revin: _Faulty(revin, nan_from=1)), "B": C.Trainable(_Faulty)}),
    "Stop during a build": lambda: _compare_case(
        {"A": C.Trainable(_counted(_Faulty, 3, KeyboardInterrupt())), "B": C.Trainable(_Faulty)}),
    "Stop inside fit": lambda: _compare_case({"A": C.Trainable(lambda revin: _Faulty(revin, stop_at=4))}),
    "an error that propagates": lambda: _compare_case(
        {"A": C.Trainable(_Faulty), "B": C.Trainable(lambda revin: Mo.LinearForecaster(
            lookback=12, horizon=4, kernel_size=5, revin=revin))}, fn=_raises(C.compare, ValueError)),
}


@pytest.mark.parametrize("path", list(COMPARE_PATHS))
def test_compare_leaves_the_task_and_the_random_states_alone_on_every_path(path):
    fn, args, kwargs = COMPARE_PATHS[path]()
    assert side_effects(fn, args, kwargs) == [], f"compare, {path}, changed what the caller holds"


SCHEDULES = {"constant": "constant", "type1": "type1", "type3": "type3",
             "a callable": lambda epoch: 1.0 / (1 + epoch), "warmup_cosine": S.warmup_cosine(3)}
FIT_PATHS = {                                   # what the model does; the error fit raises
    "success": (dict(), None),
    "diverges after an epoch": (dict(nan_from=4), FloatingPointError),      # 3 batches an epoch
    "diverges at once": (dict(nan_from=1), FloatingPointError),
    "Stop in the second epoch": (dict(stop_at=5), None),
}


def _fit_a_faulty_model(train, val, *, schedule, behaviour, error):
    model = built(_Faulty, **behaviour).train()
    call = Tr.fit if error is None else _raises(Tr.fit, error)
    return call(model, train, val, epochs=3, batch_size=16, schedule=schedule, progress=False)


@pytest.mark.parametrize("path", list(FIT_PATHS))
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_fit_leaves_the_data_and_the_random_states_alone_with_every_schedule_on_every_path(schedule, path):
    behaviour, error = FIT_PATHS[path]
    data = ((t(40, 12, 1), t(40, 3, 1, seed=1)), (t(10, 12, 1, seed=2), t(10, 3, 1, seed=3)))
    kwargs = dict(schedule=SCHEDULES[schedule], behaviour=behaviour, error=error)
    assert side_effects(_fit_a_faulty_model, data, kwargs) == [], f"fit, {schedule}, {path}"


@pytest.mark.parametrize("seed", range(12))
def test_the_ridge_changes_neither_the_callers_tensors_nor_the_random_streams(seed):
    options, train, val = _ridge_case(seed)
    fit = lambda tr, va: Mo.RidgeForecaster(**options).fit(tr, va)          # noqa: E731
    assert side_effects(fit, (train, val), {}) == []
    model = fit(train, val)
    assert side_effects(model.forward, (val[0],), {}) == []                  # nor the fitted model
    nan = val[0].clone()
    nan[0, 0, 0] = float("nan")
    failures = [
        (fit, (train, (nan, val[1])), ValueError),                           # a NaN in the windows
        (fit, (train, (val[0], torch.cat([val[1], val[1][:, :1]], 1))), ValueError),   # another horizon
        (fit, ((train[0], train[1][:-1]), val), ValueError),                 # unequal counts
        (fit, (train, val[0]), TypeError),                                   # not a pair
        (Mo.RidgeForecaster(**options).forward, (val[0],), RuntimeError),   # not fitted
        (model.forward, (val[0][:, :-1],), ValueError),                      # a window of another length
    ]
    for fn, args, error in failures:
        assert side_effects(_raises(fn, error), args, {}) == [], f"{error.__name__} path changed something"


def test_the_ridges_refusal_of_non_finite_solutions_changes_nothing():
    x, y = torch.zeros(20, 8, 1), torch.randn(20, 2, 1, generator=torch.Generator().manual_seed(0))
    fit = lambda tr, va: Mo.RidgeForecaster(lookback=8, horizon=2, penalties=[0.0]).fit(tr, va)   # noqa: E731
    assert side_effects(_raises(fit, ValueError), ((x, y), (x, y)), {}) == []
