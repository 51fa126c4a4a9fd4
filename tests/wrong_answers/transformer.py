"""Answers to the exercises of 12.2 The Transformer architecture; the kinds are explained in __init__.py."""
from .answers import forbidden, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['feed_forward', 'pre_norm_block']
RETURNS_TENSOR = ['feed_forward', 'pre_norm_block']
RETURNS_NUMBER = ['block_parameters']

ANSWERS = {
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
}
