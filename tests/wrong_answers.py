"""Answers to every exercise, as a student would write them, keyed by the check's name.

Each exercise has right answers in other styles than the book's, typical wrong answers
(the mistakes a strict instructor tries: each mistake class, a size or an argument typed in
as a number, a lookup table of the practice inputs) and answers that call the book's own
implementation or read the check's frames. ``kind`` says what each must get:

- ``right``: passes the practice check and the graded test (any seed);
- ``wrong``: fails the practice check with a hint containing ``says``, and the graded test;
- ``replay``: passes the practice check (it replays its inputs) and fails the graded test;
- ``forbidden``: gets 0 from the graded test, whose note contains ``says``.

tests/test_checks.py runs every answer through its check; tests/test_grading.py writes the
first answer of a kind into the exercise of an nbgrader submission (the body replaces the
stub, so the ``def`` line must be the exercise's own). A source may use ``torch``, which
every notebook imports; anything else it imports itself. A new exercise needs
entries here: both tests name the check until it has them.
"""
from __future__ import annotations

import ast
import linecache
import textwrap
from dataclasses import dataclass

KINDS = ("right", "wrong", "replay", "forbidden")


@dataclass(frozen=True)
class Answer:
    source: str        # a whole function, with the exercise's def line
    kind: str
    says: str = ""     # wrong: a fragment of its hint; forbidden: of the graded note

    def function(self, label: str = "answer", namespace: dict | None = None):
        """The function the source defines, its source readable like a notebook cell's
        (``namespace``: the notebook's other globals)."""
        import torch
        filename = f"<{label} {self.name} {abs(hash(self.source))}>"      # one per source
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace = {**(namespace or {}), "torch": torch, "__name__": "__main__"}
        exec(compile(self.source, filename, "exec"), namespace)
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


def missing(check: str, kind: str = "wrong") -> str:
    return (f"no {kind} answer for checks.{check} in tests/wrong_answers.py: add one (the exercise's "
            "function, with its def line) and what its check says")


def first(check: str, kind: str) -> Answer:
    """The first answer of ``kind`` for ``check`` (the one the grading test submits)."""
    return next(a for a in ANSWERS.get(check, ()) if a.kind == kind)


def of_kind(kind: str) -> list[tuple[str, int, Answer]]:
    """Every ``(check, index, answer)`` of ``kind``."""
    return [(check, i, a) for check, answers in ANSWERS.items() for i, a in enumerate(answers)
            if a.kind == kind]


def _a(kind: str, source: str, says: str = "") -> Answer:
    assert kind in KINDS, kind
    return Answer(textwrap.dedent(source).strip() + "\n", kind, says)


def right(source):
    return _a("right", source)


def wrong(source, says):
    return _a("wrong", source, says)


def replay(source):
    return _a("replay", source)


def forbidden(source, says):
    return _a("forbidden", source, says)


ANSWERS = {
    # --- 12.1 Self-attention (the lab repeats the first two) -----------------------------------
    "attention_weights": [
        wrong("""
            def attention_weights(q, k):
                scores = q @ k.transpose(-2, -1)          # not scaled by 1 / sqrt(d)
                return scores.softmax(dim=-1)
            """, "scale the scores by 1 / sqrt(d)"),
        right("""
            def attention_weights(q, k):
                import math
                scores = torch.einsum("...ld,...sd->...ls", q, k) / math.sqrt(q.size(-1))
                return torch.exp(scores - scores.amax(-1, keepdim=True)) / torch.exp(
                    scores - scores.amax(-1, keepdim=True)).sum(-1, keepdim=True)
            """),
        right("""
            def attention_weights(q, k):
                import torch.nn.functional as F
                return F.softmax(torch.matmul(q, k.mT) * q.shape[-1] ** -0.5, dim=q.dim() - 1)
            """),
        wrong("""
            def attention_weights(q, k):
                import math
                return (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(dim=-1)   # d typed in
            """, "divided by sqrt(8) whatever the head width"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-2)
            """, "runs over the queries (dim=-2)"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(dim=-1)
            """, "not by d"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) * q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "you multiplied"),
        wrong("""
            def attention_weights(q, k):
                return (k @ q.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "rows are queries"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-2] ** 0.5).softmax(dim=-1)
            """, "number of queries L"),
        wrong("""
            def attention_weights(q, k):
                return torch.sigmoid(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5)
            """, "sum to"),
        forbidden("""
            def attention_weights(q, k):
                from labsupport.attention import naive_attention
                return naive_attention(q, k, k, return_weights=True)[1]
            """, "labsupport.attention"),
        forbidden("""
            def attention_weights(q, k):
                import torch.nn.functional as F
                eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
                return F.scaled_dot_product_attention(q, k, eye)
            """, "scaled_dot_product_attention"),
        forbidden("""
            def attention_weights(q, k):
                import sys
                return sys._getframe(1).f_back.f_locals["q"]          # the check's own variables
            """, "sys._getframe"),
    ],
    "causal_attention": [
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).triu()     # the future, not the past
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "the mask is flipped"),
        right("""
            def causal_attention(q, k, v):
                import math
                L = q.shape[-2]
                bias = torch.full((L, L), float("-inf"), dtype=q.dtype).triu(1)
                return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]) + bias, dim=-1) @ v
            """),
        right("""
            def causal_attention(q, k, v):
                out = []
                for i in range(q.shape[-2]):           # one query at a time, over keys 0..i
                    s = q[..., i:i + 1, :] @ k[..., : i + 1, :].transpose(-2, -1) / q.shape[-1] ** 0.5
                    out.append(s.softmax(-1) @ v[..., : i + 1, :])
                return torch.cat(out, dim=-2)
            """),
        wrong("""
            def causal_attention(q, k, v):
                allowed = torch.ones(6, 6, dtype=torch.bool).tril()     # L typed in
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "your code raised RuntimeError"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril()
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-2) @ v
            """, "runs over the queries (dim=-2)"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                w = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
                return (w * torch.ones(L, L).tril()) @ v                  # zeroed after the softmax
            """, "-inf before the softmax"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril(-1)    # drops the diagonal
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "keep the diagonal"),
        wrong("""
            def causal_attention(q, k, v):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1) @ v
            """, "nothing is masked"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril()
                return (q @ k.transpose(-2, -1)).masked_fill(~allowed, float("-inf")).softmax(-1) @ v
            """, "scale the scores by 1 / sqrt(d)"),
        forbidden("""
            def causal_attention(q, k, v):
                import torch.nn.functional as F
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            """, "scaled_dot_product_attention"),
        forbidden("""
            def causal_attention(q, k, v):
                import labsupport.attention as library
                return library.naive_attention(q, k, v, is_causal=True)
            """, "labsupport.attention"),
    ],
    "score_matrix_bytes": [
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return length * length * torch.tensor([], dtype=dtype).element_size()
            """, "multiply by batch * heads"),
        right("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length ** 2 * dtype.itemsize
            """),
        right("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return torch.empty(batch, heads, length, length, dtype=dtype, device="meta").nbytes
            """),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * length * 4              # float32 for every dtype
            """, "depends on the dtype"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * torch.finfo(dtype).bits // 8
            """, "L * L entries"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * length * torch.finfo(dtype).bits
            """, "that is bits"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * length * length * dtype.itemsize         # the heads forgotten
            """, "multiply by heads too"),
        replay("""
            def score_matrix_bytes(batch, heads, length, dtype):
                table = {(1, 1, 1024): 4194304, (8, 4, 512): 16777216, (2, 8, 2048): 536870912,
                         (3, 5, 100): 300000, (2, 3, 7): 1176}
                return table.get((batch, heads, length), 0)             # the practice inputs
            """),
        forbidden("""
            def score_matrix_bytes(batch, heads, length, dtype):
                from labsupport.sections.self_attention import reference
                return reference.score_matrix_bytes(batch, heads, length, dtype)
            """, "labsupport.sections"),
    ],
    "split_heads": [
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, n_heads, L, d_model // n_heads)     # mixes positions into heads
            """, "transpose(1, 2)"),
        right("""
            def split_heads(x, n_heads):
                return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
            """),
        right("""
            def split_heads(x, n_heads):
                hd = x.shape[-1] // n_heads
                return torch.stack([x[..., h * hd:(h + 1) * hd] for h in range(n_heads)], dim=1)
            """),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, L, d_model // n_heads, n_heads).permute(0, 3, 1, 2)
            """, "every H-th element"),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.reshape(B, L, n_heads, 4).transpose(1, 2)        # head width typed in
            """, "your code raised RuntimeError"),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, L, n_heads, d_model // n_heads)          # not transposed
            """, "should have shape"),
        forbidden("""
            def split_heads(x, n_heads):
                from labsupport.layers import MultiHeadAttention
                return MultiHeadAttention(x.shape[-1], n_heads).split_heads(x)
            """, "labsupport.layers"),
    ],
    "predicted_peak": [
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return batch * heads * length * length * 4      # one score matrix; two are alive
            """, "naive attention holds two at once"),
        right("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                matrix = batch * heads * length * length * 4
                return 2 * matrix                                   # the output is a few % more
            """),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return (2 * batch * length * length + batch * length * head_dim) * 4   # no heads
            """, "multiply by the number of heads"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return 2 * batch * heads * length * length + batch * heads * length * head_dim
            """, "float32 takes 4 bytes"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return 3 * batch * heads * length * length * 4
            """, "three (B, H, L, L) matrices"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return (2 * length * length + length * head_dim) * 4
            """, "for one sequence and one head"),
        replay("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return {(2, 4, 1024, 64): 69206016, (1, 3, 512, 32): 6488064,
                        (3, 1, 768, 16): 14303232}.get((batch, heads, length, head_dim), 1)
            """),
        forbidden("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                from labsupport.sections.self_attention.checks import measured_naive_peak
                return measured_naive_peak(batch, heads, length, head_dim)   # the check's measurement
            """, "labsupport.sections"),
        forbidden("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                import torch.profiler
                with torch.profiler.profile(profile_memory=True):
                    pass
                return (2 * batch * heads * length * length + batch * heads * length * head_dim) * 4
            """, "torch.profiler"),
    ],
    # --- 12.2 The Transformer architecture -----------------------------------------------------
    "feed_forward": [
        wrong("""
            def feed_forward(x, W1, b1, W2, b2):
                return (x @ W1.T + b1) @ W2.T + b2                    # no relu
            """, "nonlinearity"),
        right("""
            def feed_forward(x, W1, b1, W2, b2):
                import torch.nn.functional as F
                return F.linear(F.relu(F.linear(x, W1, b1)), W2, b2)
            """),
        right("""
            def feed_forward(x, W1, b1, W2, b2):
                h = torch.einsum("bld,fd->blf", x, W1) + b1
                return torch.einsum("blf,df->bld", h.clamp_min(0), W2) + b2
            """),
        wrong("""
            def feed_forward(x, W1, b1, W2, b2):
                import torch.nn.functional as F
                return F.gelu(x @ W1.T + b1) @ W2.T + b2
            """, "that is GELU"),
        wrong("""
            def feed_forward(x, W1, b1, W2, b2):
                return torch.relu(x @ W1.T) @ W2.T                    # no biases
            """, "add the biases b1 and b2"),
        wrong("""
            def feed_forward(x, W1, b1, W2, b2):
                return torch.relu(x @ W1 + b1) @ W2 + b2             # weights untransposed
            """, "your code raised RuntimeError"),
        wrong("""
            def feed_forward(x, W1, b1, W2, b2):
                h = torch.relu(x @ W1.T + b1)
                return h.mean(1, keepdim=True) @ W2.T + b2 + 0 * x  # mixes the positions
            """, "only on that position's input"),
        forbidden("""
            def feed_forward(x, W1, b1, W2, b2):
                from labsupport.layers import FeedForward
                ff = FeedForward(x.shape[-1], W1.shape[0]).double()
                with torch.no_grad():
                    ff.net[0].weight.copy_(W1)
                return ff(x)
            """, "labsupport.layers"),
    ],
    "pre_norm_block": [
        wrong("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                x = norm1(x + attn(x))                                # post-norm
                return norm2(x + ff(x))
            """, "post-norm"),
        right("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                h = x + attn(norm1(x))
                out = h + ff(norm2(h))
                return out
            """),
        right("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                for norm, sublayer in ((norm1, attn), (norm2, ff)):
                    x = x + sublayer(norm(x))
                return x
            """),
        wrong("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                x = x + attn(norm2(x))                                # the LayerNorms swapped
                return x + ff(norm1(x))
            """, "norm1 and norm2 are swapped"),
        wrong("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                return ff(norm2(attn(norm1(x))))                      # no residuals
            """, "residual"),
        wrong("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                x = x + attn(norm1(x))
                return x + ff(x)                                      # ff input not normalised
            """, "ff(norm2(x))"),
        wrong("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                return x + attn(norm1(x)) + ff(norm2(x))              # side by side
            """, "side by side"),
        forbidden("""
            def pre_norm_block(x, attn, ff, norm1, norm2):
                from labsupport.layers import TransformerBlock
                block = TransformerBlock(x.shape[-1], 1).double()
                block.attn, block.ff, block.norm1, block.norm2 = attn, ff, norm1, norm2
                return block.eval()(x)
            """, "labsupport.layers"),
    ],
    "peeks": [
        wrong("""
            def peeks(model, x, t):
                later = x.clone()
                later[:, t + 1:] += 1.0
                return not torch.allclose(model(x), model(later))     # compares the future outputs too
            """, "compare only outputs up to t"),
        right("""
            def peeks(model, x, t):
                noisy = torch.cat([x[:, : t + 1], torch.randn_like(x[:, t + 1:])], dim=1)
                return bool((model(x)[:, : t + 1] - model(noisy)[:, : t + 1]).abs().max() > 1e-6)
            """),
        wrong("""
            def peeks(model, x, t):
                later = x.clone()
                later[:, t:] += 1.0                                   # changes x[:, t] too
                return not torch.allclose(model(x)[:, : t + 1], model(later)[:, : t + 1])
            """, "was flagged"),
        wrong("""
            def peeks(model, x, t):
                later = x.clone()
                later[:, t + 1:] += 1.0
                return not torch.allclose(model(x)[:, :t], model(later)[:, :t])   # leaves out t
            """, "was not caught"),
        wrong("""
            def peeks(model, x, t):
                later = x.clone()
                later[:, -1] += 1.0                                   # only the last input
                return not torch.allclose(model(x)[:, : t + 1], model(later)[:, : t + 1])
            """, "was not caught"),
        wrong("""
            def peeks(model, x, t):
                later = x.clone()
                later[:, t + 1:] += 1.0
                return torch.allclose(model(x)[:, : t + 1], model(later)[:, : t + 1])
            """, "inverted"),
        forbidden("""
            def peeks(model, x, t):
                import inspect
                return "mean(1" in inspect.getsource(type(model).forward)   # reads the model's code
            """, "inspect"),
    ],
    "heads_peak_ratio": [
        wrong("""
            def predicted_peak_ratio():
                return 1.0                      # the projections are the same for any number of heads
            """, "each head keeps its own"),
        right("""
            def predicted_peak_ratio():
                B, L, d = 2, 512, 64
                kept = 3 * B * L * d + B * L * d                      # q, k, v and the output
                return (kept + 4 * 2 * B * L * L) / (kept + 2 * B * L * L)
            """),
        wrong("""
            def predicted_peak_ratio():
                return 4.0
            """, "the q, k, v projections"),
        wrong("""
            def predicted_peak_ratio():
                return 16.0
            """, "not 16"),
        forbidden("""
            def predicted_peak_ratio():
                from labsupport.sections.transformer.checks import HEADS_SIZES, measured_heads_peaks
                peaks, _ = measured_heads_peaks(**HEADS_SIZES)
                return peaks[4] / peaks[1]
            """, "labsupport.sections"),
    ],
    "block_parameters": [
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)   # no LayerNorms
            """, "LayerNorm"),
        right("""
            def block_parameters(d_model, n_heads, d_ff):
                linear = lambda n_in, n_out: n_in * n_out + n_out
                return 4 * linear(d_model, d_model) + linear(d_model, d_ff) + linear(d_ff, d_model) \\
                    + 2 * 2 * d_model
            """),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return n_heads * 4 * (d * d + d) + 2 * d * d_ff + d_ff + d + 4 * d
            """, "more heads do not add parameters"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * d * d + 2 * d * d_ff + 4 * d                   # no biases
            """, "every nn.Linear has a bias"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                return 4 * (d_model * d_model + d_model) + 2 * d_model * 128 + 128 + d_model + 4 * d_model
            """, "look at what differs"),
        forbidden("""
            def block_parameters(d_model, n_heads, d_ff):
                from labsupport.layers import TransformerBlock
                return sum(p.numel() for p in TransformerBlock(d_model, n_heads, d_ff).parameters())
            """, "labsupport.layers"),
        forbidden("""
            def block_parameters(d_model, n_heads, d_ff):
                layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff)
                return sum(p.numel() for p in layer.parameters())
            """, "TransformerEncoderLayer"),
    ],
    # --- 12.3 Positional and temporal encodings ------------------------------------------------
    "shift_matrix": [
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(s)     # [[cos, sin], [-sin, cos]]
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(-s), torch.diag(c)
                return M
            """, "shifts the other way"),
        right("""
            def shift_matrix(k, d_model):
                import math
                blocks = []
                for i in range(d_model // 2):
                    angle = k / 10000 ** (2 * i / d_model)
                    c, s = math.cos(angle), math.sin(angle)
                    blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
                return torch.block_diag(*blocks)
            """),
        wrong("""
            def shift_matrix(k, d_model):
                import math
                c, s = math.cos(k), math.sin(k)                                  # one angle for every pair
                return torch.block_diag(*[torch.tensor([[c, -s], [s, c]], dtype=torch.float64)]
                                        * (d_model // 2))
            """, "its own frequency"),
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / 8)   # d typed in
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(-s)
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(s), torch.diag(c)
                return M
            """, "use d = 8 whatever the width"),
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model // 2, dtype=torch.float64) / d_model)   # i/d
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(-s)
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(s), torch.diag(c)
                return M
            """, "not i/d"),
        forbidden("""
            def shift_matrix(k, d_model):
                from labsupport.positional import sinusoidal_encoding
                table = sinusoidal_encoding(d_model + abs(k) + 1, d_model, dtype=torch.float64)
                return torch.linalg.lstsq(table[:d_model], table[k:k + d_model] if k >= 0
                                          else table[:d_model]).solution
            """, "labsupport.positional"),
    ],
    "hour_features": [
        wrong("""
            def hour_features(hours):
                angle = hours / 24                                    # no 2 pi
                return torch.stack([angle.sin(), angle.cos()], dim=-1)
            """, "2 pi"),
        right("""
            def hour_features(hours):
                angle = torch.deg2rad(hours.double() % 24 * 15)
                return torch.column_stack([torch.sin(angle), torch.cos(angle)])
            """),
        wrong("""
            def hour_features(hours):
                import math
                angle = 2 * math.pi * hours / 24
                return torch.stack([angle.cos(), angle.sin()], dim=-1)
            """, "(sin, cos) in that order"),
        wrong("""
            def hour_features(hours):
                import math
                angle = 2 * math.pi * hours / 12
                return torch.stack([angle.sin(), angle.cos()], dim=-1)
            """, "not 2 pi h / 12"),
        wrong("""
            def hour_features(hours):
                return torch.stack([hours / 24, 1 - hours / 24], dim=-1)
            """, "repeat every 24 hours"),
        forbidden("""
            def hour_features(hours):
                import labsupport.positional as encodings
                return encodings.time_features(hours)
            """, "labsupport.positional"),
    ],
    "untrained_buckets": [
        wrong("""
            def untrained_buckets_read():
                return list(range(27, 111))                           # offsets, not buckets
            """, "offsets, not buckets"),
        right("""
            def untrained_buckets_read():
                return list(range(20, 31))
            """),
        wrong("""
            def untrained_buckets_read():
                return list(range(21, 31))
            """, "offset 27 is new"),
        forbidden("""
            def untrained_buckets_read():
                from labsupport.positional import relative_position_bucket
                seen = lambda n: {int(b) for b in relative_position_bucket(torch.arange(n))}
                return sorted(seen(111) - seen(27))
            """, "labsupport.positional"),
    ],
    # --- 12.4 Long sequences and memory --------------------------------------------------------
    "online_step": [
        wrong("""
            def online_step(m, l, acc, scores, v):
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                return m_new, l * fix + p.sum(-1, keepdim=True), acc + p @ v   # acc not rescaled
            """, "multiply the old l and the old acc"),
        right("""
            def online_step(m, l, acc, scores, v):
                m_new = torch.max(torch.cat([m, scores], dim=-1), dim=-1, keepdim=True).values
                p = torch.exp(scores - m_new)
                scale = torch.exp(m - m_new)
                return m_new, scale * l + p.sum(dim=-1, keepdim=True), scale * acc + p @ v
            """),
        wrong("""
            def online_step(m, l, acc, scores, v):
                m_new = scores.amax(-1, keepdim=True)                  # the tile's own maximum
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                return m_new, l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v
            """, "running maximum"),
        wrong("""
            def online_step(m, l, acc, scores, v):
                p = scores.exp()                                       # no maximum subtracted
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                return m_new, l + p.sum(-1, keepdim=True), acc + p @ v
            """, "overflows"),
        forbidden("""
            def online_step(m, l, acc, scores, v):
                from labsupport.attention import flash_attention
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                flash_attention
                return m_new, l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v
            """, "labsupport.attention"),
    ],
    "compress_update": [
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                kept, gone = states[:, :mem_len], states[:, mem_len:]         # evicts the newest
                B, n, d = gone.shape
                slots = gone.reshape(B, n // rate, rate, d).mean(2)
                return kept, torch.cat([compressed, slots], dim=1)[:, -cmem_len:]
            """, "keeps the newest states"),
        right("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = [states[:, i:i + rate].mean(dim=1, keepdim=True) for i in range(0, evict, rate)]
                compressed = torch.cat([compressed, *slots], dim=1)
                start = max(compressed.shape[1] - cmem_len, 0)
                return states[:, evict:], compressed[:, start:]
            """),
        right("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                import torch.nn.functional as F
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = F.avg_pool1d(states[:, :evict].transpose(1, 2), rate).transpose(1, 2) if evict \
                    else states[:, :0]
                compressed = torch.cat([compressed, slots], dim=1)
                kept = min(compressed.shape[1], cmem_len)
                return states[:, evict:], compressed[:, compressed.shape[1] - kept:]
            """),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                B, n, d = states[:, :evict].shape
                slots = states[:, :evict].reshape(B, n // rate, rate, d).mean(2)
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, :cmem_len]                 # the first slots
            """, "most recent cmem_len slots"),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                B, n, d = states[:, :evict].shape
                slots = states[:, :evict].reshape(B, n // rate, rate, d).sum(2)             # a sum
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, max(joined.shape[1] - cmem_len, 0):]
            """, "a sum grows with the rate"),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = states[:, :evict:rate]                                # every rate-th state
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, max(joined.shape[1] - cmem_len, 0):]
            """, "every `rate`-th state"),
        forbidden("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                from labsupport.memory import CompressiveMemory
                memory_module = CompressiveMemory(h.shape[-1], mem_len=mem_len, cmem_len=cmem_len, rate=rate)
                return memory_module.double().update(memory, compressed, h)
            """, "labsupport.memory"),
    ],
    "kept_fractions": [
        wrong("""
            def kept_fractions():
                return {24: 1.0, 168: 1.0, 8766: 1.0}                 # every cycle survives
            """, "one whole period"),
        right("""
            def kept_fractions():
                import math
                kernel = lambda p: abs(math.sin(math.pi * 24 / p) / (24 * math.sin(math.pi / p)))
                return {p: kernel(p) for p in (24, 168, 8766)}
            """),
        wrong("""
            def kept_fractions():
                return {24: 0.0, 168: 0.5, 8766: 1.0}
            """, "a seventh of a week"),
        forbidden("""
            def kept_fractions():
                from labsupport.sections.long_sequences.checks import measured_kept_fractions
                return measured_kept_fractions()
            """, "labsupport.sections"),
    ],
    "stride_saving": [
        wrong("""
            def stride_saving():
                return 12                                             # fewer tokens, not their square
            """, "square of the token count"),
        right("""
            def stride_saving():
                tokens = [(336 - 24) // s + 1 for s in (1, 12)]
                return (tokens[0] / tokens[1]) ** 2
            """),
        wrong("""
            def stride_saving():
                return 144
            """, "S^2 rule"),
        forbidden("""
            def stride_saving():
                from labsupport.sections.long_sequences.checks import measured_stride_saving
                return measured_stride_saving()[0]
            """, "labsupport.sections"),
    ],
    # --- 12.5 Efficient attention -----------------------------------------------------------------
    "positive_features": [
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T) / w.shape[0] ** 0.5         # no -|x|^2 / 2
            """, "subtract |x|^2 / 2"),
        right("""
            def positive_features(x, w):
                import math
                log_phi = torch.einsum("nd,md->nm", x, w) - 0.5 * (x * x).sum(-1, keepdim=True)
                return log_phi.exp() * math.sqrt(1 / w.shape[0])
            """),
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / w.shape[0]
            """, "not by m"),
        wrong("""
            def positive_features(x, w):
                import math
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / math.sqrt(7)   # m typed in
            """, "look at what differs"),
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2)
            """, "divide by sqrt(m)"),
        forbidden("""
            def positive_features(x, w):
                from labsupport.attention import favor_features
                return favor_features(x, w)
            """, "labsupport.attention"),
    ],
    "blocked_local_attention": [
        wrong("""
            def blocked_local_attention(q, k, v, block):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            """, "full causal attention"),
        right("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                kp, vp = (F.pad(t, (0, 0, block, 0)) for t in (k, v))            # (B, H, L + c, D)
                windows = [(kp[:, :, b * block:(b + 2) * block], vp[:, :, b * block:(b + 2) * block])
                           for b in range(n)]
                k2 = torch.stack([w[0] for w in windows], dim=2)                 # (B, H, n, 2c, D)
                v2 = torch.stack([w[1] for w in windows], dim=2)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).repeat(n, 1, 1)
                mask[0, :, :block] = False
                out = F.scaled_dot_product_attention(q.view(B, H, n, block, D), k2, v2, attn_mask=mask)
                return out.reshape(B, H, L, -1)
            """),
        right("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                import copy
                q, k, v = copy.deepcopy((q, k, v))                   # work on copies
                B, H, L, D = q.shape
                n = L // block
                qb = q.view(B, H, n, block, D)
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).expand(n, block, 2 * block).clone()
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).view(B, H, L, -1)
            """),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                qb, kb, vb = (t.view(B, H, n, block, D) for t in (q, k, v))   # its own block only
                return F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).view(B, H, L, D)
            """, "the block before it"),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                t = torch.arange(L)
                lag = t[:, None] - t[None, :]
                mask = (lag >= 0) & (lag <= block)                   # right, through an (L, L) mask
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            """, "as big as the full (L, L) scores"),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                qb = q.view(B, H, block, n, D).transpose(2, 3)        # blocks cut the wrong way
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).expand(n, block, 2 * block).clone()
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).reshape(B, H, L, -1)
            """, "compared with local_attention"),
        forbidden("""
            def blocked_local_attention(q, k, v, block):
                from labsupport.attention import local_attention
                return local_attention(q, k, v, window=block, is_causal=True)
            """, "labsupport.attention"),
    ],
    "decayed_linear_attention": [
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                phi_qs, phi_ks = (torch.nn.functional.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = z + phi_k                                     # the normaliser does not decay
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "normaliser z"),
        right("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                fq, fk = F.elu(q) + 1, F.elu(k) + 1
                t = torch.arange(q.shape[0], dtype=q.dtype)
                lag = t[:, None] - t[None, :]
                weights = torch.where(lag >= 0, gamma ** lag.clamp_min(0), 0.0) * (fq @ fk.T)
                return weights @ v / weights.sum(-1, keepdim=True)
            """),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                phi_qs, phi_ks = (F.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    outs.append(phi_q @ S / (phi_q @ z).clamp_min(1e-30))   # reads before adding t
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = gamma * z + phi_k
                return torch.stack(outs)
            """, "add token t to the state before reading it"),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(q, k, v):                # no feature map
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = gamma * z + phi_k
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "elu(x) + 1"),
        forbidden("""
            def decayed_linear_attention(q, k, v, gamma):
                from labsupport.attention import linear_attention
                assert gamma == 1.0
                return linear_attention(q[None], k[None], v[None], is_causal=True)[0]
            """, "labsupport.attention"),
    ],
    "performer_error_exponent": [
        wrong("""
            def predicted_error_exponent():
                return -1.0                     # how the variance falls, not the error
            """, "its square root"),
        right("""
            def predicted_error_exponent():
                return -1 / 2
            """),
        wrong("""
            def predicted_error_exponent():
                return 0.5
            """, "the exponent is negative"),
        forbidden("""
            def predicted_error_exponent():
                from labsupport.sections.efficient_attention.checks import (SMALL_SCALE,
                                                                            measured_error_exponent)
                return measured_error_exponent(SMALL_SCALE)
            """, "labsupport.sections"),
    ],
    # --- the lab -------------------------------------------------------------------------------
    "ridge_weights": [
        wrong("""
            def ridge_weights(X, Y, penalty):
                return torch.linalg.solve(X.T @ X, X.T @ Y)           # least squares: no penalty
            """, "without the penalty"),
        right("""
            def ridge_weights(X, Y, penalty):
                import math
                L = X.shape[1]
                augmented_X = torch.cat([X, math.sqrt(penalty) * torch.eye(L, dtype=X.dtype)])
                augmented_Y = torch.cat([Y, torch.zeros(L, Y.shape[1], dtype=Y.dtype)])
                return torch.linalg.lstsq(augmented_X, augmented_Y).solution
            """),
        wrong("""
            def ridge_weights(X, Y, penalty):
                return torch.linalg.solve(X.T @ X + penalty, X.T @ Y)  # on every entry
            """, "on the diagonal only"),
        wrong("""
            def ridge_weights(X, Y, penalty):
                eye = torch.eye(6, dtype=X.dtype)                     # L typed in
                return torch.linalg.solve(X.T @ X + penalty * eye, X.T @ Y)
            """, "your code raised RuntimeError"),
        wrong("""
            def ridge_weights(X, Y, penalty):
                eye = torch.eye(X.shape[1], dtype=X.dtype)
                return torch.linalg.solve(X.T @ X + penalty * eye, X.T @ Y).T
            """, "solve for W, not for W^T"),
        forbidden("""
            def ridge_weights(X, Y, penalty):
                from labsupport.sections.lab.reference import ridge_weights as book
                return book(X, Y, penalty)
            """, "labsupport.sections"),
    ],
    "step_peak": [
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                matrix = batch * heads * tokens * tokens * 4
                return 3 * layers * matrix            # scores, masked scores and weights per layer
            """, "keeps only what the backward needs"),
        right("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return 4 * batch * heads * tokens ** 2 * (layers + 2)
            """),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 2) * batch * tokens * tokens * 4     # the heads forgotten
            """, "multiply by the number of heads"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 2) * batch * heads * tokens * tokens  # numbers, not bytes
            """, "float32 takes 4 bytes"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 1) * batch * heads * tokens * tokens * 4
            """, "peak of the forward pass"),
        forbidden("""
            def predicted_step_peak(batch, heads, tokens, layers):
                from labsupport.sections.lab.checks import measured_step_peak
                return measured_step_peak(batch, heads, tokens, layers)
            """, "labsupport.sections"),
    ],
    "causal_block": [
        wrong("""
            def causal_block(x, layer):
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, h, need_weights=False)[0]     # no mask: reads the future
                return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))
            """, "must be causal"),
        right("""
            def causal_block(x, layer):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                h = layer.norm1(x)
                a, _ = layer.self_attn(h, h, h, attn_mask=future)
                x = x + a
                h = layer.norm2(x)
                return x + layer.linear2(layer.activation(layer.linear1(h)))
            """),
        right("""
            def causal_block(x, layer):
                N = x.shape[1]
                mask = torch.nn.Transformer.generate_square_subsequent_mask(N, dtype=x.dtype)
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, h, attn_mask=mask, is_causal=True)[0]
                return x + layer.linear2(torch.relu(layer.linear1(layer.norm2(x))))
            """),
        wrong("""
            def causal_block(x, layer):
                N = x.shape[1]
                allowed = torch.ones(N, N, dtype=torch.bool).tril()         # SDPA's convention
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, h, attn_mask=allowed)[0]
                return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))
            """, "True where attention is blocked"),
        wrong("""
            def causal_block(x, layer):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                x = layer.norm1(x + layer.self_attn(x, x, x, attn_mask=future)[0])   # post-norm
                return layer.norm2(x + layer.linear2(layer.activation(layer.linear1(x))))
            """, "post-norm"),
        wrong("""
            def causal_block(x, layer):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, h, attn_mask=future)[0]
                return x + layer.linear2(layer.linear1(layer.norm2(x)))      # no activation
            """, "activation"),
        wrong("""
            def causal_block(x, layer):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                h = layer.norm1(x)
                x = layer.self_attn(h, h, h, attn_mask=future)[0]            # residual dropped
                return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))
            """, "residual connection around attention"),
        wrong("""
            def causal_block(x, layer):
                future = torch.ones(6, 6, dtype=torch.bool).triu(1)         # N typed in
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, h, attn_mask=future)[0]
                return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))
            """, "your code raised"),
        forbidden("""
            def causal_block(x, layer):
                from labsupport.sections.lab import reference
                return reference.causal_block(x, layer)
            """, "labsupport.sections"),
        forbidden("""
            def causal_block(x, layer):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                return torch.nn.TransformerEncoderLayer.forward(layer, x, src_mask=future)
            """, "torch.nn.TransformerEncoderLayer"),
    ],
}
