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
    """PRESETS["gpu"] is the gpu profile sized for the reference card (an 80 GB A100): its
    naive wall ends in OOM past the card (2 float32 L x L matrices, causal 2 + 2 bytes per
    score in bfloat16 for the last step), and starts well inside memory; the lab's token sweep
    skips naive points over a budget below the card (tests/test_gpu_profile.py: every card).
    Models, not measurements."""
    gpu, card = profile.PRESETS["gpu"], profile.CARDS["A100-80GB"]
    assert gpu["wall_budget"] is None
    assert 2 * 4 * max(gpu["wall_lengths"]) ** 2 > card.total_bytes
    assert (2 * 2 + 2) * max(gpu["final_lengths"]) ** 2 > card.total_bytes
    assert 2 * 4 * min(gpu["wall_lengths"]) ** 2 < 1e9
    assert 0 < gpu["lab_budget"] < card.total_bytes
    assert (2 + 2) * 8 * 4 * 2 * max(gpu["lab_tokens"]) ** 2 > gpu["lab_budget"]


def test_sweeps_run_in_bfloat16_only_on_a_gpu_that_has_it():
    """Flash SDPA takes only half precision: the reference card's sweeps are bfloat16 (a T4's
    float16: tests/test_gpu_profile.py), the CPU's float32 (bfloat16 matmuls are slow on most
    CPUs)."""
    assert profile.PRESETS["gpu"]["sweep_dtype"] is torch.bfloat16
    assert profile.PRESETS["gpu"]["fused_backend"] == "flash"
    assert profile.PRESETS["cpu"]["sweep_dtype"] is profile.PRESETS["smoke"]["sweep_dtype"] is torch.float32


def test_the_cpu_profiles_fused_backend_is_the_one_sdpa_runs_there():
    """The fused sweeps' inputs on a CPU: 4 heads of 64, float32, causal."""
    from labsupport.timing import attention_inputs, sdpa_backend_used
    q, k, v = attention_inputs(256, heads=4)
    assert sdpa_backend_used(q, k, v, is_causal=True) == profile.PRESETS["cpu"]["fused_backend"]
    assert profile.PRESETS["smoke"]["fused_backend"] == profile.PRESETS["cpu"]["fused_backend"]


def test_the_lab_races_every_network_at_its_chosen_size_over_three_seeds_in_every_profile():
    """The lab's race (labsupport.racers): every network at the width the committed sweep
    chose on validation, over 3 seeds, the same training in the cpu and gpu profiles (the
    lab's answer is a set of checked verdicts on it); ablations and Step 5 over at least 2."""
    from labsupport import racers

    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["lab_train_stride"] <= 2 and cpu["lab_seeds"] >= 3
    assert min(cpu["lab_ablation_seeds"], cpu["lab_linear_seeds"], cpu["lab_stretch_seeds"]) >= 2
    assert {k: gpu[k] for k in profile.LAB_TRAINING} == {k: cpu[k] for k in profile.LAB_TRAINING}
    assert set(racers.SIZES) == {24, 168}
    assert all(set(sizes) == set(racers.WIDTHS) for sizes in racers.SIZES.values())


def test_the_heads_verdicts_read_the_same_readers_in_both_profiles():
    """12.2's lag readers train on the CPU in every profile and its checked verdicts read the
    first seed's four-head reader: the same epochs in cpu and gpu; several seeds for the
    protocol's spread, more on the GPU runner, also for the book's forecaster."""
    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["heads_epochs"] == gpu["heads_epochs"]
    assert cpu["heads_train_stride"] == gpu["heads_train_stride"]
    assert 2 <= cpu["heads_seeds"] <= gpu["heads_seeds"]
    assert 2 <= cpu["forecaster_seeds"] <= gpu["forecaster_seeds"]
    assert cpu["deep_steps"] == gpu["deep_steps"]          # the deep stack trains on the CPU too
    assert all(p["forecaster_max_epochs"] >= 2 for p in profile.PRESETS.values()), \
        "compare.warmup_cosine needs a warm-up epoch and one more"


def test_the_efficient_table_trains_to_early_stopping_with_enough_seeds():
    """12.5's accuracy table (the comparison protocol): 3 seeds for full attention, the
    lesson's reference, at least 2 for every other kernel; an epoch budget well beyond the
    6-18 epochs that early stopping took (tools/experiments/README.md), a safety net rather
    than what ends a run. The table is the same in the cpu and gpu profiles, since the
    section's checked claims read its verdicts."""
    cpu, gpu = profile.PRESETS["cpu"], profile.PRESETS["gpu"]
    assert cpu["efficient_full_seeds"] >= 3 and cpu["efficient_seeds"] >= 2
    assert cpu["efficient_train_stride"] <= 2
    assert cpu["efficient_max_epochs"] >= 25
    keys = [k for k in cpu if k.startswith("efficient_") and k not in
            ("efficient_lengths", "efficient_flash_lengths", "efficient_budget")]
    assert {k: gpu[k] for k in keys} == {k: cpu[k] for k in keys}
