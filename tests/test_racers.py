"""The lab's race (labsupport.sections.lab.racers): the patch TCN, the racers by name, the sizes the width
sweep chose, and the training step the lab times."""
import pytest
import torch

from labsupport.models import PatchGRUForecaster
from labsupport.sections.lab import racers, record


def test_the_patch_tcn_reads_the_day_tokens_causally_and_sees_every_one():
    tcn = racers.PatchTCNForecaster(lookback=336, horizon=24, hidden=8).eval()
    assert tcn.n_patches == 14 and 1 + 2 * 2 * sum(tcn.dilations) >= 14
    x = torch.randn(3, 336, 1)
    assert tcn(x).shape == (3, 24, 1)
    with torch.no_grad():                          # every day moves the forecast (receptive field)
        for day in range(14):
            bumped = x.clone()
            bumped[:, 24 * day:24 * (day + 1)] += 1.0
            assert (tcn(bumped) - tcn(x)).abs().max() > 1e-6, day
        features = tcn.blocks(tcn.embed(x[:, :, 0].unfold(-1, 24, 24)).transpose(1, 2))   # (B, H, 14)
        later = x.clone()
        later[:, 24 * 10:] += 1.0                     # days 10-13 changed: features of 0-9 are not
        features_later = tcn.blocks(tcn.embed(later[:, :, 0].unfold(-1, 24, 24)).transpose(1, 2))
    torch.testing.assert_close(features[..., :10], features_later[..., :10])


def test_the_patch_tcn_checks_its_arguments():
    with pytest.raises(ValueError, match="kernel_size must be >= 2"):
        racers.PatchTCNForecaster(lookback=336, horizon=24, kernel_size=1)
    with pytest.raises(ValueError, match="longer than the lookback"):
        racers.PatchTCNForecaster(lookback=12, horizon=24)


@pytest.mark.parametrize("name", racers.NAMES)
def test_every_racer_builds_at_its_width_and_forecasts(name):
    for horizon, widths in racers.WIDTHS.items():
        model = racers.build(name, lookback=336, horizon=horizon, width=widths[name])
        assert model(torch.randn(2, 336, 1)).shape == (2, horizon, 1)


def test_the_racers_read_the_same_day_tokens():
    transformer = racers.build("Transformer", lookback=336, horizon=24, width=16)
    gru = racers.build("GRU", lookback=336, horizon=24, width=16)
    tcn = racers.build("TCN", lookback=336, horizon=24, width=16)
    assert isinstance(transformer, racers.LabForecaster) and isinstance(gru, PatchGRUForecaster)
    assert gru.n_patches == tcn.n_patches == 14
    assert transformer.patch_len == gru.patch_len == tcn.patch_len == 24
    with pytest.raises(ValueError, match="no racer 'LSTM'"):
        racers.build("LSTM", lookback=336, horizon=24, width=16)


def test_the_widths_are_the_ones_the_recorded_sweep_chose():
    for horizon, widths in racers.WIDTHS.items():
        for name, width in widths.items():
            tried = {r[2]: r[4] for r in record.SWEEP if r[0] == horizon and r[1] == name}
            best = min(tried.values())
            assert width in tried and tried[width] <= best * (1 + racers.TOLERANCE)
            assert all(tried[w] > best * (1 + racers.TOLERANCE) for w in tried if w < width)
    with pytest.raises(ValueError, match="the sweep has no LSTM"):
        racers.chosen_width(24, "LSTM")


def test_a_training_step_moves_the_weights_as_fit_would():
    torch.manual_seed(0)
    model = racers.build("GRU", lookback=336, horizon=24, width=8)
    before = [p.detach().clone() for p in model.parameters()]
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    racers.train_step(model, (torch.randn(4, 336, 1), torch.randn(4, 24, 1)), optimiser)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
