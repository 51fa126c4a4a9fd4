import warnings

import pytest
import torch
import torch.nn.functional as F

from helpers import policy_error, tol
from labsupport.data import patchify
from labsupport.models import (
    CausalConv1d,
    Forecaster,
    GRUForecaster,
    LinearForecaster,
    MovingAverage,
    PatchGRUForecaster,
    PatchTransformer,
    RidgeForecaster,
    TCNForecaster,
    TemporalBlock,
    check_window,
    seasonal_naive,
)

LOOKBACK, HORIZON = 48, 12
MODELS = {
    "gru": lambda **kw: GRUForecaster(hidden=32, **kw),
    "tcn": lambda **kw: TCNForecaster(hidden=16, **kw),
    "dlinear": lambda **kw: LinearForecaster(**kw),
    "dlinear-individual": lambda **kw: LinearForecaster(individual=True, **kw),
    "patch": lambda **kw: PatchTransformer(patch_len=8, stride=4, d_model=32, n_heads=4, n_layers=2,
                                           d_ff=64, dropout=0.0, **kw),
    "patch-flatten": lambda **kw: PatchTransformer(patch_len=8, stride=8, d_model=16, n_heads=2,
                                                   n_layers=1, dropout=0.0, head="flatten", **kw),
    "patch-patchtst": lambda **kw: PatchTransformer.patchtst(patch_len=8, stride=4, d_model=16, n_heads=2,
                                                             n_layers=2, dropout=0.0, **kw),
}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models gain nothing from threads, and threads contending on a busy machine cost 20x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build(name, channels=1):
    return MODELS[name](lookback=LOOKBACK, horizon=HORIZON, channels=channels)


def sine_batch(n=8, noise=0.1):
    """n (window, target) pairs from one noisy sine of period 24: (n, 48, 1), (n, 12, 1)."""
    g = torch.Generator().manual_seed(1)
    t = torch.arange(LOOKBACK + HORIZON + 5 * n, dtype=torch.float32)
    series = torch.sin(2 * torch.pi * t / 24) + noise * torch.randn(t.shape, generator=g)
    windows = torch.stack([series[5 * i: 5 * i + LOOKBACK + HORIZON] for i in range(n)])  # (n, L+T)
    return windows[:, :LOOKBACK, None], windows[:, LOOKBACK:, None]


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("name", MODELS)
def test_shapes(name, channels):
    model = build(name, channels)
    y = model(torch.randn(4, LOOKBACK, channels))
    assert y.shape == (4, HORIZON, channels)
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", MODELS)
def test_overfits_a_tiny_batch(name):
    # a hundredth of the start is below the noise variance (0.01): the batch is memorised
    x, y = sine_batch()
    model = build(name)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = torch.nn.functional.mse_loss(model(x), y).item()
    for _ in range(300):
        loss = torch.nn.functional.mse_loss(model(x), y)
        if loss.item() < start / 100:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < start / 100, f"{name}: loss {loss.item():.4f} from {start:.4f}"


@pytest.mark.parametrize("cls", [GRUForecaster, TCNForecaster, LinearForecaster, PatchTransformer,
                                 RidgeForecaster])
def test_forecasters_take_keyword_arguments_only(cls):
    with pytest.raises(TypeError,
                       match=rf"{cls.__name__}.__init__\(\) takes 1 positional argument but 3 were given"):
        cls(LOOKBACK, HORIZON)
    assert cls(lookback=LOOKBACK, horizon=HORIZON).horizon == HORIZON


# --- TCN: causality and receptive field ---------------------------------------------------

def changed_after(x, t):
    """A copy of x (B, C, L) with every step after t replaced by fresh noise."""
    x2 = x.clone()
    x2[..., t + 1:] = torch.randn_like(x2[..., t + 1:])
    return x2


@pytest.mark.parametrize("layer", [CausalConv1d(2, 3, kernel_size=3, dilation=4),
                                   TemporalBlock(2, 3, kernel_size=3, dilation=2)])
def test_causal_layers_ignore_the_future(layer):
    x, t = torch.randn(2, 2, 30), 17
    y, y2 = layer(x), layer(changed_after(x, t))
    assert y.shape == (2, 3, 30)
    torch.testing.assert_close(y[..., :t + 1], y2[..., :t + 1], **tol(torch.float32))
    assert not torch.allclose(y[..., t + 1:], y2[..., t + 1:])   # the future does reach later steps


def test_tcn_features_ignore_the_future():
    tcn, t = TCNForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=2), 30
    x = torch.randn(3, LOOKBACK, 2)
    x2 = changed_after(x.transpose(1, 2), t).transpose(1, 2)
    h, h2 = tcn.features(x), tcn.features(x2)
    assert h.shape == (3, LOOKBACK, 32)
    torch.testing.assert_close(h[:, :t + 1], h2[:, :t + 1], **tol(torch.float32))
    assert not torch.allclose(h[:, t + 1:], h2[:, t + 1:])


@pytest.mark.parametrize("lookback", [1, 5, 48, 336])
def test_default_dilations_are_the_fewest_doublings_that_cover_the_lookback(lookback):
    tcn = TCNForecaster(lookback=lookback, horizon=1)
    d = tcn.dilations
    assert d == tuple(2 ** i for i in range(len(d)))
    assert tcn.receptive_field == 1 + 2 * 2 * sum(d) >= lookback
    assert len(d) == 1 or 1 + 2 * 2 * sum(d[:-1]) < lookback


def test_measured_receptive_field_matches_the_formula():
    tcn = TCNForecaster(lookback=LOOKBACK, horizon=HORIZON, kernel_size=3).double()
    assert tcn.receptive_field == 61
    x = torch.randn(1, 1, 100, dtype=torch.float64, requires_grad=True)   # longer than the field
    tcn.blocks(x)[..., -1].sum().backward()
    reached = (x.grad[0, 0] != 0).nonzero().flatten()
    assert reached.tolist() == list(range(100 - 61, 100))


def test_explicit_dilations():
    tcn = TCNForecaster(lookback=LOOKBACK, horizon=HORIZON, kernel_size=2, dilations=[1, 4, 32])
    assert tcn.dilations == (1, 4, 32) and tcn.receptive_field == 1 + 2 * 1 * 37
    with pytest.raises(ValueError, match=r"dilations \(1, 2\) with kernel_size 3 give receptive "
                                         r"field 13 < lookback 48"):
        TCNForecaster(lookback=LOOKBACK, horizon=HORIZON, dilations=(1, 2))
    with pytest.raises(ValueError, match="each dilation must be a positive int, got 0"):
        TCNForecaster(lookback=4, horizon=1, dilations=(1, 0, 4))
    with pytest.raises(ValueError, match="non-empty"):
        TCNForecaster(lookback=4, horizon=1, dilations=())


# --- DLinear -----------------------------------------------------------------------------

def test_decomposition_sums_back_to_the_input():
    model = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=3, kernel_size=7)
    x = torch.randn(4, LOOKBACK, 3)
    trend, season = model.decompose(x)
    assert trend.shape == season.shape == x.shape
    torch.testing.assert_close(trend + season, x, **tol(torch.float32))
    assert not torch.allclose(trend, x)


def test_moving_average_values():
    ramp = torch.arange(10, dtype=torch.float64).view(1, 10, 1)
    trend = MovingAverage(5)(ramp).flatten()
    # interior: the average of a line is the line; edges: the end values are repeated
    torch.testing.assert_close(trend[2:8], ramp.flatten()[2:8], **tol(torch.float64))
    torch.testing.assert_close(trend[:2], torch.tensor([0.6, 1.2], dtype=torch.float64), **tol(torch.float64))
    torch.testing.assert_close(trend[8:], torch.tensor([7.8, 8.4], dtype=torch.float64), **tol(torch.float64))


def moving_average(x, k):
    """The centred k-step average of x (B, L, C), ends repeated: a convolution with ones / k."""
    B, L, C = x.shape
    p = (k - 1) // 2
    padded = torch.cat([x[:, :1].expand(B, p, C), x, x[:, -1:].expand(B, p, C)], dim=1)    # (B, L + 2p, C)
    rows = padded.transpose(1, 2).reshape(B * C, 1, L + 2 * p)                             # (B*C, 1, L + 2p)
    ones = torch.ones(1, 1, k, dtype=x.dtype) / k
    return F.conv1d(rows, ones).view(B, C, L).transpose(1, 2)                              # (B, L, C)


@pytest.mark.parametrize("individual", [False, True])
def test_dlinear_is_a_linear_map_of_the_trend_plus_one_of_the_remainder(individual):
    model = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=2, kernel_size=5,
                             individual=individual).double()
    x = torch.randn(3, LOOKBACK, 2, dtype=torch.float64)
    trend = moving_average(x, 5)
    season = x - trend
    torch.testing.assert_close(model.decompose(x)[0], trend, **tol(torch.float64))
    for c in range(2):
        ft, fs = (maps[c if individual else 0] for maps in (model.trend_maps, model.season_maps))
        expected = (trend[..., c] @ ft.weight.T + ft.bias
                    + season[..., c] @ fs.weight.T + fs.bias)          # (B, T)
        torch.testing.assert_close(model(x)[..., c], expected, **tol(torch.float64))


@pytest.mark.parametrize("individual", [False, True])
def test_dlinear_channels_are_independent(individual):
    model = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=3, individual=individual)
    x = torch.randn(2, LOOKBACK, 3)
    x2 = x.clone()
    x2[..., 1] = torch.randn(2, LOOKBACK)
    y, y2 = model(x), model(x2)
    torch.testing.assert_close(y[..., [0, 2]], y2[..., [0, 2]], **tol(torch.float32))
    assert not torch.allclose(y[..., 1], y2[..., 1])


def test_dlinear_shared_weights_treat_channels_alike_and_individual_ones_do_not():
    x = torch.randn(2, LOOKBACK, 1).expand(2, LOOKBACK, 3)   # the same series in every channel
    shared = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=3)(x)
    own = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=3, individual=True)(x)
    torch.testing.assert_close(shared[..., 0], shared[..., 2], **tol(torch.float32))
    assert not torch.allclose(own[..., 0], own[..., 2])


# --- seasonal naive ------------------------------------------------------------------------

@pytest.mark.parametrize("horizon, expected", [(2, [6, 7]), (4, [6, 7, 8, 9]),
                                               (10, [6, 7, 8, 9, 6, 7, 8, 9, 6, 7])])
def test_seasonal_naive_values(horizon, expected):
    x = torch.stack([torch.arange(10.), 100 + torch.arange(10.)], dim=-1)[None]   # (1, 10, 2)
    y = seasonal_naive(x, period=4, horizon=horizon)
    assert y.shape == (1, horizon, 2)
    assert y[0, :, 0].tolist() == expected
    assert y[0, :, 1].tolist() == [100 + e for e in expected]


def test_seasonal_naive_with_period_equal_to_the_window():
    x = torch.randn(3, 5, 2)
    torch.testing.assert_close(seasonal_naive(x, period=5, horizon=10), torch.cat([x, x], dim=1))


def test_seasonal_naive_bad_inputs():
    with pytest.raises(ValueError, match=r"period 11 > window length 10; .* got \(1, 10, 2\)"):
        seasonal_naive(torch.zeros(1, 10, 2), period=11, horizon=3)
    with pytest.raises(ValueError, match=r"x must be \(B, L, C\) \(3 dims\), got shape \(10, 2\)"):
        seasonal_naive(torch.zeros(10, 2), period=4, horizon=3)
    with pytest.raises(ValueError, match="period must be a positive int, got 0"):
        seasonal_naive(torch.zeros(1, 10, 2), period=0, horizon=3)
    with pytest.raises(TypeError, match="horizon must be a positive int, got 2.5"):
        seasonal_naive(torch.zeros(1, 10, 2), period=4, horizon=2.5)


# --- validation ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_bad_windows_are_rejected_naming_the_shapes(name):
    model = build(name)
    with pytest.raises(ValueError, match=r"x must be \(B, 48, 1\), got \(4, 47, 1\)"):
        model(torch.randn(4, 47, 1))
    with pytest.raises(ValueError, match=r"x must be \(B, 48, 1\), got \(4, 48, 3\)"):
        model(torch.randn(4, 48, 3))
    with pytest.raises(ValueError, match=r"x must be \(B, 48, 1\) \(3 dims\), got shape \(48, 1\)"):
        model(torch.randn(48, 1))
    with pytest.raises(TypeError, match="x must be floating point, got dtype torch.int64"):
        model(torch.zeros(4, 48, 1, dtype=torch.long))


def test_check_window_accepts_a_good_window():
    check_window(torch.zeros(2, 336, 7), lookback=336, channels=7)
    with pytest.raises(ValueError, match=r"window must be \(B, 336, 1\), got \(8, 335, 1\)"):
        check_window(torch.zeros(8, 335, 1), 336, 1, name="window")


@pytest.mark.parametrize("cls", [GRUForecaster, TCNForecaster, LinearForecaster])
@pytest.mark.parametrize("arg, value", [("lookback", 0), ("horizon", -1), ("channels", 2.0),
                                        ("channels", True)])
def test_bad_common_arguments(cls, arg, value):
    kwargs = dict(lookback=LOOKBACK, horizon=HORIZON, channels=1) | {arg: value}
    message = f"{arg} must be a positive int, got {value!r}"
    with pytest.raises(policy_error(value, integer=True), match=message):
        cls(**kwargs)


def test_bad_model_arguments():
    common = dict(lookback=LOOKBACK, horizon=HORIZON)
    with pytest.raises(ValueError, match="hidden must be a positive int, got 0"):
        GRUForecaster(hidden=0, **common)
    with pytest.raises(ValueError, match="layers must be a positive int, got 0"):
        GRUForecaster(layers=0, **common)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got 1.0"):
        GRUForecaster(dropout=1.0, **common)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got -0.1"):
        TCNForecaster(dropout=-0.1, **common)
    with pytest.raises(ValueError, match="kernel_size must be >= 2"):
        TCNForecaster(kernel_size=1, **common)
    with pytest.raises(ValueError, match="kernel_size must be odd so the average is centred, got 24"):
        LinearForecaster(kernel_size=24, **common)


def test_gru_dropout_with_one_layer_does_not_warn_and_acts_only_in_training():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = GRUForecaster(lookback=LOOKBACK, horizon=HORIZON, dropout=0.5)
    x = torch.randn(2, LOOKBACK, 1)
    model.eval()
    torch.testing.assert_close(model(x), model(x))
    model.train()
    assert not torch.allclose(model(x), model(x))


# PatchTransformer

def test_patch_transformer_encoder_never_peeks():
    model = build("patch").eval()
    tokens = torch.randn(2, model.n_patches, 32)
    for t in (0, 4, 9):
        later = tokens.clone()
        later[:, t + 1:] += torch.randn_like(later[:, t + 1:])
        a, b = model.encode(tokens), model.encode(later)
        torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
        assert not torch.allclose(a[:, t + 1:], b[:, t + 1:])


def test_patch_transformer_without_revin_never_reads_past_a_patch_border():
    model = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=8, revin=False,
                             dropout=0.0).eval()
    x = torch.randn(2, LOOKBACK, 1)
    later = x.clone()
    later[:, 24:] += 1.0                                  # patches 3..5 change, patches 0..2 do not
    states = [model.encode(model.embed(patchify(v[..., 0], 8, 8))) for v in (x, later)]
    torch.testing.assert_close(states[0][:, :3], states[1][:, :3])


def test_patch_transformer_channels_are_independent_with_shared_weights():
    model = build("patch", channels=2).eval()
    x = torch.randn(3, LOOKBACK, 2)
    other = x.clone()
    other[..., 1] = torch.randn(3, LOOKBACK)
    torch.testing.assert_close(model(x)[..., 0], model(other)[..., 0])
    swapped = x.flip(-1)
    torch.testing.assert_close(model(swapped), model(x).flip(-1), atol=1e-5, rtol=1e-5)


def test_patch_transformer_instance_norm_follows_level_and_scale():
    model = build("patch").eval()
    x = torch.randn(2, LOOKBACK, 1)
    torch.testing.assert_close(model(3.0 * x + 7.0), 3.0 * model(x) + 7.0, atol=1e-4, rtol=1e-4)


def test_patch_transformer_lengths_and_weights():
    model = build("patch").eval()
    assert model.n_patches == (LOOKBACK - 8) // 4 + 1
    with pytest.raises(ValueError, match=r"lookback 50 does not split into patches of 8 with stride 4"):
        PatchTransformer(lookback=50, horizon=HORIZON, patch_len=8, stride=4)
    with pytest.raises(ValueError, match=r"x must be \(B, 48, 1\), got \(2, 47, 1\)"):
        model(torch.randn(2, 47, 1))
    with pytest.raises(ValueError, match="longer than the learned table's max_len 11"):
        model(torch.randn(2, 52, 1))
    sinusoidal = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=4,
                                  pos_encoding="sinusoidal")
    assert sinusoidal(torch.randn(2, 96, 1)).shape == (2, HORIZON, 1)     # a longer window reads fine
    with pytest.raises(ValueError, match=r"x must be \(B, 48, 1\)"):
        build("patch-flatten")(torch.randn(2, 56, 1))
    y, weights = model(torch.randn(2, LOOKBACK, 1), return_weights=True)
    assert y.shape == (2, HORIZON, 1) and len(weights) == 2 and weights[0].shape == (2, 4, 11, 11)
    with pytest.raises(ValueError, match="pos_encoding must be one of"):
        PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, pos_encoding="rotary")
    with pytest.raises(ValueError, match="head must be 'last', 'flatten' or 'mean'"):
        PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, head="max")


def test_the_mean_head_without_mask_or_encoding_ignores_the_order_of_the_patches():
    """Section 12.3's control: no causal mask, no encoding, the mean of the tokens read out.
    Shuffling whole patches leaves the forecast unchanged; a causal mask or an encoding
    alone makes it depend on the order."""
    torch.manual_seed(0)
    x = torch.randn(3, LOOKBACK, 1)
    days = x.view(3, -1, 8, 1)                                           # (B, 6 patches, 8, 1)
    shuffled = days[:, torch.tensor([3, 0, 5, 1, 4, 2])].reshape(3, LOOKBACK, 1)

    def model(**kw):
        return PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=8, d_model=16,
                                n_heads=2, n_layers=2, d_ff=32, dropout=0.0, head="mean", **kw).eval()

    control = model(pos_encoding="none", causal=False)
    torch.testing.assert_close(control(shuffled), control(x), atol=1e-5, rtol=1e-5)
    assert control(torch.randn(2, 2 * LOOKBACK, 1)).shape == (2, HORIZON, 1)   # any whole number of patches
    for kw in (dict(pos_encoding="none", causal=True), dict(pos_encoding="sinusoidal", causal=False)):
        assert not torch.allclose(model(**kw)(shuffled), model(**kw)(x), atol=1e-4), kw


def test_patch_transformer_takes_a_linformer_instance():
    from labsupport.attention import LinformerAttention
    n = build("patch").n_patches
    lin = LinformerAttention(seq_len=n, k=4)
    model = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=4, d_model=16,
                             n_heads=2, n_layers=2, d_ff=32, kernel=lin, causal=False)
    names = [name for name, _ in model.named_parameters()]
    assert sum(name.endswith("kernel.E") for name in names) == 1           # one instance, shared
    model(torch.randn(3, LOOKBACK, 1)).pow(2).mean().backward()
    assert lin.E.grad is not None and lin.E.grad.abs().sum() > 0               # it trains
    with pytest.raises(ValueError, match=r"does not fit this model's 11 patch tokens; build it "
                                         r"with LinformerAttention\(seq_len=11"):
        PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=4,
                         kernel=LinformerAttention(seq_len=12, k=4), causal=False)
    with pytest.raises(ValueError, match="cannot be causal.*pass causal=False"):
        PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=8, stride=4, kernel=lin)


# --- RidgeForecaster: the closed-form linear baseline ---------------------------------------


def _ridge_data(n=300, L=10, T=3, C=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, L, C, generator=g, dtype=torch.float64)
    W = torch.randn(T, L, generator=g, dtype=torch.float64)
    y = torch.einsum("tl,nlc->ntc", W, x) + 0.5 + 0.1 * torch.randn(n, T, C, generator=g, dtype=torch.float64)
    return x.float(), y.float()


def test_ridge_equals_the_normal_equations_with_an_unpenalised_intercept():
    train, val = _ridge_data(), _ridge_data(seed=1)
    ridge = RidgeForecaster(lookback=10, horizon=3, channels=2, penalties=[7.0]).fit(train, val)
    x, y = train
    X = x.transpose(1, 2).reshape(-1, 10).double()                       # (N*C, L)
    Y = y.transpose(1, 2).reshape(-1, 3).double()                        # (N*C, T)
    A = torch.cat([X, torch.ones(len(X), 1, dtype=torch.float64)], dim=1)
    P = torch.diag(torch.tensor([7.0] * 10 + [0.0], dtype=torch.float64))  # intercept unpenalised
    coef = torch.linalg.solve(A.T @ A + P, A.T @ Y)                       # (L + 1, T)
    torch.testing.assert_close(ridge.weight.double(), coef[:10].T, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ridge.bias.double(), coef[10], atol=1e-5, rtol=1e-5)


def test_ridge_keeps_the_penalty_with_the_lowest_validation_error():
    train, val = _ridge_data(n=40), _ridge_data(seed=1)                   # few windows: penalties matter
    ridge = RidgeForecaster(lookback=10, horizon=3, channels=2).fit(train, val)
    assert set(ridge.validation_mse) == set(RidgeForecaster.PENALTIES)
    assert ridge.penalty == min(ridge.validation_mse, key=ridge.validation_mse.get)
    pred = ridge(val[0])
    assert pred.shape == val[1].shape and pred.dtype == torch.float32
    assert abs(F.mse_loss(pred.double(), val[1].double()).item() - ridge.validation_mse[ridge.penalty]) < 1e-5


def test_ridge_with_instance_normalisation_is_invariant_to_each_windows_level_and_scale():
    train, val = _ridge_data(), _ridge_data(seed=1)
    ridge = RidgeForecaster(lookback=10, horizon=3, channels=2, revin=True).fit(train, val)
    x = val[0]
    torch.testing.assert_close(ridge(3.0 * x + 5.0), 3.0 * ridge(x) + 5.0, atol=1e-4, rtol=1e-4)


def _windows_of_varying_spread(n=400, L=12, T=4, seed=0):
    """Windows of a series whose amplitude swings over a factor of 30 (calm and wild
    stretches, as in ETTh2) and whose dynamics differ between them (an oscillating AR(2)
    when wild, a smooth AR(1) when calm), in float64: (x (n, L, 1), y (n, T, 1))."""
    g = torch.Generator().manual_seed(seed)
    steps = n + L + T
    noise = torch.randn(steps, generator=g, dtype=torch.float64)
    phase = torch.sin(torch.arange(steps, dtype=torch.float64) / 37.0)
    z = torch.zeros(steps, dtype=torch.float64)
    for t in range(2, steps):
        wild = phase[t] > 0
        z[t] = (1.2 * z[t - 1] - 0.5 * z[t - 2] if wild else 0.95 * z[t - 1]) + noise[t]
    series = 3.0 + 10 ** (0.75 + 0.75 * phase) * z                         # (steps,)
    idx = torch.arange(n)[:, None] + torch.arange(L + T)                   # (n, L + T)
    w = series[idx].unsqueeze(-1)                                          # (n, L + T, 1)
    return w[:, :L], w[:, L:]


def _revin_linear_by_descent(x, y, penalty, eps=1e-5):
    """RevIN (no affine map) + one linear map, trained by L-BFGS to convergence on the
    denormalised squared error, with the penalty times the mean spread squared on W."""
    mean = x.mean(dim=1)                                                   # (n, 1)
    std = (x.var(dim=1, unbiased=False) + eps).sqrt()                      # (n, 1)
    xn = (x.squeeze(-1) - mean) / std                                      # (n, L)
    W = torch.zeros(y.shape[1], x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(y.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=2000, tolerance_grad=1e-12, tolerance_change=1e-15,
                            history_size=50, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        pred = (xn @ W.T + b) * std + mean                                 # (n, T): denormalised
        value = (pred - y.squeeze(-1)).pow(2).sum() + penalty * std.pow(2).mean() * W.pow(2).sum()
        value.backward()
        return value

    for _ in range(5):
        opt.step(loss)
    return W.detach(), b.detach()


def _unweighted_revin_ridge(x, y, penalty, eps=1e-5):
    """The least squares on the normalised rows, every row weighted alike: what a closed form
    that forgets the denormalisation solves."""
    mean = x.mean(dim=1)
    std = (x.var(dim=1, unbiased=False) + eps).sqrt()
    X, Y = (x.squeeze(-1) - mean) / std, (y.squeeze(-1) - mean) / std
    A = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
    P = torch.diag(torch.tensor([penalty] * X.shape[1] + [0.0], dtype=X.dtype))
    coef = torch.linalg.lstsq(A.T @ A + P, A.T @ Y).solution               # (L + 1, T)
    return coef[:-1].T, coef[-1]


def test_ridge_with_revin_minimises_the_denormalised_error_as_descent_does():
    x, y = _windows_of_varying_spread()
    penalty = 0.5
    ridge = RidgeForecaster(lookback=12, horizon=4, revin=True, penalties=[penalty]).fit((x, y), (x, y))
    W, b = _revin_linear_by_descent(x, y, penalty)
    torch.testing.assert_close(ridge.weight.double(), W, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ridge.bias.double(), b, atol=1e-4, rtol=1e-4)
    # The check can fail: the unweighted solve (the old objective) is far from descent's answer.
    W0, _ = _unweighted_revin_ridge(x, y, penalty)
    assert (W0 - W).abs().max() > 100 * 1e-4


def test_ridge_with_revin_beats_the_unweighted_solve_on_new_windows():
    train, test = _windows_of_varying_spread(seed=0), _windows_of_varying_spread(seed=1)
    ridge = RidgeForecaster(lookback=12, horizon=4, revin=True, penalties=[0.5]).fit(train, train)
    W0, b0 = _unweighted_revin_ridge(*train, 0.5)
    x, y = test
    mean, std = x.mean(dim=1), (x.var(dim=1, unbiased=False) + 1e-5).sqrt()
    unweighted = (((x.squeeze(-1) - mean) / std) @ W0.T + b0) * std + mean  # (n, T)
    mse = (ridge(x).squeeze(-1) - y.squeeze(-1)).pow(2).mean().item()
    mse_unweighted = (unweighted - y.squeeze(-1)).pow(2).mean().item()
    assert mse < 0.95 * mse_unweighted


def test_ridge_counts_its_coefficients_and_refuses_bad_use():
    ridge = RidgeForecaster(lookback=10, horizon=3)
    assert sum(p.numel() for p in ridge.parameters()) == 10 * 3 + 3
    assert not any(p.requires_grad for p in ridge.parameters())
    with pytest.raises(RuntimeError, match=r"not fitted: call \.fit\(train, val\)"):
        ridge(torch.zeros(2, 10, 1))
    with pytest.raises(ValueError, match="penalties must be a non-empty sequence"):
        RidgeForecaster(lookback=10, horizon=3, penalties=[-1.0])
    x, y = _ridge_data(C=1)
    with pytest.raises(ValueError, match=r"train targets must be \(B, 3, 1\)"):
        ridge.fit((x, y[:, :2]), (x, y))
    bad = x.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        ridge.fit((bad, y), (x, y))


def test_patchtst_end_padding_gives_42_patches_that_repeat_the_last_value():
    model = PatchTransformer.patchtst(lookback=336, horizon=96, channels=7, d_model=16, n_heads=4)
    assert model.n_patches == 42 and PatchTransformer(lookback=336, horizon=96, patch_len=16,
                                                      stride=8).n_patches == 41
    seen = []
    model.embed.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    x = torch.randn(2, 336, 7)
    assert model.eval()(x).shape == (2, 96, 7)
    patches = seen[0]                                                  # (B*C, 42, 16), RevIN applied
    assert patches.shape == (14, 42, 16)
    z = model.revin.normalise(x)[0].transpose(1, 2).reshape(14, 336)  # (B*C, L)
    padded = torch.cat([z, z[:, -1:].expand(14, 8)], dim=1)            # the last value 8 more times
    torch.testing.assert_close(patches, padded.unfold(-1, 16, 8))     # patch k starts at 8k, k = 0..41
    torch.testing.assert_close(patches[:, -1, 8:], z[:, -1:].expand(14, 8))


def test_patchtst_backbone_options_build_what_they_name():
    from torch import nn
    model = build("patch-patchtst", channels=2)
    block = model.encoder.layers[0]
    assert type(block.norm1) is not nn.LayerNorm and isinstance(block.norm1, nn.BatchNorm1d)
    assert isinstance(block.ff.activation, nn.GELU) and block.attn.dropout == 0.0
    assert list(model.revin.parameters()) == [] and isinstance(model.encoder.norm, nn.Identity)
    default = build("patch")
    assert isinstance(default.encoder.layers[0].norm1, nn.LayerNorm)
    assert len(list(default.revin.parameters())) == 2
    x = torch.randn(3, LOOKBACK, 2)
    model.eval()
    torch.testing.assert_close(model(3.0 * x + 7.0), 3.0 * model(x) + 7.0, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match=r"attn_dropout must be a number in \[0, 1\), got 1.5"):
        PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, attn_dropout=1.5)


def test_the_patchtst_preset_builds_the_published_model_and_takes_overrides():
    """PatchTST/42 (Nie et al. 2023, the official code's defaults for L = 336): patches of 16,
    stride 8; d_model 128, 16 heads, 3 layers, d_ff 256, dropout 0.2 and none on the attention
    weights; a bidirectional post-norm encoder with BatchNorm over the tokens and GELU; the
    flatten head; RevIN without its affine map; the window's end padded for one more patch."""
    from torch import nn
    model = PatchTransformer.patchtst(lookback=336, horizon=96, channels=7)
    block = model.encoder.layers[0]
    assert (model.patch_len, model.stride, model.n_patches) == (16, 8, 42)
    assert (model.head_kind, model.causal) == ("flatten", False)
    assert (block.attn.d_model, block.attn.n_heads, block.ff.linear1.out_features) == (128, 16, 256)
    assert len(model.encoder.layers) == 3
    assert block.ff.dropout.p == 0.2 and block.attn.dropout == 0.0 and not block.norm_first
    assert isinstance(block.norm1, nn.BatchNorm1d) and isinstance(block.ff.activation, nn.GELU)
    assert list(model.revin.parameters()) == [] and model.backbone == "patchtst"
    small = PatchTransformer.patchtst(lookback=336, horizon=96, channels=7, d_model=16, n_heads=4,
                                      dropout=0.3)
    assert small.encoder.layers[0].attn.d_model == 16 and small.encoder.layers[0].ff.dropout.p == 0.3
    book = PatchTransformer.patchtst(lookback=336, horizon=96, backbone="book", attn_dropout=None)
    assert book.n_patches == 41 and isinstance(book.encoder.layers[0].norm1, nn.LayerNorm)
    assert book.encoder.layers[0].attn.dropout == 0.2 and not book.encoder.layers[0].norm_first


# --- one base class: sizes, the window check and instance normalisation in one place --------

# Each forecaster by its parameter count (its structure, whatever the torch version) and as a
# function of its seed: the same seed gives the same parameters and forecast, another seed others.
SEEDED = {
    "gru": (lambda: GRUForecaster(lookback=48, horizon=12, channels=2, hidden=8, layers=2, revin=True), 940),
    "tcn": (lambda: TCNForecaster(lookback=48, horizon=12, channels=2, hidden=8, revin=True), 1700),
    "dlinear": (lambda: LinearForecaster(lookback=48, horizon=12, channels=2, kernel_size=5, individual=True,
                                         revin=True), 2356),
    "patch": (lambda: PatchTransformer(lookback=48, horizon=12, channels=2, patch_len=8, stride=4, d_model=16,
                                       n_heads=2), 11344),
    "patchtst": (lambda: PatchTransformer.patchtst(lookback=48, horizon=12, channels=2), 409612),
}


@pytest.mark.parametrize("name", SEEDED)
def test_a_seeded_forecaster_is_a_function_of_its_seed(name):
    make, count = SEEDED[name]
    x = torch.randn(3, 48, 2, generator=torch.Generator().manual_seed(1))

    def forecast(seed):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = make().eval()
        with torch.no_grad():
            return model(x), sum(p.numel() for p in model.parameters())
    (y, n), (again, _), (other, _) = forecast(0), forecast(0), forecast(1)
    assert n == count and y.shape == (3, 12, 2) and torch.isfinite(y).all()
    torch.testing.assert_close(again, y, rtol=0, atol=0)
    assert not torch.allclose(other, y)


class LastValue(Forecaster):
    """A forecaster that writes only its forecast: the last value, scaled, at every step."""

    def __init__(self, **sizes):
        super().__init__(**sizes)
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def _forecast(self, x):
        return self.scale * x[:, -1:].expand(-1, self.horizon, -1)      # (B, T, C)


def test_a_forecaster_writes_only_its_forecast():
    x = torch.randn(2, 6, 3)
    plain = LastValue(lookback=6, horizon=4, channels=3)
    torch.testing.assert_close(plain(x), 2.0 * x[:, -1:].expand(2, 4, 3))
    with_revin = LastValue(lookback=6, horizon=4, channels=3, revin=True)
    mean, std = x.mean(1, keepdim=True), (x.var(1, keepdim=True, unbiased=False) + 1e-5).sqrt()
    expected = (2.0 * (x[:, -1:] - mean) / std) / (1 + 1e-5) * std + mean  # normalised, forecast, undone
    torch.testing.assert_close(with_revin(x), expected.expand(2, 4, 3), **tol(torch.float32))
    assert {name for name, _ in with_revin.named_parameters()} == {"revin.weight", "revin.bias", "scale"}
    with pytest.raises(ValueError, match=r"x must be \(B, 6, 3\), got \(2, 5, 3\)"):
        plain(torch.randn(2, 5, 3))
    with pytest.raises(TypeError, match=r"takes 1 positional argument"):
        LastValue(6, 4)
    with pytest.raises(NotImplementedError, match="Forecaster subclasses write _forecast"):
        Forecaster(lookback=6, horizon=4)(x[..., :1])


@pytest.mark.parametrize("cls", [GRUForecaster, TCNForecaster, LinearForecaster, PatchTransformer,
                                 RidgeForecaster])
def test_every_forecaster_shares_the_base_class(cls):
    assert issubclass(cls, Forecaster)
    model = cls(lookback=LOOKBACK, horizon=HORIZON, channels=2)
    assert (model.lookback, model.horizon, model.channels) == (LOOKBACK, HORIZON, 2)


# --- instance normalisation (RevIN) as an option of every forecaster ------------------------

REVIN_MODELS = {"gru": GRUForecaster, "tcn": TCNForecaster, "dlinear": LinearForecaster}


@pytest.mark.parametrize("name", REVIN_MODELS)
def test_revin_makes_every_forecaster_follow_each_windows_level_and_scale(name):
    x = torch.randn(2, LOOKBACK, 3)
    model = REVIN_MODELS[name](lookback=LOOKBACK, horizon=HORIZON, channels=3, revin=True).eval()
    torch.testing.assert_close(model(3.0 * x + 7.0), 3.0 * model(x) + 7.0, atol=1e-4, rtol=1e-4)
    plain = REVIN_MODELS[name](lookback=LOOKBACK, horizon=HORIZON, channels=3).eval()
    assert plain.revin is None          # off by default, as before
    assert not torch.allclose(plain(3.0 * x + 7.0), 3.0 * plain(x) + 7.0, atol=1e-2)


@pytest.mark.parametrize("name", REVIN_MODELS)
def test_revin_adds_a_scale_and_shift_per_channel(name):
    sizes = dict(lookback=LOOKBACK, horizon=HORIZON, channels=3)
    count = lambda m: sum(p.numel() for p in m.parameters())    # noqa: E731
    with_revin, without = REVIN_MODELS[name](**sizes, revin=True), REVIN_MODELS[name](**sizes)
    assert count(with_revin) - count(without) == 2 * 3


def test_the_patch_gru_reads_the_patch_transformers_tokens_with_a_recurrence():
    """SegRNN's idea: the same patches, embedded, read by a GRU; checked against the formula
    written with the module's own GRU cell step by step and the independent patches of
    `PatchTransformer`."""
    torch.manual_seed(0)
    model = PatchGRUForecaster(lookback=48, horizon=6, channels=2, patch_len=12, stride=6, hidden=8)
    assert model.n_patches == PatchTransformer(lookback=48, horizon=6, channels=2, patch_len=12,
                                               stride=6).n_patches == 7
    x = torch.randn(3, 48, 2)
    cell = torch.nn.GRUCell(8, 8)
    cell.weight_ih.data, cell.weight_hh.data = model.gru.weight_ih_l0.data, model.gru.weight_hh_l0.data
    cell.bias_ih.data, cell.bias_hh.data = model.gru.bias_ih_l0.data, model.gru.bias_hh_l0.data
    expected = torch.empty(3, 6, 2)
    for c in range(2):
        patches = torch.stack([x[:, 6 * n: 6 * n + 12, c] for n in range(7)], dim=1)   # (3, 7, 12)
        h = torch.zeros(3, 8)
        for n in range(7):
            h = cell(patches[:, n] @ model.embed.weight.T + model.embed.bias, h)
        expected[:, :, c] = h @ model.head.weight.T + model.head.bias
    torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"patch_len 60 is longer than the lookback 48"):
        PatchGRUForecaster(lookback=48, horizon=6, patch_len=60)
    with pytest.raises(ValueError, match=r"hidden must be a positive int, got 0"):
        PatchGRUForecaster(lookback=48, horizon=6, hidden=0)
