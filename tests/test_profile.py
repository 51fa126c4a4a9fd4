"""The profiles and the sections' sizes: chosen by name or environment, each section's sizes
read as ``P.<section>.<size>`` from what it registered, smoke cheaper than cpu, the gpu
profile's sweeps reaching the wall on the reference card."""
import dataclasses
import importlib

import pytest
import torch

from labsupport import profile
from labsupport.sections import NAMES

SECTIONS = {name: importlib.import_module(f"labsupport.sections.{name}") for name in NAMES}


def test_env_var_overrides_and_argument_wins(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "gpu")
    assert profile.current().name == "gpu"
    assert profile.current("cpu").name == "cpu"
    monkeypatch.delenv(profile.ENV_VAR)
    assert profile.current().name == profile.default_name()


def test_unknown_profile_and_section(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "tpu")
    with pytest.raises(ValueError, match=r"unknown profile 'tpu'.*LABSUPPORT_PROFILE"):
        profile.current()
    with pytest.raises(AttributeError, match=r"'cpu' has no sizes named 'nope'.*import "
                                             r"labsupport.sections.nope.*registered: .*self_attention"):
        profile.current("cpu").nope  # noqa: B018 (reading the name is what raises)


def test_every_section_registers_its_sizes_and_the_profile_reads_them():
    """``P.<section>`` is the preset the section registered for that profile: a frozen
    dataclass, equal on every read."""
    assert set(NAMES) <= set(profile.registered())
    for name in NAMES:
        sizes = profile.registered()[name]
        for preset in profile.PRESETS:
            P = profile.current(preset, card="A100-80GB" if preset == "gpu" else None)
            got = getattr(P, name)
            assert got == getattr(P, name) and dataclasses.is_dataclass(got)
            assert got == sizes.for_profile(preset, P.card), (name, preset)
            assert type(got) is type(sizes.cpu)
    P = profile.current("cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        P.self_attention.bill_lengths = (1, 2, 3)


def test_register_refuses_what_it_cannot_read():
    @dataclasses.dataclass(frozen=True)
    class Demo:
        n: int

    with pytest.raises(ValueError, match=r"by_card names \['m'\], which are not fields of Demo"):
        profile.register("demo_sizes", cpu=Demo(1), by_card=("m",))
    with pytest.raises(ValueError, match=r"'demo sizes' must be a Python identifier"):
        profile.register("demo sizes", cpu=Demo(1))
    with pytest.raises(TypeError, match=r"smoke must be an instance of the section's sizes dataclass"):
        profile.register("demo_sizes", cpu=Demo(1), smoke={"n": 1})
    assert "demo_sizes" not in profile.registered()


def _fields(sizes):
    return {f.name: getattr(sizes, f.name) for f in dataclasses.fields(sizes)}


@pytest.mark.parametrize("name", NAMES)
def test_smoke_trains_less_and_sweeps_less_within_the_cpu_lengths(name):
    """smoke runs every line at less cost: the nbgrader test runs each notebook 3 times."""
    cpu = _fields(getattr(profile.current("cpu"), name))
    smoke = _fields(getattr(profile.current("smoke"), name))
    trained = [k for k in cpu if k.endswith(("epochs", "_steps"))]
    assert all(smoke[k] < cpu[k] for k in trained), name
    assert all(smoke[k] == cpu[k] for k in cpu if k.endswith("budget"))
    sweeps = [k for k in cpu if k.endswith(("lengths", "tokens", "_totals")) and isinstance(cpu[k], tuple)]
    for k in sweeps:
        assert len(smoke[k]) >= 3 and list(smoke[k]) == sorted(smoke[k]), f"{k}: fits use the last 3"
        assert max(smoke[k]) <= max(cpu[k]), k


def test_gpu_sweeps_reach_the_out_of_memory_wall():
    """The gpu profile sized for the reference card (an 80 GB A100): its naive wall ends in OOM
    past the card (2 float32 L x L matrices, causal 2 + 2 bytes per score in bfloat16 for the
    last step), and starts well inside memory; the lab's token sweep skips naive points over a
    budget below the card (tests/test_gpu_profile.py: every card). Models, not measurements."""
    P, card = profile.current("gpu", card="A100-80GB"), profile.CARDS["A100-80GB"]
    long = P.long_sequences
    assert long.wall_budget is None
    assert 2 * 4 * max(long.wall_lengths) ** 2 > card.total_bytes
    assert (2 * 2 + 2) * max(long.final_lengths) ** 2 > card.total_bytes
    assert 2 * 4 * min(long.wall_lengths) ** 2 < 1e9
    assert 0 < P.lab.budget < card.total_bytes
    assert (2 + 2) * 8 * 4 * 2 * max(P.lab.tokens) ** 2 > P.lab.budget


def test_sweeps_run_in_bfloat16_only_on_a_gpu_that_has_it():
    """Flash SDPA takes only half precision: the reference card's sweeps are bfloat16 (a T4's
    float16: tests/test_gpu_profile.py), the CPU's float32 (bfloat16 matmuls are slow on most
    CPUs)."""
    gpu = profile.current("gpu", card="A100-80GB")
    assert gpu.sweep_dtype is torch.bfloat16 and gpu.fused_backend == "flash"
    assert profile.current("cpu").sweep_dtype is profile.current("smoke").sweep_dtype is torch.float32


def test_the_cpu_profiles_fused_backend_is_the_one_sdpa_runs_there():
    """The fused sweeps' inputs on a CPU: 4 heads of 64, float32, causal."""
    from labsupport.attention import sdpa_backend_used
    from labsupport.timing import attention_inputs
    q, k, v = attention_inputs(256, heads=4)
    assert sdpa_backend_used(q, k, v, is_causal=True) == profile.current("cpu").fused_backend


def test_the_size_table_lists_every_sections_card_dependent_sizes():
    table = profile.sizes_table([profile.current("gpu", card="T4"), profile.current("gpu", card="H100")])
    assert "Tesla T4" in table and "H100" in table
    for name, sizes in profile.registered().items():
        for key in sizes.by_card:
            assert f"{name}.{key}".replace("_", "\\_") in table, (name, key)
