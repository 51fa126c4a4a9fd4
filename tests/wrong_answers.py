"""One typical wrong answer per self-check, as source code, keyed by the check's name.

tests/test_checks.py runs each through its check and expects its hint; tests/test_grading.py
writes each into the exercise of an nbgrader submission (the body replaces the stub, so
the ``def`` line must be the exercise's own) and expects the exercise to lose its points
and the hint to reach the feedback. A source may use ``torch``, which every notebook
imports. A new exercise needs an entry here: both tests name the check until it has one.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class WrongAnswer:
    source: str        # a whole function, with the exercise's def line
    hint: str          # a fragment of the hint its check gives

    def function(self):
        """The function the source defines (with ``torch`` in its globals)."""
        import torch
        namespace = {"torch": torch}
        exec(compile(self.source, f"<wrong answer {self.name}>", "exec"), namespace)
        return namespace[self.name]

    @property
    def _def(self) -> ast.FunctionDef:
        return ast.parse(self.source).body[0]

    @property
    def name(self) -> str:
        return self._def.name

    @property
    def body(self) -> str:
        """The function's body, dedented: what a student would write in place of the stub."""
        lines = self.source.splitlines()
        return textwrap.dedent("\n".join(lines[self._def.body[0].lineno - 1:]))


def signature(source: str) -> str:
    """``name(arguments)`` of the first function a cell defines, as written."""
    func = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    return f"{func.name}({ast.unparse(func.args)})"


def missing(check: str) -> str:
    return (f"no wrong answer for checks.{check} in tests/wrong_answers.py: add a typical mistake "
            "(the exercise's function, wrong) and a fragment of the hint its check gives")


def _answer(source: str, hint: str) -> WrongAnswer:
    return WrongAnswer(textwrap.dedent(source).strip() + "\n", hint)


WRONG_ANSWERS = {
    # 12.1 Self-attention (the lab repeats the first two)
    "attention_weights": _answer("""
        def attention_weights(q, k):
            scores = q @ k.transpose(-2, -1)          # not scaled by 1 / sqrt(d)
            return scores.softmax(dim=-1)
        """, "scale the scores by 1 / sqrt(d)"),
    "causal_attention": _answer("""
        def causal_attention(q, k, v):
            L = q.shape[-2]
            allowed = torch.ones(L, L, dtype=torch.bool).triu()     # the future, not the past
            scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
            return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
        """, "the mask is flipped"),
    "score_matrix_bytes": _answer("""
        def score_matrix_bytes(batch, heads, length, dtype):
            return length * length * torch.tensor([], dtype=dtype).element_size()
        """, "multiply by batch * heads"),
    "predicted_peak": _answer("""
        def predicted_peak_bytes():
            B, H, L, element = 2, 4, 1024, 4
            return B * H * L * L * element          # one score matrix; two are alive at once
        """, "naive attention holds two at once"),
    "split_heads": _answer("""
        def split_heads(x, n_heads):
            B, L, d_model = x.shape
            return x.view(B, n_heads, L, d_model // n_heads)     # mixes positions into heads
        """, "transpose(1, 2)"),
    # 12.2 The Transformer architecture
    "feed_forward": _answer("""
        def feed_forward(x, W1, b1, W2, b2):
            return (x @ W1.T + b1) @ W2.T + b2                    # no relu
        """, "nonlinearity"),
    "pre_norm_block": _answer("""
        def pre_norm_block(x, attn, ff, norm1, norm2):
            x = norm1(x + attn(x))                                # post-norm
            return norm2(x + ff(x))
        """, "post-norm"),
    "peeks": _answer("""
        def peeks(model, x, t):
            later = x.clone()
            later[:, t + 1:] += 1.0
            return not torch.allclose(model(x), model(later))     # compares the future outputs too
        """, "compare only outputs up to t"),
    "heads_peak_ratio": _answer("""
        def predicted_peak_ratio():
            return 1.0                      # the projections are the same for any number of heads
        """, "each head keeps its own"),
    "seasonal_naive": _answer("""
        def seasonal_naive_forecast(x, period, horizon):
            last = x[:, -period - 1:-1]                           # one step too early
            return last.repeat(1, -(-horizon // period), 1)[:, :horizon]
        """, "off by one"),
    "block_parameters": _answer("""
        def block_parameters(d_model, n_heads, d_ff):
            d = d_model
            return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)   # no LayerNorms
        """, "LayerNorm"),
    # 12.3 Positional and temporal encodings
    "sinusoidal": _answer("""
        def sinusoidal(length, d_model):
            p = torch.arange(length, dtype=torch.float64)[:, None]
            omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
            angles = p * omega
            return torch.stack([angles.cos(), angles.sin()], dim=-1).flatten(-2)   # cos first
        """, "swapped"),
    "rotate_pairs": _answer("""
        def rotate_pairs(x, position, base=10000.0):
            D = x.shape[-1]
            theta = position * base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
            a, b = x[0::2], x[1::2]
            rotated = (a * theta.cos() + b * theta.sin(), b * theta.cos() - a * theta.sin())
            return torch.stack(rotated, dim=-1).flatten()         # turned the wrong way
        """, "clockwise"),
    "alibi_slopes": _answer("""
        def alibi_slopes_for(n_heads):
            ratio = 2 ** (-8 / n_heads)
            return [ratio ** h for h in range(n_heads)]           # starts at 1, not at the ratio
        """, "off by one"),
    "hour_features": _answer("""
        def hour_features(hours):
            angle = hours / 24                                    # no 2 pi
            return torch.stack([angle.sin(), angle.cos()], dim=-1)
        """, "2 pi"),
    "untrained_buckets": _answer("""
        def untrained_buckets_read():
            return list(range(27, 111))                           # offsets, not buckets
        """, "offsets, not buckets"),
    # 12.4 Long sequences and memory
    "online_step": _answer("""
        def online_step(m, l, acc, scores, v):
            m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
            p = (scores - m_new).exp()
            fix = (m - m_new).exp()
            return m_new, l * fix + p.sum(-1, keepdim=True), acc + p @ v   # acc not rescaled
        """, "multiply the old l and the old acc"),
    "compress_mean": _answer("""
        def compress_mean(states, rate):
            return states[:, ::rate]                              # keeps every rate-th state
        """, "every 4th state"),
    "kept_fractions": _answer("""
        def kept_fractions():
            return {24: 1.0, 168: 1.0, 8766: 1.0}                 # every cycle survives
        """, "one whole period"),
    "patch_count": _answer("""
        def patch_count(lookback, patch_len, stride):
            return (lookback - patch_len) // stride               # forgets the first patch
        """, "one short"),
    "stride_saving": _answer("""
        def stride_saving():
            return 12                                             # fewer tokens, not their square
        """, "square of the token count"),
    # the lab
    "ridge_weights": _answer("""
        def ridge_weights(X, Y, penalty):
            return torch.linalg.solve(X.T @ X, X.T @ Y)           # least squares: no penalty
        """, "without the penalty"),
    "step_peak": _answer("""
        def predicted_step_peak(batch, heads, tokens, layers):
            matrix = batch * heads * tokens * tokens * 4
            return 3 * layers * matrix                            # scores, masked scores, weights per layer
        """, "keeps only what the backward needs"),
    "elu_feature_map": _answer("""
        def elu_feature_map(x):
            return torch.nn.functional.elu(x)                     # negative below zero
        """, "add 1"),
    # 12.5 Efficient attention
    "positive_features": _answer("""
        def positive_features(x, w):
            return torch.exp(x @ w.T) / w.shape[0] ** 0.5         # no -|x|^2 / 2
        """, "subtract |x|^2 / 2"),
    "blocked_local_attention": _answer("""
        def blocked_local_attention(q, k, v, block):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        """, "full causal attention"),
    "decayed_linear_attention": _answer("""
        def decayed_linear_attention(q, k, v, gamma):
            phi_qs, phi_ks = (torch.nn.functional.elu(t) + 1 for t in (q, k))
            S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
            for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                S = gamma * S + torch.outer(phi_k, v_t)
                z = z + phi_k                                     # the normaliser does not decay
                outs.append(phi_q @ S / (phi_q @ z))
            return torch.stack(outs)
        """, "normaliser z"),
    "performer_error_exponent": _answer("""
        def predicted_error_exponent():
            return -1.0                     # how the variance falls, not the error
        """, "its square root"),
}
