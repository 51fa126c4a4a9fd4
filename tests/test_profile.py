import pytest
import torch

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
        profile.current("cpu").nope  # noqa: B018 (reading the setting is what raises)


def test_presets_share_their_keys():
    assert set(profile.PRESETS["cpu"]) == set(profile.PRESETS["gpu"]) == set(profile.PRESETS["smoke"])


def test_smoke_trains_less_and_sweeps_less_within_the_cpu_lengths():
    """smoke runs every line at less cost: the nbgrader test runs each notebook 3 times."""
    cpu, smoke = profile.PRESETS["cpu"], profile.PRESETS["smoke"]
    trained = [k for k in cpu if k.endswith(("_epochs", "_steps"))]
    assert trained and all(smoke[k] < cpu[k] for k in trained)
    assert all(smoke[k] == cpu[k] for k in cpu if k.endswith("_budget"))
    sweeps = [k for k in cpu if k.endswith(("_lengths", "_tokens", "_totals"))]
    measured_on_cpu = {n for k in sweeps for n in cpu[k]}
    for k in sweeps:
        assert len(smoke[k]) >= 3 and list(smoke[k]) == sorted(smoke[k]), f"{k}: fits use the last 3"
        assert set(smoke[k]) <= measured_on_cpu and max(smoke[k]) <= max(cpu[k]), k
    work = lambda preset: sum(n * n for k in sweeps for n in preset[k])   # noqa: E731 (attention: L^2)
    assert work(smoke) < work(cpu) / 4


def test_gpu_sweeps_reach_the_out_of_memory_wall():
    """On the largest single GPU (141 GB), the gpu profile's naive sweeps end in OOM:
    the forward holds 2 float32 L x L matrices (causal: 3); a training step of the lab's
    2-layer encoder of 8 x 4 heads holds (layers + 2) of its score matrices in bfloat16 (the
    model the lab's Step 4 measures on a CPU). Models, not measurements."""
    gpu, big = profile.PRESETS["gpu"], 141e9
    assert gpu["wall_budget"] is None and gpu["lab_budget"] is None
    assert 2 * 4 * max(gpu["wall_lengths"]) ** 2 > big
    assert 3 * 4 * max(gpu["final_lengths"]) ** 2 > big
    assert (2 + 2) * 8 * 4 * 2 * max(gpu["lab_tokens"]) ** 2 > big
    assert 2 * 4 * min(gpu["wall_lengths"]) ** 2 < 1e9       # and start well inside memory


def test_sweeps_run_in_bfloat16_only_on_the_gpu():
    """Flash SDPA takes only half precision: the gpu profile's sweeps are bfloat16, the CPU's
    float32 (bfloat16 matmuls are slow on most CPUs)."""
    assert profile.PRESETS["gpu"]["sweep_dtype"] is torch.bfloat16
    assert profile.PRESETS["cpu"]["sweep_dtype"] is profile.PRESETS["smoke"]["sweep_dtype"] is torch.float32


def test_the_lab_compares_on_every_window_with_enough_seeds():
    """Issue 13: every training window (stride at most 2 on a CPU), at least 3 seeds for
    the PatchTransformer and DLinear on a CPU and for every trained model on a GPU."""
    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["lab_train_stride"] <= 2 and gpu["lab_train_stride"] == 1
    assert cpu["lab_seeds"] >= 3 and cpu["lab_rnn_seeds"] >= 1
    assert gpu["lab_seeds"] >= 3 and gpu["lab_rnn_seeds"] >= 3


def test_the_heads_verdicts_read_the_same_readers_in_both_profiles():
    """12.2's lag readers train on the CPU in every profile and its checked verdicts read the
    first seed's four-head reader: the same epochs in cpu and gpu; several seeds for the
    protocol's spread (issue 13), more on the GPU runner, also for the book's forecaster."""
    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["heads_epochs"] == gpu["heads_epochs"]
    assert 2 <= cpu["heads_seeds"] <= gpu["heads_seeds"]
    assert 2 <= cpu["forecaster_seeds"] <= gpu["forecaster_seeds"]
    assert cpu["deep_steps"] == gpu["deep_steps"]          # the deep stack trains on the CPU too
    assert all(p["forecaster_max_epochs"] >= 2 for p in profile.PRESETS.values()), \
        "compare.warmup_cosine needs a warm-up epoch and one more"
