"""The kernels by name: `KERNELS` and `get_kernel`, and what a kernel declares
(`kernel_spec`, `kernel_name`, `explicit_attention`), read through any
``functools.partial`` that fixes its options.
"""
from __future__ import annotations

from functools import partial

from .exact import naive_attention, sdpa
from .flash import flash_attention
from .kernelized import linear_attention, performer_attention
from .sparse import local_attention, longformer_attention
from .spec import UNDECLARED, Kernel, KernelSpec

KERNELS: dict[str, Kernel] = {
    "naive": naive_attention,
    "sdpa": sdpa,
    "flash": flash_attention,
    # 12.5, with defaults for the book's series (a few hundred steps); call the functions
    # themselves for other windows or feature counts.
    "local": partial(local_attention, window=16),
    "longformer": partial(longformer_attention, window=16, global_tokens=(0,)),
    "linear": linear_attention,
    "performer": partial(performer_attention, num_features=128, generator=0),  # seed 0: fixed features
}


def get_kernel(kernel: str | Kernel) -> Kernel:
    """Resolve a kernel given by name (a key of `KERNELS`) or as a callable."""
    if isinstance(kernel, type) and getattr(kernel, "spec", UNDECLARED).module:
        raise TypeError(f"{kernel.__name__} is a module class: pass an instance, "
                        f"e.g. {kernel.__name__}(...) with its arguments")
    if callable(kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[kernel]


def _unwrap(kernel) -> tuple[object, dict]:
    """The function under any ``functools.partial`` layers, and the keywords they fix."""
    keywords = {}
    while isinstance(kernel, partial):
        keywords = {**kernel.keywords, **keywords}                     # outer layers win
        kernel = kernel.func
    return kernel, keywords


def kernel_spec(kernel) -> KernelSpec:
    """The `KernelSpec` declared for ``kernel``: a name in `KERNELS`, a function, a
    ``functools.partial`` of one or a module instance. An undeclared callable gets
    `UNDECLARED` (mask and is_causal passed through; no bias, dropout or weights).

    >>> kernel_spec("local").exact, kernel_spec("linear").exact, kernel_spec("flash").dropout
    (True, False, False)
    """
    spec = getattr(_unwrap(get_kernel(kernel))[0], "spec", None)
    return spec if isinstance(spec, KernelSpec) else UNDECLARED


def kernel_name(kernel) -> str:
    """A short name for messages: ``'local_attention'``, ``'LinformerAttention'``, ``'<lambda>'``."""
    base = _unwrap(get_kernel(kernel))[0]
    return getattr(base, "__name__", type(base).__name__)


def explicit_attention(kernel, q, k, v, **options):
    """``(out, weights (..., L, S))`` of ``kernel`` with its weights formed explicitly, through
    its spec's ``explicit`` (a partial's fixed options included). Raises ``ValueError`` for
    a kernel that never forms the weights (an approximation) or declares no way to."""
    spec, (_, fixed), name = kernel_spec(kernel), _unwrap(get_kernel(kernel)), kernel_name(kernel)
    if spec.explicit is None and not spec.exact and spec is not UNDECLARED:
        raise ValueError(f"return_weights=True: kernel {name!r} is an approximation that never forms the "
                         "(L, S) weights, and full softmax weights would belong to another model; look "
                         "at weights with an exact kernel ('naive', 'sdpa', 'flash') or a sliding window "
                         "('local', 'longformer'), or call without return_weights")
    if spec.explicit is None:
        raise ValueError(f"return_weights=True: kernel {name!r} declares no explicit weights; declare "
                         "them with @attention_kernel(..., explicit=fn), fn(q, k, v, **options) -> "
                         "(out, weights), or call without return_weights")
    return spec.explicit(q, k, v, **{**fixed, **options})
