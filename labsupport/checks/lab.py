"""Self-checks for the lab's own steps (steps 1 and 2 reuse the checks of 12.1 under the
lab's labels: ``checks.attention_weights(fn, label="Lab step 1: ...")``)."""
from __future__ import annotations

import functools

import torch

from . import reference
from .core import Hint, check, close, expect_number, expect_tensor

# --- step 3: the closed-form ridge -----------------------------------------------------------

def _ridge_case(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(40, 6, generator=g, dtype=torch.float64)        # (N, L)
    Y = torch.randn(40, 3, generator=g, dtype=torch.float64)        # (N, T)
    return X, Y


@check("Lab step 3: the closed-form ridge")
def ridge_weights(fn):
    X, Y = _ridge_case()
    eye = torch.eye(X.shape[1], dtype=torch.float64)
    for penalty in (0.5, 20.0):
        W = fn(X, Y, penalty)
        call = f"ridge_weights(X (40, 6), Y (40, 3), penalty={penalty})"
        if isinstance(W, torch.Tensor) and tuple(W.shape) == (3, 6):
            raise Hint(f"{call} returned shape (3, 6): W maps the 6 inputs to the 3 outputs, "
                       "Y ~ X @ W, so it is (L, T) = (6, 3); solve for W, not for W^T")
        expect_tensor(W, (6, 3), call)
        if close(W, reference.ridge_weights(X, Y, penalty)):
            continue
        if close(W, torch.linalg.lstsq(X, Y).solution):
            raise Hint(f"{call}: that is least squares without the penalty: add penalty * I to "
                       "X^T X before solving")
        if close(W, torch.linalg.solve(X.T @ X + penalty, X.T @ Y)):
            raise Hint(f"{call}: the penalty was added to every entry of X^T X; add it on the "
                       "diagonal only, X^T X + penalty * I (torch.eye)")
        if close(W, torch.linalg.solve(X.T @ X + penalty ** 2 * eye, X.T @ Y)) or \
                close(W, torch.linalg.solve(X.T @ X + penalty ** 0.5 * eye, X.T @ Y)):
            raise Hint(f"{call}: the penalty enters as it is, X^T X + penalty * I, not squared "
                       "or square-rooted")
        if close(W, torch.linalg.solve(X.T @ X + len(X) * penalty * eye, X.T @ Y)):
            raise Hint(f"{call}: the penalty here is not scaled by the number of rows: "
                       "X^T X + penalty * I")
        raise Hint(f"{call}: W should solve (X^T X + penalty I) W = X^T Y, the minimiser of "
                   "|X W - Y|^2 + penalty |W|^2")
    return ("W = (X^T X + penalty I)^-1 X^T Y, the minimiser of |X W - Y|^2 + penalty |W|^2, "
            "for two penalties")


# --- step 4: predict the peak memory of a training step, then measure it ---------------------

STEP_PEAK_CASES = ((2, 4, 512, 1), (2, 4, 512, 3))    # batch, heads, tokens, layers
STEP_PEAK_WIDTH = 8           # d_model of the encoder the check measures: the N x N matrices dominate
STEP_PEAK_TOLERANCE = 0.10


@functools.lru_cache(maxsize=None)
def measured_step_peak(batch: int, heads: int, tokens: int, layers: int,
                       d_model: int = STEP_PEAK_WIDTH) -> int | None:
    """The measured peak bytes of one training step (forward, then backward of the output's
    sum) of a causal `labsupport.layers.TransformerEncoder` with naive attention, in float32
    on the CPU; None where the platform cannot measure it."""
    from ..layers import TransformerEncoder
    from ..timing import peak_memory

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        encoder = TransformerEncoder(d_model, heads, layers, 2 * d_model, kernel="naive")
        x = torch.randn(batch, tokens, d_model)

    def step():
        encoder(x.detach().requires_grad_(), is_causal=True).sum().backward()

    return peak_memory(step)


def _matches(counts, formula, layers, tol=0.05) -> bool:
    return all(abs(c / formula(n) - 1) <= tol for c, n in zip(counts, layers))


@check("Lab step 4: predict the bill, then measure it")
def step_peak(fn):
    guesses = [expect_number(fn(*case), "a number of bytes") for case in STEP_PEAK_CASES]
    layers = [case[3] for case in STEP_PEAK_CASES]
    rows, where = [], "the measured peak"
    for (B, H, N, n), guess in zip(STEP_PEAK_CASES, guesses):
        measured = measured_step_peak(B, H, N, n)
        if measured is None:
            measured, where = reference.predicted_step_peak(B, H, N, n), "the byte model"
        rows.append((B, H, N, n, guess, measured))
    if all(abs(guess / measured - 1) <= STEP_PEAK_TOLERANCE for *_, guess, measured in rows):
        return (f"within {STEP_PEAK_TOLERANCE:.0%} of {where} for 1 and 3 layers: each layer keeps "
                "its softmax weights (B, H, N, N) for the backward pass, and two more such matrices "
                "are alive at the step's worst moment")
    # what the guesses are, in (B, H, N, N) float32 matrices (and in other units)
    counts = [guess / (B * H * N * N * 4) for B, H, N, n, guess, _ in rows]
    if _matches(counts, lambda n: 3 * n, layers) or _matches(counts, lambda n: 2 * n, layers):
        raise Hint("autograd does not keep every matrix of the forward pass: of a layer's scores, "
                   "masked scores and weights it keeps only what the backward needs, the softmax "
                   "weights; the others are freed once the next one exists")
    if _matches(counts, lambda n: n, layers):
        raise Hint("that counts the weights each layer keeps for the backward pass; at the worst "
                   "moment more (B, H, N, N) matrices are alive beside them: in the backward pass "
                   "of a layer, the gradient of its weights and the gradient of its scores")
    if _matches(counts, lambda n: n + 1, layers):
        raise Hint("close: that is the peak of the forward pass; in the backward pass, beside every "
                   "layer's kept weights, a layer's weight gradient and score gradient are alive "
                   "together")
    if _matches(counts, lambda n: 2, layers):
        raise Hint("that is one attention call's forward peak (scores and weights); a training step "
                   "also keeps each layer's weights for the backward pass, so the layers count")
    right = [reference.predicted_step_peak(B, H, N, n) for B, H, N, n, *_ in rows]
    for factor, hint in ((0.25, "off by a factor of 4: count bytes, and float32 takes 4 bytes per "
                                "number"),
                         (8, "that is bits; count bytes"),
                         (1 / 8, "every batch element and every head has its own N x N matrices: "
                                 "multiply by batch * heads")):
        if all(abs(g / (factor * r) - 1) <= 0.05 for g, r in zip(guesses, right)):
            raise Hint(hint)
    B, H, N, n, guess, measured = next(r for r in rows if abs(r[4] / r[5] - 1) > STEP_PEAK_TOLERANCE)
    raise Hint(f"predicted_step_peak({B}, {H}, {N}, {n}) is {guess / measured:.2f} times {where}; "
               "count the (B, H, N, N) float32 matrices alive at once: those each layer keeps for "
               "the backward pass, and those alive only while one layer computes")


# --- step 5 ----------------------------------------------------------------------------------

@check("Lab step 5: the feature map of linear attention")
def elu_feature_map(fn):
    x = torch.linspace(-6, 6, 25, dtype=torch.float64).view(5, 5)
    got = expect_tensor(fn(x), (5, 5), "elu_feature_map(x (5, 5))")
    want = torch.nn.functional.elu(x) + 1
    if close(got, want):
        return "phi(x) = elu(x) + 1: positive, so phi(q) . phi(k) can stand in for exp(q . k)"
    if close(got, torch.nn.functional.elu(x)):
        raise Hint("elu(x) is negative for x < 0; add 1 so every feature is positive")
    if close(got, torch.relu(x) + 1):
        raise Hint("use elu, not relu: elu(x) = exp(x) - 1 for x < 0 keeps a gradient there")
    if (got <= 0).any():
        raise Hint("the features must be positive, so that the weights phi(q) . phi(k) are")
    raise Hint("phi(x) = elu(x) + 1, element by element")
