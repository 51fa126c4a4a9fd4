import random

import numpy as np
import pytest
import torch
from torch import nn

from labsupport import provenance
from labsupport.data import Standardizer
from labsupport.train import (
    Metrics,
    Plateau,
    check_fit_options,
    evaluate,
    fit,
    pick_device,
    predict,
    set_seed,
    window_errors,
)


def toy_data(n=64, L=12, T=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, L, 1, generator=g)
    return x, x[:, -T:] * 0.5 + 0.1


class Flat(nn.Module):
    def __init__(self, L=12, T=3):
        super().__init__()
        self.linear = nn.Linear(L, T)

    def forward(self, x):
        return self.linear(x[..., 0])[..., None]


def test_fit_learns_and_records():
    history = fit(Flat(), toy_data(), toy_data(seed=1), epochs=30, lr=1e-2, batch_size=16,
                  patience=30, progress=False)
    assert len(history.train_loss) == len(history.val_loss) == len(history.epoch_seconds) == 30
    assert history.train_loss[-1] < 0.1 * history.train_loss[0]
    assert history.seconds_per_epoch > 0 and "best val MSE" in str(history)


def test_early_stopping_restores_the_best_weights():
    train, val = toy_data(), toy_data(seed=1)
    val_bad = (val[0], val[1] + 10.0)                 # a validation set the model cannot fit
    snapshots = []

    class Spy(Flat):
        def forward(self, x):
            if not self.training:
                snapshots.append(self.linear.weight.detach().clone())
            return super().forward(x)

    spy = Spy()
    history = fit(spy, train, val_bad, epochs=20, lr=5e-2, batch_size=8, patience=2, progress=False)
    assert history.stopped_early and len(history.val_loss) == history.best_epoch + 3
    best_weights = snapshots[history.best_epoch]
    torch.testing.assert_close(spy.linear.weight, best_weights)
    assert not torch.allclose(spy.linear.weight, snapshots[-1])
    assert history.best_val_loss == min(history.val_loss)


def test_max_seconds_stops_training():
    history = fit(Flat(), toy_data(), toy_data(), epochs=1000, max_seconds=1e-9, progress=False)
    assert len(history.train_loss) == 1


def test_evaluate_in_scaled_and_original_units():
    x, y = toy_data()
    scaler = Standardizer().fit(torch.randn(100, 1).numpy() * 300 + 4000)
    perfect = evaluate(lambda inputs: inputs[:, -3:] * 0.5 + 0.1, (x, y), scaler=scaler, channels=[0])
    assert perfect.mse < 1e-12 and perfect.mae_orig < 1e-6
    zero = evaluate(lambda inputs: torch.zeros(len(inputs), 3, 1), (x, y), scaler=scaler, channels=[0])
    assert zero.mse == pytest.approx(y.pow(2).mean().item())
    assert zero.mae_orig == pytest.approx(y.abs().mean().item() * float(scaler.std[0]), rel=1e-4)
    assert isinstance(zero, Metrics) and "MW" in str(zero)
    with pytest.raises(ValueError, match="forecast shape"):
        evaluate(lambda inputs: torch.zeros(len(inputs), 2, 1), (x, y))


def test_bad_data_is_named():
    with pytest.raises(TypeError, match=r"train must be an \(inputs, targets\) pair"):
        fit(Flat(), torch.zeros(3), toy_data(), progress=False)
    with pytest.raises(ValueError, match="4 inputs and 3 targets"):
        fit(Flat(), (torch.zeros(4, 12, 1), torch.zeros(3, 3, 1)), toy_data(), progress=False)


# Every numeric option of fit, by class: sign, zero, NaN, inf (ValueError), a bool or a float where
# an int is meant (TypeError). Each names the option, what it expected, what arrived and the fix.
BAD_FIT_VALUES = [       # ValueError: the right type, out of range
    # counts: epochs, batch_size, patience
    (dict(epochs=0), r"epochs must be an int >= 1 \(the epoch budget\), got 0"),
    (dict(epochs=-2), r"epochs must be an int >= 1 .*got -2"),
    (dict(batch_size=0), r"batch_size must be an int >= 1 .*got 0"),
    (dict(patience=0), r"patience must be an int >= 1 .*got 0.*patience=0 would stop after one epoch "
                       r"and call it converged"),
    (dict(patience=-1), r"patience must be an int >= 1 .*got -1"),
    # the learning rate and the penalty
    (dict(lr=0.0), r"lr must be a positive finite number \(Adam's learning rate\), got 0.0; "
                   r"pass e.g. lr=1e-3"),
    (dict(lr=-1e-3), r"lr must be a positive finite number .*got -0.001"),
    (dict(lr=float("nan")), r"lr must be a positive finite number .*got nan"),
    (dict(lr=float("inf")), r"lr must be a positive finite number .*got inf"),
    (dict(weight_decay=-0.1), r"weight_decay must be a finite number >= 0 \(Adam's L2 penalty\), got -0.1; "
                              r"pass weight_decay=0.0 for none"),
    (dict(weight_decay=float("nan")), r"weight_decay must be a finite number >= 0 .*got nan"),
    (dict(weight_decay=float("inf")), r"weight_decay must be a finite number >= 0 .*got inf"),
    # None or a positive finite number: clip, max_seconds
    (dict(clip=-1.0), r"clip must be None or a positive finite number \(the largest gradient norm\), got "
                      r"-1.0; a negative clip would ascend the gradient and 0 would freeze training: pass "
                      r"e.g. clip=1.0, or clip=None for no clipping"),
    (dict(clip=0), r"clip must be None or a positive finite number .*got 0"),
    (dict(clip=float("nan")), r"clip must be None or a positive finite number .*got nan"),
    (dict(clip=float("inf")), r"clip must be None or a positive finite number .*got inf"),
    (dict(max_seconds=float("nan")), r"max_seconds must be None or a positive finite number \(a time "
                                     r"budget in seconds\), got nan"),
    (dict(max_seconds=0), r"max_seconds must be None or a positive finite number .*got 0.*"
                          r"max_seconds=None for no limit"),
    (dict(max_seconds=-5.0), r"max_seconds must be None or a positive finite number .*got -5.0"),
    (dict(max_seconds=float("inf")), r"max_seconds must be None or a positive finite number .*got inf"),
    # the seed: None or an int >= 0
    (dict(seed=-1), r"seed must be None or an int >= 0 \(the seed of batch order and dropout\), got -1"),
]
BAD_FIT_TYPES = [        # TypeError: a bool, or a float where an int is meant
    (dict(epochs=3.0), r"epochs must be an int >= 1 .*got the float 3.0; pass epochs=3"),
    (dict(epochs=True), r"epochs must be an int >= 1 .*got True: a bool is not a count"),
    (dict(epochs=float("nan")), r"epochs must be an int >= 1 .*got the float nan"),
    (dict(batch_size=2.5), r"batch_size must be an int >= 1 \(windows per batch\), got the float 2.5"),
    (dict(batch_size=False), r"batch_size must be an int >= 1 .*got False: a bool is not a count"),
    (dict(patience=2.0), r"patience must be an int >= 1 .*got the float 2.0; pass patience=2"),
    (dict(patience=True), r"patience must be an int >= 1 .*a bool is not a count"),
    (dict(lr=True), r"lr must be a positive finite number .*got True: a bool is not a number"),
    (dict(weight_decay=True), r"weight_decay must be .*a bool is not a number"),
    (dict(clip=True), r"clip must be None or a positive finite number .*got True: a bool is not a number"),
    (dict(max_seconds=True), r"max_seconds must be .*a bool is not a number"),
    (dict(seed=3.0), r"seed must be None or an int >= 0 .*got the float 3.0; pass seed=3"),
    (dict(seed=True), r"seed must be None or an int >= 0 .*a bool is not a count"),
]


@pytest.mark.parametrize("option, error, message", [(o, ValueError, m) for o, m in BAD_FIT_VALUES]
                         + [(o, TypeError, m) for o, m in BAD_FIT_TYPES],
                         ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_bad_training_settings_are_named_with_the_fix(option, error, message):
    model = BlowsUp(at=1)                              # a model that is never called: refused first
    with pytest.raises(error, match=message):
        fit(model, toy_data(), toy_data(seed=1), progress=False, **option)
    assert model.calls == 0 and model.snapshots == []


def test_options_of_the_wrong_type_are_refused_by_name():
    with pytest.raises(TypeError, match=r"epochs must be an int >= 1 .*got str '3'"):
        fit(Flat(), toy_data(), toy_data(), epochs="3", progress=False)
    with pytest.raises(TypeError, match=r"clip must be None or a positive finite number .*got str '1'"):
        fit(Flat(), toy_data(), toy_data(), clip="1", progress=False)


def test_check_fit_options_knows_every_option_of_fit_and_no_other():
    import inspect
    defaults = {name: p.default for name, p in inspect.signature(fit).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    assert check_fit_options(**defaults)["epochs"] == 20                 # every default is in range
    with pytest.raises(TypeError, match=r"fit takes no option 'lrr'; its options are epochs, lr, "):
        check_fit_options(lrr=1e-3)
    assert check_fit_options(epochs=np.int64(4), lr=1) == {"epochs": 4, "lr": 1.0}
    assert type(check_fit_options(epochs=np.int64(4))["epochs"]) is int


def test_good_edge_values_are_accepted():
    for option in (dict(clip=None), dict(clip=1e-3), dict(max_seconds=1e-9), dict(weight_decay=0),
                   dict(seed=None), dict(seed=0), dict(epochs=np.int64(2)), dict(patience=1)):
        history = fit(Flat(), toy_data(), toy_data(seed=1), epochs=option.pop("epochs", 2),
                      progress=False, **option)
        assert len(history.val_loss) >= 1


def test_a_schedule_that_fails_at_a_later_epoch_is_refused_before_training():
    model = BlowsUp(at=1)
    with pytest.raises(ValueError, match=r"schedule\(4\) returned 0.0; expected a multiplier > 0 of lr"):
        fit(model, toy_data(), toy_data(), epochs=6, schedule=lambda e: 1.0 if e < 4 else 0.0,
            progress=False)
    assert model.calls == 0


@pytest.mark.parametrize("call", ["predict", "evaluate", "window_errors"])
@pytest.mark.parametrize("batch_size, error, message", [
    (0, ValueError, r"batch_size must be an int >= 1 .*got 0"),
    (-4, ValueError, r"batch_size must be an int >= 1 .*got -4"),
    (8.0, TypeError, r"batch_size must be an int >= 1 .*got the float 8.0; pass batch_size=8"),
    (True, TypeError, r"batch_size must be an int >= 1 .*a bool is not a count"),
    ("8", TypeError, r"batch_size must be an int >= 1 .*got str '8'"),
])
def test_scoring_refuses_a_bad_batch_size(call, batch_size, error, message):
    x, y = toy_data()
    run = {"predict": lambda: predict(Flat(), x, batch_size=batch_size),
           "evaluate": lambda: evaluate(Flat(), (x, y), batch_size=batch_size),
           "window_errors": lambda: window_errors(Flat(), (x, y), batch_size=batch_size)}[call]
    with pytest.raises(error, match=message):
        run()


def test_window_errors_are_each_windows_mean_over_horizon_and_channels():
    x, y = toy_data(n=10)
    scaler = Standardizer().fit(np.array([[1000.0], [3000.0]]))             # mean 2000, std 1000
    forecast = lambda inputs: torch.zeros(len(inputs), 3, 1)               # noqa: E731
    errors = window_errors(forecast, (x, y), scaler=scaler, channels=[0])
    assert set(errors) == {"mse", "mae", "mae_orig"}
    expected = y.double()[:, :, 0]                                          # (N, T): error = -y
    torch.testing.assert_close(errors["mse"], expected.pow(2).mean(dim=1))
    torch.testing.assert_close(errors["mae"], expected.abs().mean(dim=1))
    torch.testing.assert_close(errors["mae_orig"], 1000.0 * expected.abs().mean(dim=1), rtol=1e-6, atol=1e-6)
    assert errors["mse"].dtype == torch.float64 and errors["mse"].shape == (10,)
    metrics = evaluate(forecast, (x, y), scaler=scaler, channels=[0])
    assert errors["mse"].mean().item() == pytest.approx(metrics.mse, rel=1e-6)
    assert errors["mae_orig"].mean().item() == pytest.approx(metrics.mae_orig, rel=1e-6)
    assert set(window_errors(forecast, (x, y))) == {"mse", "mae"}
    with pytest.raises(ValueError, match=r"forecast shape \(10, 2, 1\) != target shape \(10, 3, 1\)"):
        window_errors(lambda inputs: torch.zeros(len(inputs), 2, 1), (x, y))


def test_set_seed_seeds_torch_numpy_and_random():
    def draws():
        return torch.randn(3), np.random.rand(3), random.random()
    set_seed(3)
    a = draws()
    set_seed(3)
    b = draws()
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    set_seed(4)
    assert not torch.equal(draws()[0], a[0])


def test_pick_device_takes_the_one_given_else_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == torch.device("cuda") and pick_device("cpu") == torch.device("cpu")
    assert pick_device(torch.device("meta")) == torch.device("meta")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")
    assert provenance.machine_name().startswith("CPU, ")             # provenance reads the same rule


def test_predict_in_batches():
    model, x = Flat(), toy_data()[0]
    assert predict(model, x, batch_size=7).shape == (64, 3, 1)
    torch.testing.assert_close(predict(model, x, batch_size=7), predict(model, x, batch_size=64))


@pytest.mark.parametrize("score", [evaluate, window_errors])
@pytest.mark.parametrize("training", [True, False])
def test_scoring_a_model_leaves_its_mode_as_it_was(score, training):
    """evaluate scores in eval mode (no dropout) and gives the model back in the mode it came
    in: a model in training mode once came back in eval mode. (predict, whose job is the
    forecasts, documents that it puts a module in eval mode.)"""
    model = Noisy().train(training)
    score(model, toy_data(n=8))
    assert model.training is training and all(m.training is training for m in model.modules())
    assert not predict(model, toy_data(n=8)[0]).requires_grad and not model.training


def test_evaluate_scores_without_dropout_whatever_the_mode():
    model, data = Noisy().train(), toy_data(n=16)
    assert evaluate(model, data) == evaluate(model.eval(), data)


def test_inputs_may_be_a_tuple_passed_positionally():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.flat = Flat()

        def forward(self, x, shift, unused=None):
            assert unused is None
            return self.flat(x) + shift[:, :3, None]

    x, y = toy_data()
    shift = torch.randn(len(x), 5)
    history = fit(TwoInputs(), ((x, shift, None), y), ((x, shift, None), y), epochs=3, progress=False)
    assert len(history.val_loss) == 3
    assert predict(TwoInputs(), (x, shift, None), batch_size=10).shape == (64, 3, 1)
    with pytest.raises(ValueError, match="63 inputs and 64 targets"):
        fit(TwoInputs(), ((x[:63], shift[:63]), y), toy_data(), progress=False)


# --- fit refuses bad data, stops cleanly, leaves the caller's generators alone ---

def test_nan_or_inf_in_the_data_is_named_with_its_first_window():
    x, y = toy_data()
    bad_x = x.clone()
    bad_x[17, 3, 0] = float("nan")
    bad_x[40, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"train inputs hold NaN or inf.*first in window 17 of 64"):
        fit(Flat(), (bad_x, y), toy_data(seed=1), progress=False)
    bad_y = y.clone()
    bad_y[5, 1, 0] = float("inf")
    with pytest.raises(ValueError, match=r"val targets hold NaN or inf.*first in window 5 of 64"):
        fit(Flat(), toy_data(), (x, bad_y), progress=False)
    shift = torch.randn(len(x), 5)
    shift[9, 2] = float("-inf")
    with pytest.raises(ValueError, match=r"train inputs\[1\] hold NaN or inf.*first in window 9 of 64"):
        fit(Flat(), ((x, shift), y), toy_data(), progress=False)


def test_forecast_and_target_shapes_are_compared():
    x, y = toy_data()                                 # the model forecasts 3 steps
    short = (x, y[:, :1])                             # targets of 1 step would broadcast
    with pytest.raises(ValueError, match=r"forecast shape \(16, 3, 1\) != target shape \(16, 1, 1\)"):
        fit(Flat(), short, short, batch_size=16, progress=False)
    with pytest.raises(ValueError, match=r"val targets are \(N, 1, 1\) but train targets \(N, 3, 1\)"):
        fit(Flat(), (x, y), short, progress=False)


class BlowsUp(Flat):
    """Forecasts NaN from its ``at``-th training batch on (counted from 1)."""

    def __init__(self, at):
        super().__init__()
        self.at, self.calls = at, 0
        self.snapshots = []

    def forward(self, x):
        out = super().forward(x)
        if not self.training:
            self.snapshots.append(self.linear.weight.detach().clone())
            return out
        self.calls += 1
        return out * float("nan") if self.calls >= self.at else out


def test_a_non_finite_loss_stops_training_with_the_best_weights_restored():
    model = BlowsUp(at=4 * 2 + 3)                     # 4 batches an epoch: epoch 3, batch 3
    with pytest.raises(FloatingPointError, match=r"training loss is nan at epoch 3, batch 3 of 4") as err:
        fit(model, toy_data(), toy_data(seed=1), epochs=10, lr=1e-2, batch_size=16, patience=10,
            progress=False)
    history = err.value.history
    assert len(history.val_loss) == 2 and history.stop_reason == "diverged"
    torch.testing.assert_close(model.linear.weight, model.snapshots[history.best_epoch])
    assert torch.isfinite(model.linear.weight).all()


class AttentionBlowsUp(nn.Module):
    """A causal attention forecaster whose attention weights turn NaN in its ``at``-th
    training batch (as diverging weights do): its kernel, not the loss, meets the NaN first."""

    def __init__(self, at, L=12, T=3, when_training=True):
        super().__init__()
        from labsupport.layers import TransformerBlock
        torch.manual_seed(0)
        self.embed, self.block, self.head = nn.Linear(1, 8), TransformerBlock(8, 2, 16), nn.Linear(8 * L, T)
        self.at, self.calls, self.when_training = at, 0, when_training

    def forward(self, x):
        if self.training == self.when_training:
            self.calls += 1
            if self.calls == self.at:
                with torch.no_grad():
                    self.block.attn.k_proj.weight.fill_(float("nan"))
        h = self.block(self.embed(x), is_causal=True)                 # (B, L, 8)
        return self.head(h.flatten(1))[..., None]                      # (B, T, 1)


def test_non_finite_attention_inputs_inside_a_model_are_divergence_named_by_epoch_and_batch():
    """The kernels refuse NaN (a NonFiniteError, a ValueError); inside fit, where the data are
    checked finite, NaN activations mean the weights diverged: fit says so, as for a NaN loss."""
    model = AttentionBlowsUp(at=4 * 2 + 3)                              # 4 batches an epoch
    with pytest.raises(FloatingPointError, match=r"the model.s forward pass met nan in k at \(0, 0, 0, :\) "
                                                 r"\(epoch 3, batch 3 of 4\): the weights of epoch \d \(best "
                                                 r"val MSE [0-9.]+\) are restored\. Try a smaller lr") as err:
        fit(model, toy_data(), toy_data(seed=1), epochs=10, lr=1e-2, batch_size=16, patience=10,
            progress=False)
    assert err.value.history.stop_reason == "diverged" and len(err.value.history.val_loss) == 2
    assert all(torch.isfinite(p).all() for p in model.parameters())
    in_validation = AttentionBlowsUp(at=3, when_training=False)                # the third validation
    with pytest.raises(FloatingPointError, match=r"met nan in k at \(0, 0, 0, :\) \(validation after epoch "
                                                 r"3\): the weights of epoch \d"):
        fit(in_validation, toy_data(), toy_data(seed=1), epochs=10, lr=1e-2, batch_size=16, patience=10,
            progress=False)


class Interrupted(Flat):
    """Raises KeyboardInterrupt (the notebook's Stop button) in its ``at``-th training batch."""

    def __init__(self, at):
        super().__init__()
        self.at, self.calls, self.snapshots = at, 0, []

    def forward(self, x):
        if not self.training:
            self.snapshots.append(self.linear.weight.detach().clone())
        else:
            self.calls += 1
            if self.calls == self.at:
                raise KeyboardInterrupt
        return super().forward(x)


def test_interrupting_returns_the_history_with_the_best_weights():
    model = Interrupted(at=4 * 3 + 2)                 # during the 4th epoch
    history = fit(model, toy_data(), toy_data(seed=1), epochs=10, lr=1e-2, batch_size=16,
                  patience=10, progress=False)
    assert history.stop_reason == "interrupted" and not history.converged and history.stopped_early
    assert len(history.train_loss) == len(history.val_loss) == 3
    torch.testing.assert_close(model.linear.weight, model.snapshots[history.best_epoch])
    assert "interrupted" in str(history)
    early = fit(Interrupted(at=1), toy_data(), toy_data(), progress=False)   # before any epoch ended
    assert early.stop_reason == "interrupted" and early.val_loss == [] and "interrupted" in str(early)


class Noisy(Flat):
    """Dropout before the linear map: training draws random numbers every batch."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.linear(self.drop(x[..., 0]))[..., None]


def trained_weights(seed, **kw):
    torch.manual_seed(123)                            # the same initial weights every time
    model = Noisy()
    fit(model, toy_data(), toy_data(seed=1), epochs=3, batch_size=16, seed=seed, progress=False, **kw)
    return model.linear.weight.detach().clone()


def generator_states():
    import random

    import numpy as np
    return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def test_seed_makes_training_reproducible_and_leaves_the_global_generators_alone():
    import random

    import numpy as np
    a = trained_weights(seed=3)
    assert torch.equal(a, trained_weights(seed=3))
    assert not torch.equal(a, trained_weights(seed=4))
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    model = Noisy()
    before = generator_states()
    fit(model, toy_data(), toy_data(seed=1), epochs=3, batch_size=16, seed=3, progress=False)
    after = generator_states()
    assert torch.equal(before[0], after[0]) and (before[1] == after[1]).all() and before[2] == after[2]
    assert torch.equal(torch.randn(3), (torch.manual_seed(7), Noisy(), torch.randn(3))[2])


def test_numpy_numbers_train_as_the_python_numbers_they_are():
    """fit's validator accepts and converts NumPy numbers (a seed drawn from an array, say);
    fit then trains with the converted values: seed=np.int64(3) once raised 'an integer is
    required' from torch after the validator had accepted it."""
    expected = trained_weights(seed=3)
    assert torch.equal(trained_weights(seed=np.int64(3)), expected)
    torch.manual_seed(123)
    model = Noisy()
    fit(model, toy_data(), toy_data(seed=1), epochs=np.int64(3), batch_size=np.int64(16), seed=np.uint8(3),
        lr=np.float64(1e-3), patience=np.int32(3), clip=np.float64(1.0), progress=False)
    torch.testing.assert_close(model.linear.weight, expected)


def test_seed_none_uses_the_global_generator():
    torch.manual_seed(5)
    a = trained_weights(seed=None)
    torch.manual_seed(5)
    state = torch.get_rng_state()
    b = trained_weights(seed=None)                    # trained_weights reseeds to 123 first
    assert torch.equal(a, b)
    torch.manual_seed(123)
    model = Noisy()
    torch.manual_seed(6)                              # now the global state differs before fit
    fit(model, toy_data(), toy_data(seed=1), epochs=3, batch_size=16, seed=None, progress=False)
    assert not torch.equal(model.linear.weight, a)
    assert not torch.equal(state, torch.get_rng_state())     # and fit drew from it
    with pytest.raises(TypeError, match=r"seed must be None or an int >= 0 .*got str '3'"):
        fit(Flat(), toy_data(), toy_data(), seed="3", progress=False)


# --- learning-rate schedules, and why training stopped ---

def learning_rates(monkeypatch, schedule, epochs=7, lr=0.01):
    """The learning rate of each epoch as Adam saw it (one entry per epoch, checked per batch)."""
    seen = []
    step = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    history = fit(Flat(), toy_data(), toy_data(seed=1), epochs=epochs, lr=lr, batch_size=16,
                  patience=epochs, schedule=schedule, progress=False)
    per_epoch = [seen[i:i + 4] for i in range(0, len(seen), 4)]      # 64 windows: 4 batches an epoch
    assert all(len(set(rates)) == 1 for rates in per_epoch)
    assert [rates[0] for rates in per_epoch] == history.learning_rates
    return history.learning_rates


def test_schedules_follow_the_official_code(monkeypatch):
    # adjust_learning_rate(epoch + 1) runs after each epoch in the official exp_main.py, so
    # epoch e (from 0) trains at type1: lr * 0.5 ** max(0, e - 1); type3: lr * 0.9 ** max(0, e - 3)
    expected = {
        None: [0.01] * 7,
        "constant": [0.01] * 7,
        "type1": [0.01, 0.01, 0.005, 0.0025, 0.00125, 0.000625, 0.0003125],
        "type3": [0.01, 0.01, 0.01, 0.01, 0.009, 0.0081, 0.00729],
    }
    for schedule, rates in expected.items():
        assert learning_rates(monkeypatch, schedule) == pytest.approx(rates, rel=1e-12), schedule
    assert learning_rates(monkeypatch, lambda epoch: 1 / (1 + epoch), epochs=3) == pytest.approx(
        [0.01, 0.005, 0.01 / 3])


@pytest.mark.parametrize("schedule,error,message", [
    ("type2", ValueError, r"schedule must be None, 'constant', 'type1', 'type3', 'plateau', a "
                          r"Plateau\(...\) or a callable epoch -> multiplier, got 'type2'"),
    (0.5, TypeError, r"schedule must be None, 'constant', 'type1', 'type3', 'plateau'"),
    (lambda epoch: -1.0, ValueError, r"schedule\(0\) returned -1.0; expected a multiplier > 0"),
])
def test_bad_schedules_are_named(schedule, error, message):
    with pytest.raises(error, match=message):
        fit(Flat(), toy_data(), toy_data(), schedule=schedule, progress=False)


def test_plateau_cuts_the_rate_after_each_epoch_without_improvement(monkeypatch):
    """lr_e = lr * factor ** (epochs before e whose validation loss was no better than the best
    so far): read the cuts off the recorded validation losses."""
    for schedule, factor in (("plateau", 0.5), (Plateau(factor=0.3), 0.3)):
        torch.manual_seed(0)
        history = fit(Flat(), toy_data(), toy_data(seed=1), epochs=12, lr=0.3, batch_size=16,
                      patience=12, schedule=schedule, progress=False)      # lr 0.3: it overshoots
        best, misses, expected = float("inf"), 0, []
        for val in history.val_loss:
            expected.append(0.3 * factor ** misses)
            misses, best = (misses, val) if val < best else (misses + 1, best)
        assert misses > 0, "the toy run must have epochs without improvement for this test"
        assert history.learning_rates == pytest.approx(expected, rel=1e-12)
    assert learning_rates(monkeypatch, "plateau", epochs=12, lr=0.3)      # what Adam used, per batch


@pytest.mark.parametrize("options, error, message", [
    (dict(factor=1.0), ValueError, r"factor must be a number in \(0, 1\), got 1.0"),
    (dict(factor=0), ValueError, r"factor must be a number in \(0, 1\), got 0"),
    (dict(factor=True), TypeError, r"factor must be a number in \(0, 1\), got True"),
])
def test_bad_plateaus_are_named(options, error, message):
    with pytest.raises(error, match=message):
        Plateau(**options)


def test_stop_reason_and_total_seconds():
    train, val = toy_data(), toy_data(seed=1)
    budget = fit(Flat(), train, val, epochs=3, lr=1e-2, patience=3, progress=False)
    assert budget.stop_reason == "epochs" and not budget.converged and not budget.stopped_early
    assert budget.total_seconds >= sum(budget.epoch_seconds) > 0
    timed = fit(Flat(), train, val, epochs=50, max_seconds=1e-9, progress=False)
    assert timed.stop_reason == "time" and timed.stopped_early and not timed.converged
    stuck = fit(Flat(), train, (val[0], val[1] + 10.0), epochs=50, lr=5e-2, batch_size=8, patience=2,
                progress=False)
    assert stuck.stop_reason == "converged" and stuck.converged and stuck.stopped_early
    assert "converged" in str(stuck) and "epoch budget" in str(budget)


@pytest.mark.slow
def test_dlinear_with_its_fit_options_lands_near_the_least_squares_solution():
    # at a constant rate Adam never settles on this ill-conditioned linear map and early
    # stopping keeps a jump; DLinear's type1 schedule from 1e-2 converges
    from labsupport.data import HORIZON, LOOKBACK, book_task
    from labsupport.models import LinearForecaster, RidgeForecaster
    task = book_task(train_stride=1)
    ridge = evaluate(RidgeForecaster(lookback=LOOKBACK, horizon=HORIZON).fit(task.train, task.val), task.test)
    scores = {}
    for name, options in (("type1", LinearForecaster.FIT_OPTIONS), ("constant", {"lr": 1e-2})):
        set_seed(0)
        model = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON)
        fit(model, task.train, task.val, epochs=30, batch_size=128, patience=3, progress=False, **options)
        scores[name] = evaluate(model, task.test).mse
    assert scores["type1"] < 1.05 * ridge.mse < scores["constant"]
