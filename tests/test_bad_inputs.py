"""Nothing silently wrong: every bad input is rejected by name, with what was expected and
how to fix it, and nothing the user holds is changed (`fit`'s cases are in test_train.py)."""
import re
from functools import partial

import numpy as np
import pytest
import torch

from helpers import policy_error, qkv
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


# --- a Standardizer refuses data with another number of channels -------------------------

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


# --- temporal_split returns parts of its own -------------------------------------------

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


# --- load_csv and Series --------------------------------------------------------------

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


# --- a constant training column, a NaN -------------------------------------------------

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
    with pytest.raises(TypeError, match="patch_len must be a positive int, got True"):
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
        with pytest.raises(policy_error(p), match=rf"dropout_p must be a number in \[0, 1\), got {p}"):
            kernel(q, k, v, dropout_p=p)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got -0.1"):
        MultiHeadAttention(8, 2, dropout=-0.1)


# --- non-finite values: a mask does not hide them, so every kernel refuses them by position ----------

def _kernels_with_linformer():
    from labsupport.attention import LinformerAttention
    torch.manual_seed(0)
    return {**KERNELS, "linformer": LinformerAttention(seq_len=6, k=3)}


@pytest.mark.parametrize("name", sorted([*KERNELS, "linformer"]))
@pytest.mark.parametrize("where, value", [("q", float("nan")), ("k", float("inf")), ("v", float("nan")),
                                          ("v", float("-inf"))])
def test_every_kernel_refuses_a_non_finite_input_naming_its_position(name, where, value):
    """A NaN in a value row that a mask hides once turned every output NaN (0 x NaN = NaN), the
    causal past's included; every kernel refuses it instead, by tensor and position."""
    q, k, v = (t.clone() for t in qkv(6))
    {"q": q, "k": k, "v": v}[where][1, 2, 4, 3] = value
    kernel = _kernels_with_linformer()[name]
    with pytest.raises(ValueError, match=rf"^{where} holds {value} at \(1, 2, 4, :\) \(batch, head, "
                                         rf"position, :\) of {where} \(2, 3, 6, \d\): attention needs "
                                         r"finite q, k and v, since a mask does not hide NaN or inf: "
                                         r".*torch.nan_to_num"):
        kernel(q, k, v)


@pytest.mark.parametrize("name", ["naive", "sdpa", "flash", "local", "longformer", "linear", "performer"])
def test_nan_after_t_never_silently_changes_a_causal_output_up_to_t(name):
    """The causal property with NaN as the change: outputs up to t stay as they were, or the
    call is refused; never a NaN in the past."""
    q, k, v = qkv(8)
    before = KERNELS[name](q, k, v, is_causal=True)
    for t in range(7):
        changed = [x.clone() for x in (q, k, v)]
        for x in changed:
            x[..., t + 1:, :] = float("nan")
        try:
            after = KERNELS[name](*changed, is_causal=True)
        except ValueError as err:
            assert "holds nan at" in str(err)
            continue
        torch.testing.assert_close(after[..., :t + 1, :], before[..., :t + 1, :])


def test_a_transformer_block_refuses_nan_rather_than_let_the_past_read_it():
    """In a causal block a NaN at position 4 once made positions 0-3 NaN too: a causal model
    that looked as if it read the future."""
    from labsupport.layers import TransformerBlock
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 16).eval()
    x = torch.randn(1, 6, 8)
    x[0, 4, 0] = float("nan")
    with pytest.raises(ValueError, match=r"^q holds nan at \(0, 0, 4, :\) \(batch, head, position, :\)"):
        block(x, is_causal=True)


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
    message = rf"{arg} must be a positive int, got {re.escape(repr(value))}"
    with pytest.raises(policy_error(value, integer=True), match=message):
        make_windows(np.arange(20.0), **sizes)


@pytest.mark.parametrize("value", BAD_INTS)
@pytest.mark.parametrize("arg", ["patch_len", "stride"])
def test_patchify_names_a_bad_size(arg, value):
    sizes = dict(patch_len=4, stride=2) | {arg: value}
    message = rf"{arg} must be a positive int, got {re.escape(repr(value))}"
    with pytest.raises(policy_error(value, integer=True), match=message):
        patchify(np.arange(12.0), **sizes)


@pytest.mark.parametrize("value", [-1, 2.5, True, float("nan"), float("inf"), "24"])
def test_temporal_split_and_load_ett_name_a_bad_context(vic, tmp_path, value):
    from labsupport.data import ett_borders, load_ett
    message = rf"context must be an int >= 0, got {re.escape(repr(value))}"
    error = policy_error(value, integer=True)
    with pytest.raises(error, match=message):
        temporal_split(vic, context=value)
    with pytest.raises(error, match=message):
        ett_borders("ETTh1", context=value)
    with pytest.raises(error, match=message):
        load_ett("ETTh1", tmp_path, download=False, context=value)


def test_load_ett_refuses_a_download_flag_that_is_not_a_bool(tmp_path):
    from labsupport.data import load_ett
    with pytest.raises(TypeError, match=r"download must be a bool \(True or False\), got str 'no'"):
        load_ett("ETTh1", tmp_path, download="no")


@pytest.mark.parametrize("eps", [0, -1e-8, float("nan"), float("inf"), True, "1e-8", None])
def test_standardizer_names_a_bad_eps(eps):
    message = rf"eps must be a finite number > 0, got {re.escape(repr(eps))}"
    with pytest.raises(policy_error(eps), match=message):
        Standardizer(eps=eps)


# --- report and display: a claim holds a bool; a table's rows fit its headers ------------------------------

@pytest.mark.parametrize("holds, kind", [
    ("False", "str 'False'"), (float("nan"), "float nan"), (0.0, "float 0.0"), (None, "NoneType"),
    (1, "int 1"), (np.float64(0.5), "float64 0.5"), ([True], "list"),
    (torch.tensor([True, False]), r"a bool tensor of shape \(2,\)"),
    (torch.tensor(1.0), r"a torch.float32 tensor of shape \(\)"),
])
def test_a_claim_refuses_anything_but_a_bool_naming_the_claim_and_the_type(holds, kind, capsys):
    from labsupport.report import claim
    message = (rf"claim 'rows sum to one': holds must be a bool, a NumPy bool or a one-element bool "
               rf"tensor, got {kind}")
    with pytest.raises(TypeError, match=message):
        claim("rows sum to one", holds)
    assert capsys.readouterr().out == ""                    # nothing half-printed


@pytest.mark.parametrize("rows, message", [
    ([[1, 2.5], [3]], r"table row 1 has 1 value, but there are 2 headers \(\['a', 'b'\]\)"),
    ([[1, 2.5, 7]], r"table row 0 has 3 values, but there are 2 headers"),
    ([[1, 2.5], 5], r"table row 1 must be a sequence of 2 values, got int 5"),
])
def test_table_names_a_row_of_the_wrong_length(rows, message, capsys):
    from labsupport.display import table
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
    from labsupport.display import table
    with pytest.raises(error, match=message):
        table(["a", "b"], [[1, 2.5], [3, "n/a"]], formats=formats)
    assert capsys.readouterr().out == ""


def test_table_prints_rows_under_right_aligned_headers(capsys):
    from labsupport.display import table
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
    message = rf"{arg} must be a positive int, got {re.escape(repr(value))}"
    with pytest.raises(policy_error(value, integer=True), match=message):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("cls, arg, value", _cases(BOOL_OPTIONS, ["yes", 1, 0.0, None]))
def test_every_flag_of_every_forecaster_is_a_bool(cls, arg, value):
    kind = type(value).__name__
    with pytest.raises(TypeError, match=rf"{arg} must be a bool \(True or False\), got {kind} "
                                        rf"{re.escape(repr(value))}"):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("cls, arg, value", _cases(DROPOUT_OPTIONS, [-0.1, 1.0, float("nan"), True, "0.1"]))
def test_every_dropout_is_a_rate_in_zero_one(cls, arg, value):
    with pytest.raises(policy_error(value), match=rf"{arg} must be a number in \[0, 1\), "
                                         rf"got {re.escape(repr(value))}"):
        FORECASTERS[cls](**(SIZES | {arg: value}))


@pytest.mark.parametrize("penalties, error", [([float("nan")], ValueError), ([1.0, float("inf")], ValueError),
                                              ([-1.0], ValueError), ([True], TypeError), (["1"], TypeError),
                                              ([], ValueError)])
def test_ridge_refuses_a_penalty_that_would_make_every_forecast_nan(penalties, error):
    with pytest.raises(error, match=rf"penalties must be a non-empty sequence of finite numbers >= 0, "
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
    with pytest.raises(policy_error(eps), match=message):
        RidgeForecaster(**SIZES, eps=eps)
    with pytest.raises(policy_error(eps), match=message):
        InstanceNorm(3, eps=eps)


def test_instance_norm_names_bad_channels_and_affine():
    with pytest.raises(ValueError, match="channels must be a positive int, got 0"):
        InstanceNorm(0)
    with pytest.raises(TypeError, match=r"affine must be a bool \(True or False\), got str 'no'"):
        InstanceNorm(2, affine="no")


@pytest.mark.parametrize("value", [-1, 2.5, True, float("nan")])
def test_patch_transformer_time_features_is_a_count(value):
    message = rf"time_features must be an int >= 0, got {re.escape(repr(value))}"
    with pytest.raises(policy_error(value, integer=True), match=message):
        PatchTransformer(**SIZES, time_features=value)


def test_patch_transformer_names_an_unknown_backbone():
    with pytest.raises(ValueError, match=r"backbone must be one of 'book', 'patchtst', got 'vanilla'"):
        PatchTransformer(**SIZES, backbone="vanilla")


@pytest.mark.parametrize("build, error, message", [
    (lambda: CausalConv1d(2, 3, kernel_size=0), ValueError, "kernel_size must be a positive int, got 0"),
    (lambda: CausalConv1d(2, 3, kernel_size=3, dilation=0), ValueError,
     "dilation must be a positive int, got 0"),
    (lambda: CausalConv1d(2.0, 3, kernel_size=3), TypeError, "in_channels must be a positive int, got 2.0"),
    (lambda: TemporalBlock(2, 3, kernel_size=3, dilation=1.5), TypeError,
     "dilation must be a positive int, got 1.5"),
    (lambda: TemporalBlock(2, 3, 3, 1, dropout=float("nan")), ValueError,
     r"dropout must be a number in \[0, 1\), got nan"),
])
def test_tcn_layers_name_a_bad_size(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_ridge_never_keeps_a_penalty_whose_solution_is_not_finite():
    """Penalty 0 on inputs without variance solves 0 / 0: NaN weights, which must lose."""
    x, y = torch.zeros(20, 8, 1), torch.randn(20, 2, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"RidgeForecaster.fit: no penalty of \(0.0,\) gives a finite "
                                         r"validation MSE .* pass larger penalties"):
        RidgeForecaster(lookback=8, horizon=2, penalties=[0.0]).fit((x, y), (x, y))
    ridge = RidgeForecaster(lookback=8, horizon=2, penalties=[0.0, 1.0]).fit((x, y), (x, y))
    assert ridge.penalty == 1.0 and torch.isfinite(ridge(x)).all()


@pytest.mark.parametrize("channels, error", [([2], ValueError), ([-1], ValueError), ([0.0], TypeError),
                                             ([True], TypeError), (0, TypeError), ("0", TypeError)])
def test_standardizer_names_channels_that_are_not_indices_of_its_fitted_channels(channels, error):
    scaler = Standardizer().fit(np.random.default_rng(0).normal(size=(50, 2)))
    with pytest.raises(error, match=r"channels must be a list of indices of the 2 fitted "
                                    rf"channels \(0-1\), got {re.escape(repr(channels))}"):
        scaler.transform(np.ones((3, 1)), channels=channels)


# --- values accepted that meant nothing ---------------------------------------------------------

@pytest.mark.parametrize("positions", [[2.7], [0, 2.5], np.array([1.5]), [np.float64(2.0)]])
def test_global_tokens_must_be_integer_positions_not_floats_read_as_ints(positions):
    """A float position was once truncated without a word (2.7 read as 2)."""
    q, k, v = qkv(5)
    with pytest.raises(TypeError, match=r"global_tokens are integer positions .*, got floats "
                                        rf"\[(.*, )?{re.escape(str(float(np.ravel(positions)[-1])))}\]: a "
                                        r"float would be truncated .*; pass ints"):
        longformer_attention(q, k, v, window=1, global_tokens=positions)
    torch.testing.assert_close(longformer_attention(q, k, v, window=1, global_tokens=np.array([0, 2])),
                               longformer_attention(q, k, v, window=1, global_tokens=[0, 2]))
    assert longformer_attention(q, k, v, window=1, global_tokens=[]).shape == (2, 3, 5, 6)


@pytest.mark.parametrize("make", ["t5", "xl", "bucket"])
def test_relative_positions_refuse_offsets_that_are_not_whole(make):
    """T5's buckets and Transformer-XL's table index whole offsets: 2.7 was rounded to 3."""
    from labsupport.positional import RelativePositionBias, XLRelativePosition, relative_position_bucket
    q, k, _ = qkv(4, D=4, H=2)
    times = torch.tensor([0.0, 1.0, 2.7, 4.0])
    call = {"t5": lambda p: RelativePositionBias(2).bias(q, k, p, p),
            "xl": lambda p: XLRelativePosition(2, 4).bias(q, k, p, p),
            "bucket": lambda p: relative_position_bucket(p[:, None] - p[None, :])}[make]
    with pytest.raises(ValueError, match=r"reads whole offsets \(query position - key position\), got the "
                                         r"offset -2.7 at index \(0, 2\) \(\.\.\., query, key\), which would "
                                         r"be rounded to -3; pass integer positions .* or use rope, alibi, "
                                         r"sinusoidal or time2vec"):
        call(times)
    assert call(times.round()) is not None and call(torch.arange(4.0) + 1000) is not None


def _stamps(n=5):
    return np.datetime64("2020-01-01T00:00") + np.arange(n) * np.timedelta64(60, "m")


def test_a_series_needs_a_channel(tmp_path):
    with pytest.raises(ValueError, match=r"a Series needs at least one channel: values \(5, 0\), "
                                         r"columns \(\); keep at least one column"):
        Series(_stamps(), np.zeros((5, 0), np.float32), ())
    series = Series(_stamps(), np.zeros((5, 2), np.float32), ("a", "b"))
    with pytest.raises(ValueError, match=r"a Series needs at least one channel"):
        series.select()
    path = _write(tmp_path, "time,a\n2020-01-01T00:00,1\n")
    with pytest.raises(ValueError, match=r"columns=\[\] selects no channel; pass the names to read, e.g. "
                                         r"columns=\['a'\], or columns=None for all"):
        load_csv(path, columns=[])
    with pytest.raises(ValueError, match=r"tiny.csv line 1: header \['time'\] has no column besides the "
                                         r"time column 'time'"):
        load_csv(_write(tmp_path, "time\n2020-01-01T00:00\n"))


def test_load_csv_reads_a_time_with_spaces_around_it(tmp_path):
    """Spaces around a stamp (a spreadsheet's padding) are not part of it."""
    series = load_csv(_write(tmp_path, "time,a\n2020-01-01 00:00 ,1\n 2020-01-01T01:00,2\n"))
    assert series.timestamps.tolist() == _stamps(2).tolist()


def test_time_features_refuse_a_missing_time():
    from labsupport.data import time_features
    stamps = _stamps()
    stamps[2] = np.datetime64("NaT")
    with pytest.raises(ValueError, match=r"timestamps hold NaT \(a missing time\) at row 2 \(1 of 5\): "
                                         r"calendar features of a missing time mean nothing; drop those "
                                         r"rows or fill their times first"):
        time_features(stamps)


def test_time_features_read_iso_strings_as_load_csv_does():
    from labsupport.data import time_features
    expected = time_features(_stamps(3))
    texts = ["2020-01-01T00:00", "2020-01-01 01:00 ", "2020-01-01T02:00:00"]
    np.testing.assert_array_equal(time_features(np.array(texts)), expected)
    np.testing.assert_array_equal(time_features(texts), expected)
    with pytest.raises(ValueError, match=r"timestamps\[1\]: cannot read time 'yesterday': expected an ISO "
                                         r"8601 date, .*; pandas says: "):
        time_features(["2020-01-01T00:00", "yesterday"])
    with pytest.raises(TypeError, match=r"timestamps must be numpy datetime64 values or ISO 8601 "
                                        r"strings, got int64; convert with "
                                        r"np.asarray\(times, dtype='datetime64\[m\]'\)"):
        time_features(np.arange(3))


@pytest.mark.parametrize("holiday, error, message", [
    ([0, float("nan"), 1], ValueError, r"holiday holds nan at row 1; a holiday flag is a finite number"),
    (["no", "yes", "no"], TypeError, r"holiday must be \(T,\) numbers \(a 0/1 flag per time\), got <U3 "
                                     r"\['no', 'yes', 'no'\]"),
])
def test_time_features_name_a_holiday_flag_that_is_not_a_number(holiday, error, message):
    from labsupport.data import time_features
    with pytest.raises(error, match=message):
        time_features(_stamps(3), holiday)


def test_ridge_refuses_penalty_zero_where_the_least_squares_are_singular():
    """Penalty 0 on fewer windows than lags has no unique solution: a validation MSE in the
    thousands was kept. It is never kept, and alone it is refused with the reason."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(5, 8, 1, generator=g), torch.randn(5, 2, 1, generator=g)
    val = (torch.randn(20, 8, 1, generator=g), torch.randn(20, 2, 1, generator=g))
    with pytest.raises(ValueError, match=r"no penalty of \(0.0,\) gives a finite validation MSE .*penalty 0 "
                                         r"leaves the least squares singular: 5 training rows \(windows x "
                                         r"channels\) for 8 lags and an intercept.* pass larger penalties"):
        RidgeForecaster(lookback=8, horizon=2, penalties=[0.0]).fit((x, y), val)
    ridge = RidgeForecaster(lookback=8, horizon=2, penalties=[0.0, 1.0]).fit((x, y), val)
    assert ridge.penalty == 1.0 and np.isnan(ridge.validation_mse[0.0])


@pytest.mark.parametrize("size", [1e20, 1e30, 1e38])
def test_instance_normalisation_of_huge_values_is_that_of_their_shape(size):
    """Values near 1e30 once overflowed the variance to inf (z = 0, forecasts NaN); the
    normalisation is scale-free, so it gives the shape of the window at any size."""
    norm = InstanceNorm(2, affine=False)
    x = torch.randn(3, 12, 2, generator=torch.Generator().manual_seed(0))
    z, stats = norm.normalise(x * size)
    torch.testing.assert_close(z, norm.normalise(x)[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.denormalise(z, stats) / size, x, atol=1e-4, rtol=1e-4)
    from labsupport.models import LinearForecaster
    torch.manual_seed(0)
    model = LinearForecaster(lookback=12, horizon=3, channels=2, kernel_size=5, revin=True)
    assert torch.isfinite(model(x * size)).all()


def test_instance_normalisation_is_unchanged_for_ordinary_values():
    norm = InstanceNorm(2, affine=False)
    x = torch.randn(3, 12, 2, generator=torch.Generator().manual_seed(0)) * 50 + 3000
    mean = x.mean(dim=1, keepdim=True)
    std = (x.var(dim=1, keepdim=True, unbiased=False) + norm.eps).sqrt()
    assert torch.equal(norm.normalise(x)[0], (x - mean) / std)        # bit for bit: outputs unchanged


def test_evaluate_names_the_windows_that_hold_nan():
    from labsupport.train import evaluate, window_errors
    x, y = torch.randn(5, 12, 1), torch.randn(5, 3, 1)
    x[2, 0, 0] = float("nan")
    last = lambda inputs: inputs[:, -3:]                                        # noqa: E731
    for score in (evaluate, window_errors):
        with pytest.raises(ValueError, match=r"data inputs hold NaN or inf values in 1 window\(s\), first in "
                                             r"window 2 of 5; drop or fill them"):
            score(last, (x, y))


def test_evaluate_says_which_windows_a_non_finite_forecast_covers():
    from labsupport.train import evaluate
    x, y = torch.randn(5, 12, 1), torch.randn(5, 3, 1)

    def holes(inputs):
        out = inputs[:, -3:].clone()
        out[[1, 3], 0, 0] = float("nan")
        return out
    metrics = evaluate(holes, (x, y))
    assert np.isnan(metrics.mse) and str(metrics).endswith(
        "; NaN or inf forecast on 2 of 5 windows, first window 1")
    assert "forecast" not in str(evaluate(lambda inputs: inputs[:, -3:], (x, y)))


# --- what a validator accepts is what the code then uses --------------------------------------------

def test_numpy_integers_a_validator_accepted_reach_torch_as_ints():
    """np.int64 passed every validator below, then torch refused it with its own message
    ('split_sizes must be tuple of ints'; 'generator must be ... an int seed, got int64')."""
    from labsupport.attention import orthogonal_random_features
    n = np.int64
    encoder = SegmentRecurrentEncoder(8, 2, 1, mem_len=4)
    x = torch.randn(1, 9, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(run_segments(encoder, x, n(4)), run_segments(encoder, x, 4))
    q, k, v = qkv(6)
    torch.testing.assert_close(performer_attention(q, k, v, num_features=8, generator=n(3)),
                               performer_attention(q, k, v, num_features=8, generator=3))
    torch.testing.assert_close(orthogonal_random_features(n(8), n(4), generator=n(1)),
                               orthogonal_random_features(8, 4, generator=1))
    with pytest.raises(TypeError, match=r"generator must be None, a torch.Generator or an int seed, "
                                        r"got bool"):
        performer_attention(q, k, v, num_features=8, generator=True)


@pytest.mark.parametrize("call, error, message", [
    (lambda: __import__("labsupport.attention", fromlist=["causal_mask"]).causal_mask(2.0), TypeError,
     r"L must be an int >= 0, got 2.0"),
    (lambda: __import__("labsupport.attention", fromlist=["causal_mask"]).causal_mask(4, -1), ValueError,
     r"S must be an int >= 0, got -1"),
    (lambda: __import__("labsupport.attention", fromlist=["band_mask"]).band_mask(4, 1.5), TypeError,
     r"window must be an int >= 0, got 1.5"),
    (lambda: __import__("labsupport.attention", fromlist=["band_mask"]).band_mask(4, -1), ValueError,
     r"window must be an int >= 0, got -1"),
])
def test_masks_refuse_sizes_that_are_not_counts(call, error, message):
    """band_mask(4, -1) was an empty mask and band_mask(4, 1.5) a band of 1, without a word."""
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("base", [0.0, -1.0, float("nan"), float("inf"), "1e4"])
def test_sinusoidal_and_rotary_encodings_refuse_a_base_that_gives_no_frequencies(base):
    """base 0 or below gave inf or NaN features and rotations without a word."""
    from labsupport.positional import RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_encoding
    message = rf"base must be a finite number > 0, got {re.escape(repr(base))}"
    with pytest.raises(policy_error(base), match=message):
        sinusoidal_encoding(4, 8, base=base)
    with pytest.raises(policy_error(base), match=message):
        RotaryEmbedding(4, base=base)
    with pytest.raises(policy_error(base), match=message):
        SinusoidalPositionalEncoding(8, base=base)


@pytest.mark.parametrize("options, message", [
    (dict(num_buckets=0), r"num_buckets must be an int >= [24] \(2 per direction of offset: exact, then "
                          r"logarithmic\), got 0"),
    (dict(num_buckets=2, bidirectional=True), r"num_buckets must be an int >= 4 .*got 2"),
    (dict(num_buckets=32, max_distance=16, bidirectional=False),
     r"max_distance must be an int > 16, the last offset with a bucket of its own \(num_buckets 32\), "
     r"got 16"),
    (dict(num_buckets=32, max_distance=8.5, bidirectional=False),
     r"max_distance must be an int > 16, .*got 8.5"),
])
def test_t5_buckets_refuse_settings_that_give_no_logarithmic_buckets(options, message):
    """num_buckets=0 divided by zero; a max_distance below the exact buckets gave negative
    buckets, read from the end of the table. A float is a TypeError, a count out of range a
    ValueError."""
    from labsupport.positional import RelativePositionBias, relative_position_bucket
    error = TypeError if isinstance(options.get("max_distance"), float) else ValueError
    with pytest.raises(error, match=message):
        relative_position_bucket(torch.arange(-40, 40), **options)
    with pytest.raises(error, match=message):
        RelativePositionBias(2, **options)


def test_a_split_border_that_is_not_a_date_is_named(vic):
    with pytest.raises(ValueError, match=r"train_end must be a date or time numpy reads, such as "
                                         r"'2014-01-01T00:00', got '2014-13-01' \(Month out of range"):
        temporal_split(vic, train_end="2014-13-01")
    with pytest.raises(ValueError, match=r"start must be a date or time numpy reads, such as "
                                         r"'2014-01-01T00:00', got 'yesterday'"):
        vic.between("yesterday")


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("value", ["no", 1, None])
def test_is_causal_is_a_bool_in_every_kernel_and_block(name, value):
    """is_causal="no" is truthy: naive and flash attention ran causal without a word."""
    q, k, v = qkv(4)
    message = (rf"is_causal must be a bool \(True or False\), got {type(value).__name__} "
               rf"{re.escape(repr(value))}")
    with pytest.raises(TypeError, match=message):
        KERNELS[name](q, k, v, is_causal=value)
    with pytest.raises(TypeError, match=message):
        MultiHeadAttention(8, 2, kernel=name)(torch.randn(1, 4, 8), is_causal=value)
    torch.testing.assert_close(KERNELS[name](q, k, v, is_causal=np.True_, scale=np.float32(0.5)),
                               KERNELS[name](q, k, v, is_causal=True, scale=0.5))


@pytest.mark.parametrize("call, error, message", [
    (lambda: make_windows(["a", "b", "c", "d"], 2, 1), TypeError,
     r"values must hold real numbers \(float or int\), got dtype <U1; convert with "
     r"np.asarray\(values, dtype=np.float32\)"),
    (lambda: Standardizer().fit(np.array([["a"], ["b"]])), TypeError,
     r"values must hold real numbers \(float or int\), got dtype <U1"),
    (lambda: patchify(torch.tensor(1.0), 1), ValueError,
     r"x must have a last axis to cut into patches \(\.\.\., L\), got shape \(\)"),
])
def test_data_helpers_name_inputs_that_are_not_numbers_or_have_no_axis(call, error, message):
    """numpy's 'could not convert string to float' and an IndexError, before."""
    with pytest.raises(error, match=message):
        call()


def test_load_csv_names_a_file_that_is_not_utf8(tmp_path):
    path = _write(tmp_path, "time,a\n2020-01-01T00:00,1\n")
    path.write_bytes(path.read_bytes() + "2020-01-01T01:00,caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"tiny.csv is not UTF-8 text \(byte 0xe9 at offset \d+\); save it "
                                         r"as UTF-8 \(in Excel: CSV UTF-8\), or convert it"):
        load_csv(path)


def test_cost_sweep_names_make_inputs_that_return_no_tuple():
    from labsupport.timing import cost_sweep
    [row] = cost_sweep({"naive": naive_attention}, [8], reps=1, progress=False,
                       make_inputs=lambda L: torch.randn(1, 1, L, 4))
    assert (row["status"], row["note"]) == (
        "error", "TypeError: make_inputs(8) must return a tuple of the kernel's positional inputs, "
                 "e.g. (q, k, v), got Tensor")
