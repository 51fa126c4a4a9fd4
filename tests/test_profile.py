import pytest

from labsupport import profile


def test_env_var_overrides_and_argument_wins(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "gpu")
    assert profile.current().name == "gpu"
    assert profile.current("cpu").name == "cpu"
    monkeypatch.delenv(profile.ENV_VAR)
    assert profile.current().name == profile.default_name()


def test_unknown_profile_and_setting(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "tpu")
    with pytest.raises(ValueError, match=r"unknown profile 'tpu'.*LABSUPPORT_PROFILE"):
        profile.current()
    with pytest.raises(AttributeError, match="has no setting 'nope'"):
        profile.current("cpu").nope


def test_presets_share_their_keys():
    assert set(profile.PRESETS["cpu"]) == set(profile.PRESETS["gpu"]) == set(profile.PRESETS["smoke"])


def test_smoke_trains_less_and_sweeps_like_cpu():
    cpu, smoke = profile.PRESETS["cpu"], profile.PRESETS["smoke"]
    trained = [k for k in cpu if k.endswith(("_epochs", "_steps"))]
    assert trained and all(smoke[k] < cpu[k] for k in trained)
    assert all(smoke[k] == cpu[k] for k in cpu if k.endswith(("_lengths", "_budget", "_tokens")))


def test_gpu_sweeps_reach_the_out_of_memory_wall():
    """On the largest single GPU (141 GB), the gpu profile's naive sweeps end in OOM:
    the forward holds 2 float32 L x L matrices (causal: 3), the lab's 2-layer encoder
    of 8 x 4 heads keeps 3 per layer for backward. Models, not measurements."""
    gpu, big = profile.PRESETS["gpu"], 141e9
    assert gpu["wall_budget"] is None and gpu["lab_budget"] is None
    assert 2 * 4 * max(gpu["wall_lengths"]) ** 2 > big
    assert 3 * 4 * max(gpu["final_lengths"]) ** 2 > big
    assert 2 * 3 * 8 * 4 * 4 * max(gpu["lab_tokens"]) ** 2 > big
    assert 2 * 4 * min(gpu["wall_lengths"]) ** 2 < 1e9       # and start well inside memory


def test_the_lab_compares_on_every_window_with_enough_seeds():
    """Issue 13: every training window (stride at most 2 on a CPU), at least 3 seeds for
    the PatchTransformer and DLinear on a CPU and for every trained model on a GPU."""
    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["lab_train_stride"] <= 2 and gpu["lab_train_stride"] == 1
    assert cpu["lab_seeds"] >= 3 and cpu["lab_rnn_seeds"] >= 1
    assert gpu["lab_seeds"] >= 3 and gpu["lab_rnn_seeds"] >= 3
