import pytest
import torch
from torch import nn

from labsupport.data import Standardizer
from labsupport.train import Metrics, evaluate, fit, pick_device, predict, set_seed


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
    class Drifting(Flat):
        """Gets worse on validation after the first epoch, whatever the training loss."""
    model = Flat()
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
    history = fit(Flat(), toy_data(), toy_data(), epochs=1000, max_seconds=0.0, progress=False)
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


def test_seed_and_device():
    set_seed(3)
    a = torch.randn(3)
    set_seed(3)
    assert torch.equal(a, torch.randn(3))
    assert pick_device("cpu").type == "cpu"
    assert pick_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert predict(Flat(), toy_data()[0], batch_size=7).shape == (64, 3, 1)


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
