import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tol(dtype):
    """assert_close tolerances by dtype (STYLE.md)."""
    return {torch.float64: dict(atol=1e-10, rtol=1e-10),
            torch.float32: dict(atol=1e-5, rtol=1.3e-6),
            torch.float16: dict(atol=1e-3, rtol=1e-3),
            torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}[dtype]
