"""Nothing silently wrong: every bad input is rejected by name, with what was expected and
how to fix it, and nothing the user holds is changed (`fit`'s cases are in test_train.py)."""
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


# --- item 3: a Standardizer refuses data with another number of channels ------------------

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


# --- item 4: temporal_split returns parts of its own ------------------------------------

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


# --- item 7: load_csv and Series -------------------------------------------------------

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


@pytest.mark.parametrize("stamp", ["2020-01-01T00:00+10:00", "2020-01-01 00:00:00Z", "2020-01-01T00:00-0500"])
def test_load_csv_refuses_a_utc_offset_instead_of_shifting_silently(tmp_path, stamp):
    with pytest.raises(ValueError, match=r"tiny.csv line 2: time '.*' carries a UTC offset .*; "
                                         r"load_csv reads local times without one"):
        load_csv(_write(tmp_path, f"time,a\n{stamp},1\n"))


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


# --- item 9: a constant training column, a NaN ------------------------------------------

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
