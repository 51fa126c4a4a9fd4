"""Nothing silently wrong: every bad input is rejected by name, with what was expected and
how to fix it, and nothing the user holds is changed (`fit`'s cases are in test_train.py)."""
import re
from functools import partial

import numpy as np
import pytest
import torch

from helpers import qkv
from labsupport.attention import (
    KERNELS,
    flash_attention,
    linear_attention,
    local_attention,
    longformer_attention,
    naive_attention,
    performer_attention,
    sdpa,
)
from labsupport.data import (
    Series,
    Standardizer,
    load_csv,
    load_vic_elec,
    make_windows,
    patchify,
    temporal_split,
)
from labsupport.layers import MultiHeadAttention
from labsupport.memory import SegmentRecurrentEncoder, run_segments
from labsupport.models import PatchTransformer


@pytest.fixture(scope="module")
def vic():
    return load_vic_elec()


# --- a Standardizer refuses data with another number of channels ------------------

def test_standardizer_refuses_another_number_of_channels():
    scaler = Standardizer().fit(np.random.default_rng(0).normal(size=(50, 2)))
    one = np.ones((10, 1), np.float32)
    for method in (scaler.transform, scaler.inverse_transform):
        with pytest.raises(ValueError, match=r"fitted on 2 channels, but x has 1 on its last axis "
                                             r"\(shape \(10, 1\)\); pass channels=\[\.\.\.\]"):
            method(one)
        with pytest.raises(ValueError, match=r"channels \[0\] select 1 channel, but x has 2"):
            method(np.ones((10, 2)), channels=[0])
        with pytest.raises(ValueError, match="fitted on 2 channels, but x has 3"):
            method(torch.ones(4, 5, 3))
    np.testing.assert_allclose(scaler.transform(one, channels=[1]), (one - scaler.mean[1]) / scaler.std[1])


def test_evaluate_refuses_a_scaler_of_another_width():
    from labsupport.train import evaluate
    scaler = Standardizer().fit(np.random.default_rng(0).normal(size=(50, 2)))
    x, y = torch.randn(8, 12, 1), torch.randn(8, 3, 1)
    with pytest.raises(ValueError, match="fitted on 2 channels, but x has 1"):
        evaluate(lambda inputs: inputs[:, -3:], (x, y), scaler=scaler)


# --- temporal_split returns parts of its own ------------------------------------

def test_scaling_one_part_in_place_changes_neither_the_others_nor_the_series(vic):
    before = vic.values.copy()
    train, val, test = temporal_split(vic, context=336)
    shared = val.values[:336].copy()                         # val's context rows are train's last rows
    train.values[...] = 0.0
    val.values[:] *= 2.0
    np.testing.assert_array_equal(vic.values, before)
    np.testing.assert_array_equal(train.values[-336:], 0.0)
    np.testing.assert_array_equal(val.values[:336], 2.0 * shared)
    assert not np.shares_memory(test.values, vic.values)


# --- load_csv and Series -------------------------------------------------------

def _write(tmp_path, text):
    path = tmp_path / "tiny.csv"
    path.write_bytes(text.encode("utf-8"))
    return path


def test_load_csv_refuses_a_repeated_column_name(tmp_path):
    path = _write(tmp_path, "time,a,a\n2020-01-01T00:00,1,2\n")
    with pytest.raises(ValueError, match=r"tiny.csv line 1: column 'a' appears 2 times in the header "
                                         r"\['time', 'a', 'a'\]; give each column its own name"):
        load_csv(path)
    ok = _write(tmp_path, "time,a,b,b\n2020-01-01T00:00,1,2,3\n")
    assert load_csv(ok, columns=["a"]).values.tolist() == [[1.0]]      # the repeated one is not read
    with pytest.raises(ValueError, match="columns must be distinct names, got"):
        load_csv(ok, columns=["a", "a"])


def test_load_csv_reads_excels_byte_order_mark(tmp_path):
    s = load_csv(_write(tmp_path, "\ufefftime,a\r\n2020-01-01T00:00,1\r\n2020-01-01T01:00,2\r\n"))
    assert s.columns == ("a",) and s.values[:, 0].tolist() == [1.0, 2.0]


def test_load_csv_refuses_a_file_cut_inside_its_last_line(tmp_path):
    with pytest.raises(ValueError, match=r"tiny.csv line 3: the file ends inside this line "
                                         r"\('2020-01-01T01:00,4'\) "
                                         r"without a line break: it looks cut short"):
        load_csv(_write(tmp_path, "time,a\n2020-01-01T00:00,1\n2020-01-01T01:00,4"))


def test_load_csv_accepts_a_last_line_without_break_when_its_checksum_is_verified(tmp_path):
    import hashlib
    path = _write(tmp_path, "time,a\n2020-01-01T00:00,1\n2020-01-01T01:00,42")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_csv(path, sha256=digest).values[:, 0].tolist() == [1.0, 42.0]


def test_series_refuses_unsorted_or_repeated_timestamps():
    t = np.array(["2020-01-01T00:00", "2020-01-01T02:00", "2020-01-01T01:00"], dtype="datetime64[m]")
    values = np.zeros((3, 1), np.float32)
    with pytest.raises(ValueError, match=r"timestamps must be strictly increasing: row 2 "
                                         r"\(2020-01-01T01:00\) does not come after row 1 "
                                         r"\(2020-01-01T02:00\); sort"):
        Series(t, values, ("a",))
    with pytest.raises(ValueError, match="row 1 .* does not come after row 0"):
        Series(t[[0, 0, 1]], values, ("a",))
    with pytest.raises(TypeError, match=r"timestamps must be a numpy datetime64 array, got int64"):
        Series(np.arange(3), values, ("a",))
    with pytest.raises(TypeError, match=r"values must be a numpy array \(T, C\), got list"):
        Series(t[[0, 2, 1]], [[0.0]] * 3, ("a",))
    with pytest.raises(ValueError, match=r"columns must be distinct names, got \('a', 'a'\)"):
        Series(t[[0, 2, 1]], np.zeros((3, 2)), ("a", "a"))


# --- a constant training column, a NaN ------------------------------------------

def test_standardizer_centres_a_constant_column_instead_of_dividing_by_eps():
    train = np.stack([np.arange(10.0), np.zeros(10)], axis=1)                 # channel 1 is constant
    scaler = Standardizer().fit(train)
    assert scaler.std[1] == 1.0
    np.testing.assert_allclose(scaler.transform(np.array([[0.0, 1.0]]))[0, 1], 1.0)


def test_standardizer_refuses_nan_or_inf_in_its_training_data():
    train = np.ones((10, 2))
    train[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"fit got 1 NaN or inf values \(first at row 3, channel 1\); "
                                         r"fill or drop them first"):
        Standardizer().fit(train)


# --- kernels: empty inputs, sizes, masks and rates, named ------------------------------

@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("causal", [False, True])
def test_an_empty_sequence_gives_an_empty_output(name, causal):
    q, k, v = qkv(0)
    kernel = KERNELS[name] if name != "longformer" else (
        lambda q, k, v, **kw: longformer_attention(q, k, v, window=2, global_tokens=[], **kw))
    assert kernel(q, k, v, is_causal=causal).shape == (2, 3, 0, 6)


@pytest.mark.parametrize("kernel", [naive_attention, sdpa, linear_attention,
                                    partial(performer_attention, num_features=4, generator=0)])
def test_no_keys_give_zeros_as_in_sdpa(kernel):
    out = kernel(*qkv(3, 0))
    assert out.shape == (2, 3, 3, 6) and out.abs().max() == 0


def test_run_segments_names_an_empty_series():
    encoder = SegmentRecurrentEncoder(8, 2, 1, mem_len=4)
    with pytest.raises(ValueError, match=r"x has no time steps: expected \(B, T, d_model\) with T >= 1, "
                                         r"got shape \(2, 0, 8\)"):
        run_segments(encoder, torch.randn(2, 0, 8), 4)


def test_numpy_integer_sizes_are_sizes():
    n = np.int64
    q, k, v = qkv(6)
    torch.testing.assert_close(local_attention(q, k, v, window=n(2)), local_attention(q, k, v, window=2))
    torch.testing.assert_close(flash_attention(q, k, v, block_size=n(4)),
                               flash_attention(q, k, v, block_size=4))
    model = PatchTransformer(lookback=n(48), horizon=n(6), patch_len=n(12), stride=n(12), d_model=n(8),
                             n_heads=n(2))
    assert model(torch.randn(2, 48, 1)).shape == (2, 6, 1) and type(model.lookback) is int
    assert MultiHeadAttention(n(8), n(2))(torch.randn(1, 3, 8)).shape == (1, 3, 8)
    assert SegmentRecurrentEncoder(8, 2, 1, mem_len=n(4)).mem_len == 4
    x, y = make_windows(np.arange(20.0), n(5), n(2))
    assert x.shape == (14, 5, 1) and patchify(np.arange(12.0), n(4)).shape == (3, 4)
    with pytest.raises(ValueError, match="lookback must be a positive int, got 0"):
        make_windows(np.arange(20.0), n(0), 2)
    with pytest.raises(ValueError, match="patch_len must be a positive int, got True"):
        patchify(np.arange(12.0), True)


@pytest.mark.parametrize("kernel", [naive_attention, sdpa, flash_attention])
@pytest.mark.parametrize("shape", [(6,), ()])
def test_a_key_mask_of_one_or_no_dimension_broadcasts_in_every_kernel(kernel, shape):
    q, k, v = qkv(5, 6)
    keep = torch.tensor([True, True, False, True, False, True])
    mask = keep if shape else torch.tensor(True)
    full = mask.expand(5, 6)
    torch.testing.assert_close(kernel(q, k, v, mask=mask), naive_attention(q, k, v, mask=full))


@pytest.mark.parametrize("kernel", [naive_attention, sdpa, flash_attention])
def test_a_row_with_bias_minus_infinity_everywhere_gives_zero_in_every_kernel(kernel):
    q, k, v = qkv(4)
    bias = torch.zeros(4, 4)
    bias[2] = float("-inf")
    q.requires_grad_(True)
    out = kernel(q, k, v, bias=bias)
    assert out[..., 2, :].abs().max() == 0 and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


@pytest.mark.parametrize("name", ["naive", "sdpa", "flash", "local", "longformer", "linear", "performer"])
def test_a_non_finite_scale_is_refused(name):
    q, k, v = qkv(4)
    for scale in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"scale must be a finite number, got {scale}"):
            KERNELS[name](q, k, v, scale=scale)


@pytest.mark.parametrize("kernel", [naive_attention, sdpa, partial(local_attention, window=1),
                                    partial(longformer_attention, window=1, global_tokens=[0])],
                         ids=["naive", "sdpa", "local", "longformer"])
def test_dropout_p_outside_zero_one_is_refused(kernel):
    """One validator for every dropout rate (validation.check_dropout): 1.0 would drop every weight."""
    q, k, v = qkv(4)
    for p in (-0.1, 1.0, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match=rf"dropout_p must be a number in \[0, 1\), got {p}"):
            kernel(q, k, v, dropout_p=p)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got -0.1"):
        MultiHeadAttention(8, 2, dropout=-0.1)


def test_global_tokens_as_a_bool_mask_is_refused():
    q, k, v = qkv(5)
    flags = torch.tensor([True, False, False, False, True])
    with pytest.raises(TypeError, match=r"global_tokens are positions, got a bool tensor of shape \(5,\); "
                                        r"for a bool mask .* pass mask.nonzero\(\).flatten\(\)"):
        longformer_attention(q, k, v, window=1, global_tokens=flags)
    positions = flags.nonzero().flatten()
    torch.testing.assert_close(longformer_attention(q, k, v, window=1, global_tokens=positions),
                               longformer_attention(q, k, v, window=1, global_tokens=[0, 4]))


def test_patch_transformer_names_zero_heads():
    with pytest.raises(ValueError, match="n_heads must be a positive int, got 0"):
        PatchTransformer(lookback=48, horizon=6, n_heads=0)


# --- data: values beyond float32, and every numeric option ----------------------------------

F32_RANGE = r"float32's range \(normal numbers 1\.2e-38 to 3\.4e38 in size\)"


@pytest.mark.parametrize("value", ["3.5e38", "-1e39", "1e300", "3.4028236e38"])
def test_load_csv_refuses_a_value_beyond_float32_naming_file_line_column_and_value(tmp_path, value):
    path = _write(tmp_path, f"time,a,load_kw\n2020-01-01T00:00,1,2\n2020-01-01T01:00,1,{value}\n")
    with pytest.raises(ValueError, match=rf"tiny.csv line 3: column 'load_kw' holds '{re.escape(value)}', "
                                         rf"outside {F32_RANGE}, which the series is kept in: rescale "
                                         r"the column first \(e.g. kW -> MW, divide by 1000\)"):
        load_csv(path)


@pytest.mark.parametrize("value", ["1e-39", "-1e-45", "1e-50"])
def test_load_csv_refuses_a_value_float32_would_keep_as_a_subnormal_or_zero(tmp_path, value):
    path = _write(tmp_path, f"time,a\n2020-01-01T00:00,{value}\n")
    with pytest.raises(ValueError, match=rf"line 2: column 'a' holds '{re.escape(value)}', "
                                         rf"outside {F32_RANGE}, "
                                         r".*float32 would keep it with fewer significant digits, or as 0: "
                                         r"rescale the column first \(e.g. W -> mW, multiply by 1000\)"):
        load_csv(path)


def test_load_csv_keeps_float32s_extremes_and_zero(tmp_path):
    path = _write(tmp_path, "time,a\n2020-01-01T00:00,3.4028234e38\n2020-01-01T01:00,-1.1754944e-38\n"
                            "2020-01-01T02:00,0\n2020-01-01T03:00,-0.0\n")
    values = load_csv(path).values[:, 0]
    assert np.isfinite(values).all() and values[0] == np.finfo(np.float32).max
    assert values[1] == -np.finfo(np.float32).tiny and values[2] == 0.0


def test_ett_loads_a_value_beyond_float32_as_a_refusal(tmp_path):
    from helpers import ett_bytes, write_ett
    from labsupport.data import load_ett
    content = ett_bytes("ETTh1").replace(b"2016-07-01 02:00:00,0.002", b"2016-07-01 02:00:00,9e99", 1)
    write_ett(tmp_path, content=content)
    with pytest.raises(ValueError, match=rf"ETTh1.csv line 4: column 'HUFL' holds '9e99', "
                                         rf"outside {F32_RANGE}"):
        load_ett("ETTh1", tmp_path, sha256=None)


def test_series_refuses_values_float32_cannot_hold():
    t = np.array(["2020-01-01T00:00", "2020-01-01T01:00"], dtype="datetime64[m]")
    with pytest.raises(ValueError, match=rf"values row 1, channel 0 holds 1e\+39, "
                                         rf"outside {F32_RANGE}.*rescale"):
        Series(t, np.array([[1.0], [1e39]]), ("a",))
    with pytest.raises(TypeError, match=r"values must hold real numbers \(float or int\), got dtype <U1"):
        Series(t, np.array([["a"], ["b"]]), ("a",))
    kept = Series(t, np.array([[1.0], [np.nan]]), ("a",))                 # a gap stays a gap (NaN)
    assert np.isnan(kept.values[1, 0])


BAD_INTS = [0, -1, 2.0, True, float("nan"), float("inf"), "3"]


@pytest.mark.parametrize("value", BAD_INTS)
@pytest.mark.parametrize("arg", ["lookback", "horizon", "stride"])
def test_make_windows_names_a_bad_size(arg, value):
    sizes = dict(lookback=3, horizon=2, stride=1) | {arg: value}
    with pytest.raises(ValueError, match=rf"{arg} must be a positive int, got {re.escape(repr(value))}"):
        make_windows(np.arange(20.0), **sizes)


@pytest.mark.parametrize("value", BAD_INTS)
@pytest.mark.parametrize("arg", ["patch_len", "stride"])
def test_patchify_names_a_bad_size(arg, value):
    sizes = dict(patch_len=4, stride=2) | {arg: value}
    with pytest.raises(ValueError, match=rf"{arg} must be a positive int, got {re.escape(repr(value))}"):
        patchify(np.arange(12.0), **sizes)


@pytest.mark.parametrize("value", [-1, 2.5, True, float("nan"), float("inf"), "24"])
def test_temporal_split_and_load_ett_name_a_bad_context(vic, tmp_path, value):
    from labsupport.data import ett_borders, load_ett
    message = rf"context must be an int >= 0, got {re.escape(repr(value))}"
    with pytest.raises(ValueError, match=message):
        temporal_split(vic, context=value)
    with pytest.raises(ValueError, match=message):
        ett_borders("ETTh1", context=value)
    with pytest.raises(ValueError, match=message):
        load_ett("ETTh1", tmp_path, download=False, context=value)


def test_load_ett_refuses_a_download_flag_that_is_not_a_bool(tmp_path):
    from labsupport.data import load_ett
    with pytest.raises(TypeError, match=r"download must be a bool \(True or False\), got str 'no'"):
        load_ett("ETTh1", tmp_path, download="no")


@pytest.mark.parametrize("eps", [0, -1e-8, float("nan"), float("inf"), True, "1e-8", None])
def test_standardizer_names_a_bad_eps(eps):
    with pytest.raises(ValueError, match=rf"eps must be a finite number > 0, got {re.escape(repr(eps))}"):
        Standardizer(eps=eps)


# --- report: a verdict is a bool; a table's rows fit its headers ------------------------------

@pytest.mark.parametrize("holds", [True, False, np.bool_(True), np.float64(1.0) < 2, torch.tensor(True),
                                   torch.tensor([False]), torch.ones(1, 1, dtype=torch.bool)])
def test_verdict_prints_a_bool_numpy_bool_or_one_element_bool_tensor(holds, capsys):
    from labsupport.report import verdict
    verdict("a claim", holds, width=10)
    assert capsys.readouterr().out == f"a claim    {bool(holds)}\n"


@pytest.mark.parametrize("holds, kind", [
    ("False", "str 'False'"), (float("nan"), "float nan"), (0.0, "float 0.0"), (None, "NoneType"),
    (1, "int 1"), (np.float64(0.5), "float64 0.5"), ([True], "list"),
    (torch.tensor([True, False]), r"a bool tensor of shape \(2,\)"),
    (torch.tensor(1.0), r"a torch.float32 tensor of shape \(\)"),
])
def test_verdict_refuses_anything_but_a_bool_naming_the_claim_and_the_type(holds, kind, capsys):
    from labsupport.report import checklist, verdict
    message = (rf"verdict 'rows sum to one': holds must be a bool, a NumPy bool or a one-element bool "
               rf"tensor, got {kind}")
    with pytest.raises(TypeError, match=message):
        verdict("rows sum to one", holds)
    with pytest.raises(TypeError, match=rf"checklist row 1 \('second'\): holds must be a bool, "
                                        rf".* got {kind}"):
        checklist([("first", True), ("second", holds)])
    assert capsys.readouterr().out == ""                    # nothing half-printed


@pytest.mark.parametrize("rows, message", [
    ([("a claim", True), ("only a claim",)], r"checklist row 1 has 1 item, expected 2: \(claim, holds\)"),
    ([("a claim", True, "why")], r"checklist row 0 has 3 items, expected 2: \(claim, holds\)"),
    (["a claim"], r"checklist row 0 must be a \(claim, holds\) pair, got str 'a claim'"),
    ([(3, True)], r"checklist row 0: the claim must be a str, got int 3"),
])
def test_checklist_names_a_malformed_row(rows, message, capsys):
    from labsupport.report import checklist
    with pytest.raises((ValueError, TypeError), match=message):
        checklist(rows)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("rows, message", [
    ([[1, 2.5], [3]], r"table row 1 has 1 value, but there are 2 headers \(\['a', 'b'\]\)"),
    ([[1, 2.5, 7]], r"table row 0 has 3 values, but there are 2 headers"),
    ([[1, 2.5], 5], r"table row 1 must be a sequence of 2 values, got int 5"),
])
def test_table_names_a_row_of_the_wrong_length(rows, message, capsys):
    from labsupport.report import table
    with pytest.raises(ValueError, match=message):
        table(["a", "b"], rows)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("formats, error, message", [
    ({2: "{:.1f}"}, ValueError, r"table formats name column 2, but there are 2 columns \(0 'a', 1 'b'\)"),
    ({-1: "{:.1f}"}, ValueError, r"table formats name column -1, but there are 2 columns"),
    ({"b": "{:.1f}"}, ValueError, r"table formats name column 'b', .* formats map a column index"),
    ({1: 3}, TypeError, r"table formats\[1\] must be a format string such as '\{:.1f\}' or a callable, "
                        r"got int"),
    ({1: "{:.1f}"}, ValueError, r"table row 1, column 1 \('b'\): format '\{:.1f\}' cannot format 'n/a'"),
])
def test_table_names_a_format_for_no_column_or_one_that_fails(formats, error, message, capsys):
    from labsupport.report import table
    with pytest.raises(error, match=message):
        table(["a", "b"], [[1, 2.5], [3, "n/a"]], formats=formats)
    assert capsys.readouterr().out == ""


def test_table_prints_rows_under_right_aligned_headers(capsys):
    from labsupport.report import table
    table(["model", "mse"], [("ridge", 0.0941), ("naive", 0.5)], formats={1: "{:.3f}"})
    assert capsys.readouterr().out == "model    mse\nridge  0.094\nnaive  0.500\n"


# --- models: every numeric and flag option refused by name ---------------------------------

from labsupport.models import (  # noqa: E402
    CausalConv1d,
    GRUForecaster,
    InstanceNorm,
    LinearForecaster,
    RidgeForecaster,
    TCNForecaster,
    TemporalBlock,
)

SIZES = dict(lookback=48, horizon=6)
FORECASTERS = {"GRUForecaster": GRUForecaster, "TCNForecaster": TCNForecaster,
               "LinearForecaster": LinearForecaster, "PatchTransformer": PatchTransformer,
               "RidgeForecaster": RidgeForecaster}
INT_OPTIONS = {"GRUForecaster": ["hidden", "layers"], "TCNForecaster": ["hidden", "kernel_size"],
               "LinearForecaster": ["kernel_size"], "RidgeForecaster": [],
               "PatchTransformer": ["patch_len", "stride", "d_model", "n_heads", "n_layers", "d_ff"]}
BOOL_OPTIONS = {"GRUForecaster": ["revin"], "TCNForecaster": ["revin"],
                "LinearForecaster": ["revin", "individual"], "RidgeForecaster": ["revin"],
                "PatchTransformer": ["revin", "causal", "norm_first"]}
DROPOUT_OPTIONS = {"GRUForecaster": ["dropout"], "TCNForecaster": ["dropout"], "LinearForecaster": [],
                   "RidgeForecaster": [], "PatchTransformer": ["dropout", "attn_dropout"]}


def _cases(options, values, common=()):
    """(class name, option, bad value) for every option of every class in ``options``."""
    return [(cls, arg, value) for cls, args in options.items() for arg in [*common, *args]
            for value in values]


@pytest.mark.parametrize("cls, arg, value", _cases(INT_OPTIONS, [0, -2, 2.0, True, float("nan"), "8"],
                                                   common=("lookback", "horizon", "channels")))
def test_every_size_of_every_forecaster_is_a_positive_int(cls, arg, value):
    with pytest.raises(ValueError, match=rf"{arg} must be a positive int, got {re.escape(repr(value))}"):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("cls, arg, value", _cases(BOOL_OPTIONS, ["yes", 1, 0.0, None]))
def test_every_flag_of_every_forecaster_is_a_bool(cls, arg, value):
    kind = type(value).__name__
    with pytest.raises(TypeError, match=rf"{arg} must be a bool \(True or False\), got {kind} "
                                        rf"{re.escape(repr(value))}"):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("cls, arg, value", _cases(DROPOUT_OPTIONS, [-0.1, 1.0, float("nan"), True, "0.1"]))
def test_every_dropout_is_a_rate_in_zero_one(cls, arg, value):
    with pytest.raises(ValueError, match=rf"{arg} must be a number in \[0, 1\), "
                                         rf"got {re.escape(repr(value))}"):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("penalties", [[float("nan")], [1.0, float("inf")], [-1.0], [True], ["1"], []])
def test_ridge_refuses_a_penalty_that_would_make_every_forecast_nan(penalties):
    with pytest.raises(ValueError, match=rf"penalties must be a non-empty sequence of finite numbers >= 0, "
                                         rf"got {re.escape(repr(tuple(penalties)))}"):
        RidgeForecaster(**SIZES, penalties=penalties)


@pytest.mark.parametrize("penalties", [5.0, "1e-3"])
def test_ridge_penalties_are_a_sequence(penalties):
    with pytest.raises(TypeError, match=rf"penalties must be a sequence of numbers, e.g. \[1.0, 10.0\], got "
                                        rf"{type(penalties).__name__}"):
        RidgeForecaster(**SIZES, penalties=penalties)


def test_ridge_takes_numpy_penalties():
    ridge = RidgeForecaster(**SIZES, penalties=np.array([0.5, 2.0]))
    assert ridge.penalties == (0.5, 2.0) and all(type(p) is float for p in ridge.penalties)


@pytest.mark.parametrize("eps", [0.0, -1e-5, float("nan"), float("inf"), True])
def test_ridge_and_instance_norm_refuse_an_eps_that_divides_by_zero(eps):
    message = rf"eps must be a finite number > 0, got {re.escape(repr(eps))}"
    with pytest.raises(ValueError, match=message):
        RidgeForecaster(**SIZES, eps=eps)
    with pytest.raises(ValueError, match=message):
        InstanceNorm(3, eps=eps)


def test_instance_norm_names_bad_channels_and_affine():
    with pytest.raises(ValueError, match="channels must be a positive int, got 0"):
        InstanceNorm(0)
    with pytest.raises(TypeError, match=r"affine must be a bool \(True or False\), got str 'no'"):
        InstanceNorm(2, affine="no")


@pytest.mark.parametrize("value", [-1, 2.5, True, float("nan")])
def test_patch_transformer_time_features_is_a_count(value):
    with pytest.raises(ValueError, match=rf"time_features must be an int >= 0, got {re.escape(repr(value))}"):
        PatchTransformer(**SIZES, time_features=value)


def test_patch_transformer_names_an_unknown_backbone():
    with pytest.raises(ValueError, match=r"backbone must be one of 'book', 'patchtst', got 'vanilla'"):
        PatchTransformer(**SIZES, backbone="vanilla")


@pytest.mark.parametrize("build, message", [
    (lambda: CausalConv1d(2, 3, kernel_size=0), "kernel_size must be a positive int, got 0"),
    (lambda: CausalConv1d(2, 3, kernel_size=3, dilation=0), "dilation must be a positive int, got 0"),
    (lambda: CausalConv1d(2.0, 3, kernel_size=3), "in_channels must be a positive int, got 2.0"),
    (lambda: TemporalBlock(2, 3, kernel_size=3, dilation=1.5), "dilation must be a positive int, got 1.5"),
    (lambda: TemporalBlock(2, 3, 3, 1, dropout=float("nan")),
     r"dropout must be a number in \[0, 1\), got nan"),
])
def test_tcn_layers_name_a_bad_size(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_ridge_never_keeps_a_penalty_whose_solution_is_not_finite():
    """Penalty 0 on inputs without variance solves 0 / 0: NaN weights, which must lose."""
    x, y = torch.zeros(20, 8, 1), torch.randn(20, 2, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"RidgeForecaster.fit: no penalty of \(0.0,\) gives a finite "
                                         r"validation MSE .* pass larger penalties"):
        RidgeForecaster(lookback=8, horizon=2, penalties=[0.0]).fit((x, y), (x, y))
    ridge = RidgeForecaster(lookback=8, horizon=2, penalties=[0.0, 1.0]).fit((x, y), (x, y))
    assert ridge.penalty == 1.0 and torch.isfinite(ridge(x)).all()


@pytest.mark.parametrize("channels", [[2], [-1], [0.0], [True], 0, "0"])
def test_standardizer_names_channels_that_are_not_indices_of_its_fitted_channels(channels):
    scaler = Standardizer().fit(np.random.default_rng(0).normal(size=(50, 2)))
    with pytest.raises((ValueError, TypeError), match=r"channels must be a list of indices of the 2 fitted "
                                                      rf"channels \(0-1\), got {re.escape(repr(channels))}"):
        scaler.transform(np.ones((3, 1)), channels=channels)
