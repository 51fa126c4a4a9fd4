"""The gpu profile sized for the card it runs on, tested on faked CUDA devices: every sweep
point meant to run fits 60% of the card by the byte model of what that sweep allocates
(`labsupport.byte_models` and the sections' own, checked against measured peaks in
test_kernel_memory.py, or peaks measured here on the CPU), the sweeps meant to hit the
out-of-memory wall end past the card's memory, the dtype and the SDPA backend follow the
compute capability, and smaller cards never get longer sweeps."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

import pytest
import torch

from labsupport import profile
from labsupport.byte_models import inputs_bytes, naive_bytes
from labsupport.sections import (  # noqa: F401  (registers the sizes)
    NAMES,
    efficient_attention,
    lab,
    long_sequences,
    positional_encodings,
    self_attention,
    transformer,
)
from labsupport.sections.efficient_attention.sizes import naive_sweep_bytes as efficient_naive_bytes
from labsupport.sections.lab.sizes import step_bytes as lab_step_bytes
from labsupport.sections.long_sequences.sizes import final_bytes, fused_sweep_bytes
from labsupport.sections.self_attention.sizes import bill_bytes

# every card-dependent size by the short name the tests below use: (section, field)
FLAT = {"bill_lengths": ("self_attention", "bill_lengths"),
        **{k: ("long_sequences", k) for k in ("wall_lengths", "wall_budget", "fused_lengths",
                                                "final_lengths", "flash_block", "segment_totals",
                                                "backward_lengths")},
        "efficient_lengths": ("efficient_attention", "lengths"),
        "efficient_flash_lengths": ("efficient_attention", "flash_lengths"),
        "efficient_budget": ("efficient_attention", "budget"),
        "lab_tokens": ("lab", "tokens"), "lab_budget": ("lab", "budget")}


class Flat:
    """A profile read by the short names of `FLAT` (``F.lab_budget`` is ``P.lab.budget``)."""

    def __init__(self, P):
        self.P = P
        self.settings = {k: getattr(getattr(P, sec), f) for k, (sec, f) in FLAT.items()}

    def __getattr__(self, key):
        return self.settings[key] if key in self.settings else getattr(self.P, key)

    def __str__(self) -> str:
        return str(self.P)


def training_sizes(P) -> dict:
    """Every size of every section that is not one of `FLAT`: epochs, seeds, widths, strides."""
    sized = set(FLAT.values())
    return {(name, f.name): getattr(getattr(P, name), f.name) for name in NAMES
            for f in dataclasses.fields(getattr(P, name)) if (name, f.name) not in sized}


FRACTION = 0.6                       # of the card's memory, the most a point meant to run may hold
MiB = 2 ** 20


@dataclass(frozen=True)
class Spec:
    """A card as torch reports it (memory in bytes, about what these cards report)."""

    key: str
    name: str
    total: int
    capability: tuple
    cudnn: int | None = 91002        # cuDNN 9.10.2
    cuda: str = "12.8"

    @property
    def free(self) -> int:           # the CUDA context and the driver hold a few hundred MiB
        return self.total - 400 * MiB


CARDS = [                            # smallest first
    Spec("GTX1080Ti", "NVIDIA GeForce GTX 1080 Ti", 11_721_506_816, (6, 1)),
    Spec("RTX3060", "NVIDIA GeForce RTX 3060", 12_622_168_064, (8, 6)),
    Spec("T4", "Tesla T4", 15_828_320_256, (7, 5)),
    Spec("L4", "NVIDIA L4", 23_802_478_592, (8, 9)),
    Spec("A100-40GB", "NVIDIA A100-SXM4-40GB", 42_298_834_944, (8, 0)),
    Spec("H100", "NVIDIA H100 80GB HBM3", 84_986_691_584, (9, 0)),
    Spec("A100-80GB", "NVIDIA A100-SXM4-80GB", 85_051_572_224, (8, 0)),
    Spec("H200", "NVIDIA H200", 150_110_011_392, (9, 0)),
]
BY_KEY = {c.key: c for c in CARDS}

# the gpu profile as it was before it scaled with the card (sized for a 141 GB H200)
TODAY_SWEEPS = {
    "bill_lengths": (4096, 8192, 16384, 32768, 65536),
    "wall_lengths": (4096, 8192, 16384, 32768, 65536, 131072, 262144),
    "fused_lengths": (4096, 8192, 16384, 32768),
    "final_lengths": (16384, 32768, 65536, 131072),
    "backward_lengths": (1024, 2048, 4096),
    "segment_totals": (2048, 4096, 8192, 16384),
    "lab_tokens": (256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    "efficient_lengths": (1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "efficient_flash_lengths": (1024, 2048, 4096, 8192),
}
SWEEPS = tuple(TODAY_SWEEPS)


# --- peaks measured on the CPU: the kernels whose memory the notebooks do not model ---------------

def fit_quadratic(points):
    """(a, b) of peak = a n^2 + b n through two measured (n, peak) points."""
    (n1, p1), (n2, p2) = points
    a = (p2 / n2 - p1 / n1) / (n2 - n1)
    return a, p1 / n1 - a * n1


@pytest.fixture(scope="module")
def measured():
    """Coefficients of peaks measured on the CPU in float32 (an upper bound on a GPU's, whose
    fused kernels hold less and whose sweeps run in half precision)."""
    from labsupport.attention import (
        LinformerAttention,
        flash_attention,
        linear_attention,
        local_attention,
        longformer_attention,
        naive_attention,
        performer_attention,
        sdpa,
    )
    from labsupport.layers import TransformerEncoder
    from labsupport.memory import SegmentRecurrentEncoder, run_segments
    from labsupport.timing import attention_inputs, peak_memory

    def step(kernel, n):                                   # the lab's encoder, forward + backward
        with torch.random.fork_rng():
            torch.manual_seed(0)
            encoder = TransformerEncoder(64, 4, 2, 128, kernel=kernel)
            x = torch.randn(8, n, 64)

        def run():
            leaf = x.detach().requires_grad_()
            encoder(leaf, is_causal=True).sum().backward()
        return peak_memory(run)

    def one_pass(T):                                       # 12.4's segment recurrence, one segment of T
        with torch.random.fork_rng():
            torch.manual_seed(0)
            encoder = SegmentRecurrentEncoder(d_model=32, n_heads=4, n_layers=1, mem_len=128).eval()
            x = torch.randn(1, T, 32)
        with torch.no_grad():
            return peak_memory(lambda: run_segments(encoder, x, T))

    def backward(L):                                       # 12.4's training sweep: naive, causal
        q, k, v = (t.requires_grad_() for t in attention_inputs(L))
        return peak_memory(lambda: naive_attention(q, k, v, is_causal=True).sum().backward())

    def linformer(q, k, v):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            return LinformerAttention(k.shape[-2], 64).requires_grad_(False)(q, k, v)

    others = {"local": partial(local_attention, window=64),
              "longformer": partial(longformer_attention, window=64, global_tokens=[0]),
              "linformer": linformer, "linear": linear_attention,
              "performer": partial(performer_attention, num_features=128, generator=0),
              "flash": flash_attention, "sdpa": sdpa}

    def efficient(L):                                      # 12.5's sweep, 4 heads of 32: the largest peak
        qkv = attention_inputs(L, heads=4, head_dim=32)
        with torch.no_grad():
            return max(peak_memory(kernel, *qkv) for kernel in others.values())

    def linear_in(fn, n1, n2):                             # (bytes per unit of length, peak at n1)
        p1, p2 = fn(n1), fn(n2)
        return (p2 - p1) / (n2 - n1), p1

    return dict(lab_naive=fit_quadratic([(n, step("naive", n)) for n in (128, 256)]),
                lab_fast={kernel: linear_in(partial(step, kernel), 256, 512)
                          for kernel in ("sdpa", "linear")},
                segment=fit_quadratic([(T, one_pass(T)) for T in (256, 512)]),
                backward=fit_quadratic([(L, backward(L)) for L in (256, 512)]),
                efficient=linear_in(efficient, 512, 1024))


# --- a faked CUDA device --------------------------------------------------------------------------

@pytest.fixture
def fake_gpu(monkeypatch):
    """``fake_gpu(spec)`` makes torch report that card (as tests/test_provenance.py's fake_cuda
    does for the allocator) and returns ``profile.current()`` on it."""
    monkeypatch.delenv(profile.ENV_VAR, raising=False)
    monkeypatch.delenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", raising=False)

    def install(spec: Spec, *, free=None):
        major, minor = spec.capability
        props = SimpleNamespace(name=spec.name, total_memory=spec.total, major=major, minor=minor)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: spec.capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: spec.name)
        monkeypatch.setattr(torch.cuda, "mem_get_info",
                            lambda device=None: (spec.free if free is None else free, spec.total))
        # torch >= 2.3 says True on a T4 too, where bfloat16 is emulated
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True: including_emulation or major >= 8)
        monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: spec.cudnn is not None)
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda: spec.cudnn)
        monkeypatch.setattr(torch.version, "cuda", spec.cuda)
        return Flat(profile.current())
    return install


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def dtype_size(P) -> int:
    return torch.finfo(P.sweep_dtype).bits // 8


def usable(spec: Spec) -> float:
    return FRACTION * min(spec.total, spec.free)


@pytest.mark.parametrize("spec", CARDS, ids=[c.key for c in CARDS])
def test_the_profile_builds_for_the_card_it_finds(fake_gpu, spec):
    P = fake_gpu(spec)
    assert (P.name, P.device.type) == ("gpu", "cuda")
    assert P.card.name == spec.name and P.card.total_bytes == spec.total
    assert P.card.capability == spec.capability
    for key in SWEEPS:
        lengths = P.settings[key]
        assert len(lengths) >= 3 and list(lengths) == sorted(set(lengths)), f"{key}: {lengths}"
        assert all(is_power_of_two(n) for n in lengths), f"{key}: {lengths}"
    # training sizes (epochs, seeds, widths, strides) do not depend on the card
    assert training_sizes(P.P) == training_sizes(profile.current("gpu", card="A100-80GB")), \
        "the same on every card"


@pytest.mark.parametrize("spec", CARDS, ids=[c.key for c in CARDS])
def test_every_point_meant_to_run_fits_60_percent_of_the_card(fake_gpu, spec, measured):
    P, room = fake_gpu(spec), usable(spec)
    size = dtype_size(P)
    runs = lambda key: P.settings[key][:-1] if key in ("wall_lengths", "final_lengths") \
        else P.settings[key]                                               # noqa: E731 (the probe)
    quadratic = lambda fit, n: fit[0] * n * n + fit[1] * n                 # noqa: E731
    assert all(bill_bytes(L) <= room for L in P.bill_lengths)
    assert all(bill_bytes(L) <= room for L in runs("wall_lengths"))     # 12.4's wall is 12.1's bill
    assert all(fused_sweep_bytes(L, size=size, block=P.flash_block) <= room for L in P.fused_lengths)
    assert all(final_bytes(L, size=size) <= room for L in runs("final_lengths"))
    assert all(quadratic(measured["backward"], L) <= room for L in P.backward_lengths)
    assert all(quadratic(measured["segment"], T) <= room for T in P.segment_totals)
    # 12.5: every kernel but naive runs at every length, naive where the budget lets it
    per_length, at_512 = measured["efficient"]
    assert at_512 + per_length * (max(P.efficient_lengths) - 512) <= room
    assert at_512 + per_length * (max(P.efficient_flash_lengths) - 512) <= room     # our tiled loop
    admitted = [L for L in P.efficient_lengths if efficient_naive_bytes(L, size=size) <= P.efficient_budget]
    assert all(efficient_naive_bytes(L, size=size) + inputs_bytes(L, heads=4, head_dim=32, size=size) <= room
               for L in admitted)
    # the lab: SDPA and linear attention at every length, naive where the budget lets it
    for kernel, (per_token, at_256) in measured["lab_fast"].items():
        assert at_256 + per_token * (max(P.lab_tokens) - 256) <= room, kernel
    admitted = [N for N in P.lab_tokens if lab_step_bytes(N, size=size) <= P.lab_budget]
    a, b = measured["lab_naive"]                     # float32 at 128 and 256 tokens: b is per token
    assert all(lab_step_bytes(N, size=size) + b * N <= room for N in admitted)
    assert a * 128 ** 2 >= 0.9 * lab_step_bytes(128, size=4), "the lab's model counts what it measures"


@pytest.mark.parametrize("spec", CARDS, ids=[c.key for c in CARDS])
def test_the_naive_walls_end_past_the_card_and_the_budgets_skip_within_it(fake_gpu, spec):
    """12.4's naive sweeps have no budget (cost_sweep catches the OOM): the wall and the last
    step end at a length whose model exceeds the whole card. 12.5 and the lab skip naive
    points over a budget below the card's memory: at least 3 run, at least one is skipped."""
    P = fake_gpu(spec)
    size = dtype_size(P)
    assert P.wall_budget is None
    assert naive_bytes(P.wall_lengths[-1]) > spec.total
    assert naive_bytes(P.final_lengths[-1], causal=True, size=size) > spec.total
    for budget in (P.efficient_budget, P.lab_budget):
        assert 0 < budget <= usable(spec) < spec.total
    naive_12_5 = [efficient_naive_bytes(L, size=size) for L in P.efficient_lengths]
    lab = [lab_step_bytes(N, size=size) for N in P.lab_tokens]
    for models, budget in ((naive_12_5, P.efficient_budget), (lab, P.lab_budget)):
        runs = sum(m <= budget for m in models)
        assert runs >= 3 and runs < len(models), (models, budget)


EXPECTED_PRECISION = {          # (sweep dtype, the backend SDPA runs for the fused sweeps)
    "GTX1080Ti": (torch.float32, "efficient"),       # no tensor cores: float32, memory-efficient
    "T4": (torch.float16, "efficient"),              # 7.5: no bfloat16, no flash
    "RTX3060": (torch.bfloat16, "flash"), "L4": (torch.bfloat16, "flash"),
    "A100-40GB": (torch.bfloat16, "flash"), "A100-80GB": (torch.bfloat16, "flash"),
    "H100": (torch.bfloat16, "flash"), "H200": (torch.bfloat16, "flash"),   # cuDNN 9.10: flash first
}


@pytest.mark.parametrize("spec", CARDS, ids=[c.key for c in CARDS])
def test_dtype_and_backend_follow_the_compute_capability(fake_gpu, spec):
    P = fake_gpu(spec)
    assert (P.sweep_dtype, P.fused_backend) == EXPECTED_PRECISION[spec.key]


def test_hopper_with_a_recent_cudnn_expects_cudnn_attention(fake_gpu, monkeypatch):
    """torch puts cuDNN attention first on 9.x and 10.x cards with cuDNN newer than 9.15
    (sdp_utils.cpp, check_prefer_cudnn_attention; on CUDA 12 builds only for x.0 and x.3),
    unless TORCH_CUDNN_SDPA_DEPRIORITIZED is set."""
    h100 = BY_KEY["H100"]
    assert fake_gpu(Spec(**{**h100.__dict__, "cudnn": 91701, "cuda": "13.0"})).fused_backend == "cudnn"
    assert fake_gpu(Spec(**{**h100.__dict__, "cudnn": 91701})).fused_backend == "cudnn"       # 9.0
    gh200_12 = Spec(**{**h100.__dict__, "capability": (9, 2), "cudnn": 91701})
    assert fake_gpu(gh200_12).fused_backend == "flash"
    assert fake_gpu(Spec(**{**BY_KEY["L4"].__dict__, "cudnn": 91701})).fused_backend == "flash"
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
    assert fake_gpu(Spec(**{**h100.__dict__, "cudnn": 91701})).fused_backend == "flash"


def test_smaller_cards_never_get_longer_sweeps(fake_gpu):
    profiles = [fake_gpu(spec) for spec in CARDS]            # smallest first
    for key in SWEEPS:
        longest = [max(P.settings[key]) for P in profiles]
        assert longest == sorted(longest), f"{key}: {longest}"
    for key in ("efficient_budget", "lab_budget"):
        budgets = [P.settings[key] for P in profiles]
        assert budgets == sorted(budgets), f"{key}: {budgets}"


def test_less_free_memory_shortens_the_sweeps(fake_gpu):
    """A card that another process shares: 4 GB free of a T4's 16 GB."""
    whole, shared = fake_gpu(BY_KEY["T4"]), fake_gpu(BY_KEY["T4"], free=4 * 10 ** 9)
    assert max(shared.bill_lengths) < max(whole.bill_lengths)
    assert shared.efficient_budget <= FRACTION * 4e9 and shared.lab_budget <= FRACTION * 4e9


def test_an_80_gb_card_gets_about_todays_sizes(fake_gpu):
    """The 80 GB card's sweeps are today's, but for the wall: it ends at the first length the
    card cannot hold (131072; 262144 was skipped after that OOM); its budgets are its own."""
    P = fake_gpu(BY_KEY["A100-80GB"])
    for key, today in TODAY_SWEEPS.items():
        expected = today[:-1] if key == "wall_lengths" else today
        assert P.settings[key] == expected, key
    assert 16e9 < P.efficient_budget < FRACTION * 85.1e9 and 0 < P.lab_budget < FRACTION * 85.1e9


def test_a_t4_gets_float16_sweeps_that_fit_it(fake_gpu):
    P = fake_gpu(BY_KEY["T4"])
    assert max(P.bill_lengths) == 32768 < 65536          # 65536 needs two 17 GB matrices
    assert max(P.fused_lengths) == 16384 and P.sweep_dtype is torch.float16


def test_str_and_describe_name_the_card(fake_gpu):
    P = fake_gpu(BY_KEY["T4"])
    text = str(P)
    for part in ("gpu", "Tesla T4", "15.8 GB", "7.5", "float16"):
        assert part in text, (part, text)
    lines = P.describe().splitlines()
    assert 1 <= len(lines) <= 2, lines
    for part in ("'gpu'", "Tesla T4", "15.8 GB", "7.5", "float16", "efficient",
                 "LABSUPPORT_PROFILE=cpu", 'os.environ["LABSUPPORT_PROFILE"] = "cpu"'):
        assert part in P.describe(), (part, P.describe())


def test_without_cuda_the_cpu_profile_says_so(monkeypatch):
    monkeypatch.delenv(profile.ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    P = profile.current()
    assert (P.name, P.device.type, P.card) == ("cpu", "cpu", None)
    assert str(P) == "profile 'cpu' on cpu"
    assert "without CUDA" in P.describe() and "float32" in P.describe()
    assert "LABSUPPORT_PROFILE=gpu" in P.describe()


def test_the_environment_variable_overrides_on_a_gpu(fake_gpu, monkeypatch):
    fake_gpu(BY_KEY["L4"])
    monkeypatch.setenv(profile.ENV_VAR, "cpu")
    P = profile.current()
    assert P.name == "cpu" and P.card is None and P.lab == lab.sizes.CPU
    assert "$LABSUPPORT_PROFILE" in P.describe()
    monkeypatch.setenv(profile.ENV_VAR, "gpu")
    assert profile.current().card.name == "NVIDIA L4"


def test_gpu_without_a_readable_card_is_sized_for_the_reference(monkeypatch):
    """LABSUPPORT_PROFILE=gpu on a machine without CUDA (or a torch that cannot read the
    device): the reference card's sizes, and the profile says which."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    P = Flat(profile.current("gpu"))
    reference = Flat(profile.current("gpu", card="A100-80GB"))
    assert P.settings == reference.settings and P.card.name == "NVIDIA A100-SXM4-80GB"
    assert "reference" in str(P) and "reference" in P.describe()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)      # a CPU build says so when faked
    P = Flat(profile.current("gpu"))
    assert P.device.type == "cuda" and P.settings == reference.settings and "reference" in str(P)


@pytest.mark.parametrize("key", ["T4", "L4", "A100-80GB"])
def test_a_named_card_sizes_the_gpu_profile_as_the_card_itself_would(fake_gpu, key, monkeypatch):
    on_the_card = fake_gpu(BY_KEY[key])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    named = Flat(profile.current("gpu", card=key))
    assert named.device.type == "cpu" and named.card.name == BY_KEY[key].name
    assert named.settings == on_the_card.settings
    assert (named.sweep_dtype, named.fused_backend) == (on_the_card.sweep_dtype, on_the_card.fused_backend)


def test_bad_cards_are_refused():
    with pytest.raises(ValueError, match=r"unknown card 'K80'.*expected one of \[.*'T4'"):
        profile.current("gpu", card="K80")
    with pytest.raises(TypeError, match="card must be a profile.Card or a card's name.*got int"):
        profile.current("gpu", card=3)
    with pytest.raises(ValueError, match="card= sizes the gpu profile; profile 'cpu' has fixed sizes"):
        profile.current("cpu", card="T4")
    tiny = profile.Card("Tiny", 256 * MiB, 200 * MiB, (8, 0), bf16=True)
    with pytest.raises(ValueError, match=r"Tiny.*too little memory.*LABSUPPORT_PROFILE=cpu"):
        profile.current("gpu", card=tiny).self_attention  # noqa: B018 (sizing on first read)


def test_the_size_table_lists_each_card(capsys):
    """``python -m labsupport.sections --card T4 --card L4 --card A100-80GB``: a Markdown table."""
    from labsupport.sections.__main__ import main

    main(["--card", "T4", "--card", "L4", "--card", "A100-80GB"])
    table = capsys.readouterr().out.replace("\\_", "_").splitlines()    # labsupport.markdown escapes _
    assert table[0].startswith("| setting |") and "Tesla T4" in table[0] and "NVIDIA L4" in table[0]
    rows = {line.split("|")[1].strip(): line for line in table[2:]}
    assert {"self_attention.bill_lengths", "long_sequences.wall_lengths", "efficient_attention.budget",
            "sweep dtype", "fused backend"} <= set(rows)
    assert "float16" in rows["sweep dtype"] and "bfloat16" in rows["sweep dtype"]
    assert len(table[1].split("|")) == len(table[0].split("|")) == 6      # setting + 3 cards
