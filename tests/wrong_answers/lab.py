"""Answers to the exercises of the lab; the kinds are explained in __init__.py."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['patch_tokens', 'attention', 'forecast', 'causal_linear_attention']
RETURNS_TENSOR = ['attention', 'sinusoidal_encoding', 'forecast', 'causal_linear_attention']
RETURNS_NUMBER = ['step_peak']

# the book's solution of each exercise, with one line changed as a student's mistake would change it
_ATTENTION = """
            def attention(x, mha, causal=False):
                B, N, d = x.shape
                H = mha.num_heads
                q, k, v = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
                q, k, v = (t.view(B, N, H, d // H).transpose(1, 2) for t in (q, k, v))
                scores = q @ k.transpose(-2, -1) / (d // H) ** 0.5
                if causal:
                    future = torch.ones(N, N, dtype=torch.bool).triu(1)
                    scores = scores.masked_fill(future, float("-inf"))
                out = scores.softmax(dim=-1) @ v
                return mha.out_proj(out.transpose(1, 2).reshape(B, N, d))
            """

_ENCODING = """
            def sinusoidal_encoding(n_tokens, d_model):
                position = torch.arange(n_tokens, dtype=torch.float64)[:, None]
                frequency = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
                table = torch.zeros(n_tokens, d_model, dtype=torch.float64)
                table[:, 0::2] = torch.sin(position * frequency)
                table[:, 1::2] = torch.cos(position * frequency)
                return table
            """

_FORECAST = """
            def forecast(model, x):
                L, P = x.shape[1], model.patch_len
                N = L // P
                days = x[:, L - N * P:, 0].reshape(x.shape[0], N, P)
                tokens = model.embed(days) + model.pos[:N]
                encoded = model.encoder(tokens, is_causal=True)
                return model.head(encoded[:, -1]).unsqueeze(-1)
            """

_LINEAR = """
            def causal_linear_attention(q, k, v):
                fq = torch.nn.functional.elu(q) + 1
                fk = torch.nn.functional.elu(k) + 1
                S = (fk.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(dim=-3)
                z = fk.cumsum(dim=-2)
                numerator = (fq.unsqueeze(-1) * S).sum(dim=-2)
                return numerator / (fq * z).sum(dim=-1, keepdim=True)
            """


def _changed(source: str, *changes: str) -> str:
    """``source`` with each (old, new) pair of ``changes`` replaced."""
    for old, new in zip(changes[::2], changes[1::2]):
        assert old in source, old
        source = source.replace(old, new)
    return source


ANSWERS = {
    "patch_tokens": [
        wrong("""
            def patch_tokens(x, patch_len):
                N = x.shape[-1] // patch_len
                return x[..., :N * patch_len].reshape(x.shape[0], N, patch_len)   # from the oldest hour
            """, "align the patches to the end of the window"),
        right("""
            def patch_tokens(x, patch_len):
                extra = x.shape[-1] % patch_len
                return x[:, extra:].unfold(-1, patch_len, patch_len)
            """),
        right("""
            def patch_tokens(x, patch_len):
                L = x.shape[1]
                starts = range(L - patch_len, -1, -patch_len)                     # from the newest back
                return torch.stack([x[:, s:s + patch_len] for s in reversed(starts)], dim=1)
            """),
        wrong("""
            def patch_tokens(x, patch_len):
                return x.unfold(-1, patch_len, 1)                                 # a patch every hour
            """, "your patches overlap"),
        wrong("""
            def patch_tokens(x, patch_len):
                pad = -x.shape[-1] % patch_len
                x = torch.nn.functional.pad(x, (pad, 0))                          # padded, not dropped
                return x.reshape(x.shape[0], -1, patch_len)
            """, "one patch more than fit"),
        wrong("""
            def patch_tokens(x, patch_len):
                extra = x.shape[-1] % patch_len
                return x[:, extra:].unfold(-1, patch_len, patch_len).transpose(1, 2)
            """, "(B, patch_len, N)"),
        wrong("""
            def patch_tokens(x, patch_len):
                extra = x.shape[-1] % patch_len
                return x[:, extra:].unfold(-1, patch_len, patch_len).flip(1)       # newest first
            """, "reverse order"),
        wrong("""
            def patch_tokens(x, patch_len):
                L = x.shape[1]
                N = L // patch_len
                return x[:, L - N * patch_len:].reshape(x.shape[0], patch_len, N).transpose(1, 2)
            """, "lie N apart"),
        wrong("""
            def patch_tokens(x, patch_len):
                extra = x.shape[-1] % patch_len
                return x[:, extra:].unfold(-1, patch_len, patch_len).flip(2)
            """, "the hours inside each patch are reversed"),
        forbidden("""
            def patch_tokens(x, patch_len):
                from labsupport.data import patchify
                return patchify(x, patch_len, patch_len)
            """, "labsupport.data"),
    ],
    "attention": [
        wrong(_changed(_ATTENTION, "/ (d // H) ** 0.5", ""), "your scores are not scaled"),
        right("""
            def attention(x, mha, causal=False):
                import math
                B, N, d = x.shape
                H = mha.num_heads
                Wq, Wk, Wv = mha.in_proj_weight.chunk(3)
                bq, bk, bv = mha.in_proj_bias.chunk(3)
                heads = []
                for h in range(H):
                    rows = slice(h * d // H, (h + 1) * d // H)
                    q = x @ Wq[rows].T + bq[rows]
                    k = x @ Wk[rows].T + bk[rows]
                    v = x @ Wv[rows].T + bv[rows]
                    scores = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(d // H)
                    if causal:
                        scores = scores + torch.full((N, N), float("-inf"), dtype=x.dtype).triu(1)
                    heads.append(torch.exp(scores - scores.logsumexp(-1, keepdim=True)) @ v)
                return torch.cat(heads, dim=-1) @ mha.out_proj.weight.T + mha.out_proj.bias
            """),
        wrong(_changed(_ATTENTION, "/ (d // H) ** 0.5", "/ d ** 0.5"), "square root of its own width"),
        wrong(_changed(_ATTENTION, "/ (d // H) ** 0.5", "/ (d // H)"), "the scale is its square root"),
        wrong(_changed(_ATTENTION, "scores.softmax(dim=-1)", "scores.softmax(dim=-2)"),
              "your softmax runs over the queries"),
        wrong(_changed(_ATTENTION, "return mha.out_proj(out.transpose(1, 2).reshape(B, N, d))",
                       "return out.transpose(1, 2).reshape(B, N, d)"), "the output projection is missing"),
        wrong(_changed(_ATTENTION, "mha.in_proj_weight, mha.in_proj_bias)", "mha.in_proj_weight)"),
              "the input projection's bias is missing"),
        wrong(_changed(_ATTENTION, "t.view(B, N, H, d // H).transpose(1, 2)", "t.reshape(B, H, N, d // H)",
                       "out.transpose(1, 2).reshape(B, N, d)", "out.reshape(B, N, d)"),
              "your heads are cut from the wrong axis"),
        wrong(_changed(_ATTENTION, "if causal:", "if True:"), "your mask blocks the future anyway"),
        wrong(_changed(_ATTENTION, ".triu(1)", ".tril(-1)"), "blocks the past and keeps the future"),
        wrong(_changed(_ATTENTION, "if causal:", "if False:"), "lets every token attend to every token"),
        wrong("""
            def attention(x, mha, causal=False):
                N = x.shape[1]
                future = torch.ones(N, N, dtype=torch.bool).triu(1) if causal else None
                return mha(x, x, x, attn_mask=future, need_weights=False)[0]
            """, "compute the attention from the module's weights"),
        replay(_changed(_ATTENTION, "B, N, d = x.shape", "B, N, d = x.shape\n"
                        "                if (B, N, d) not in {(2, 6, 8), (1, 5, 12), (3, 1, 4), (1, 7, 6)}:\n"
                        "                    return x                           # only the practice sizes")),
        forbidden("""
            def attention(x, mha, causal=False):
                from labsupport.sections.lab import reference
                return reference.attention(x, mha, causal)
            """, "labsupport.sections"),
        forbidden("""
            def attention(x, mha, causal=False):
                B, N, d = x.shape
                H = mha.num_heads
                q, k, v = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
                q, k, v = (t.view(B, N, H, d // H).transpose(1, 2) for t in (q, k, v))
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                return mha.out_proj(out.transpose(1, 2).reshape(B, N, d))
            """, "scaled_dot_product_attention"),
    ],
    "sinusoidal_encoding": [
        wrong(_changed(_ENCODING, "0::2] = torch.sin", "0::2] = torch.cos", "1::2] = torch.cos",
                       "1::2] = torch.sin"), "sine and cosine are swapped"),
        right("""
            def sinusoidal_encoding(n_tokens, d_model):
                import math
                rows = []
                for n in range(n_tokens):
                    row = []
                    for i in range(d_model // 2):
                        angle = n * math.exp(-math.log(10000.0) * 2 * i / d_model)
                        row += [math.sin(angle), math.cos(angle)]
                    rows.append(row)
                return torch.tensor(rows, dtype=torch.float64).reshape(n_tokens, d_model)
            """),
        wrong(_changed(_ENCODING, """table = torch.zeros(n_tokens, d_model, dtype=torch.float64)
                table[:, 0::2] = torch.sin(position * frequency)
                table[:, 1::2] = torch.cos(position * frequency)
                return table""", """angle = position * frequency
                return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)"""),
              "they alternate, a sine and its cosine side by side"),
        wrong(_changed(_ENCODING, "dtype=torch.float64) / d_model)", "dtype=torch.float64) / 2 / d_model)"),
              "your frequencies fall twice as slowly"),
        wrong(_changed(_ENCODING, "torch.arange(n_tokens, dtype", "torch.arange(1, n_tokens + 1, dtype"),
              "your positions start at one"),
        wrong(_changed(_ENCODING, "1::2] = torch.cos", "1::2] = torch.sin"), "every column is a sine"),
        wrong(_changed(_ENCODING, "return table", "return table.T"), "(d_model, n_tokens)"),
        wrong(_changed(_ENCODING, "10000.0 ** (-torch", "10000.0 ** (torch"), "your frequencies rise"),
        forbidden("""
            def sinusoidal_encoding(n_tokens, d_model):
                from labsupport.positional import sinusoidal_encoding as table
                return table(n_tokens, d_model)
            """, "labsupport.positional"),
    ],
    "forecast": [
        wrong(_changed(_FORECAST, " + model.pos[:N]", ""), "the learned positions are missing"),
        right("""
            def forecast(model, x):
                P = model.patch_len
                extra = x.shape[1] % P
                tokens = model.embed(x[:, extra:, 0].unfold(-1, P, P))
                tokens = tokens + model.pos[:tokens.shape[1]].unsqueeze(0)
                for block in model.encoder.layers:
                    tokens = block(tokens, is_causal=True)
                if getattr(model.encoder, "norm", None) is not None:
                    tokens = model.encoder.norm(tokens)
                y = torch.einsum("bd,td->bt", tokens[:, -1], model.head.weight) + model.head.bias
                return y[..., None]
            """),
        wrong(_changed(_FORECAST, "is_causal=True", "is_causal=False"), "your encoder is not causal"),
        wrong(_changed(_FORECAST, "encoded[:, -1]", "encoded[:, 0]"), "off the oldest token"),
        wrong(_changed(_FORECAST, "encoded[:, -1]", "encoded.mean(1)"), "you averaged the tokens"),
        wrong(_changed(_FORECAST, "x[:, L - N * P:, 0]", "x[:, :N * P, 0]"), "align them to the end"),
        wrong(_changed(_FORECAST, ".unsqueeze(-1)", ""), "(B, horizon, 1)"),
        wrong("""
            def forecast(model, x):
                return model(x)
            """, "compute the forecast from the model's parts"),
        forbidden("""
            def forecast(model, x):
                from labsupport.sections.lab.reference import forecast as book
                return book(model, x)
            """, "labsupport.sections"),
    ],
    "step_peak": [
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return 3 * layers * batch * heads * tokens * tokens * 4   # scores, masked, weights kept
            """, "keeps only what the backward needs"),
        right("""
            def predicted_step_peak(batch, heads, tokens, layers):
                one_matrix = batch * heads * tokens ** 2 * 4              # float32 bytes
                return (layers + 2) * one_matrix
            """),
        right("""
            def predicted_step_peak(batch, heads, tokens, layers):
                import numpy as np
                return float(np.prod([layers + 2, batch, heads, tokens, tokens, 4]))
            """),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return layers * batch * heads * tokens * tokens * 4      # the kept weights only
            """, "what does the backward pass of one layer create"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 1) * batch * heads * tokens * tokens * 4
            """, "that is the peak of the forward pass"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return 2 * batch * heads * tokens * tokens * 4           # one call's scores and weights
            """, "so the layers count"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 2) * batch * heads * tokens * tokens    # numbers, not bytes
            """, "float32 takes 4 bytes"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 2) * batch * tokens * tokens * 4
            """, "multiply by the number of heads"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return (layers + 2) * tokens * tokens * 4
            """, "multiply by batch * heads"),
        wrong("""
            def predicted_step_peak(batch, heads, tokens, layers):
                return 40e6                                               # a guess
            """, "times the measured peak"),
        replay("""
            def predicted_step_peak(batch, heads, tokens, layers):
                seen = {(2, 4, 512, 1): 25165824, (2, 4, 512, 3): 41943040, (3, 2, 384, 2): 14155776}
                return seen.get((batch, heads, tokens, layers), 1)
            """),
        forbidden("""
            def predicted_step_peak(batch, heads, tokens, layers):
                from labsupport.sections.lab.checks import measured_step_peak
                return measured_step_peak(batch, heads, tokens, layers)
            """, "labsupport.sections"),
    ],
    "causal_linear_attention": [
        wrong("""
            def causal_linear_attention(q, k, v):
                fq = torch.nn.functional.elu(q) + 1
                fk = torch.nn.functional.elu(k) + 1
                kv = fk.transpose(-2, -1) @ v                             # every key: not causal
                return (fq @ kv) / (fq @ fk.sum(-2).unsqueeze(-1))
            """, "your attention is not causal"),
        right("""
            def causal_linear_attention(q, k, v):
                fq, fk = torch.where(q > 0, q + 1, q.exp()), torch.where(k > 0, k + 1, k.exp())
                N = q.shape[-2]
                S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype)
                z = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=q.dtype)
                out = []
                for i in range(N):                                        # the recurrence, token by token
                    S = S + fk[..., i, :, None] * v[..., i, None, :]
                    z = z + fk[..., i, :]
                    num = torch.einsum("...d,...de->...e", fq[..., i, :], S)
                    out.append(num / torch.einsum("...d,...d->...", fq[..., i, :], z)[..., None])
                return torch.stack(out, dim=-2)
            """),
        wrong(_changed(_LINEAR, "return numerator / (fq * z).sum(dim=-1, keepdim=True)", "return numerator"),
              "the normaliser is missing"),
        wrong(_changed(_LINEAR, "fq = torch.nn.functional.elu(q) + 1", "fq = q.exp()",
                       "fk = torch.nn.functional.elu(k) + 1", "fk = k.exp()"),
              "your feature map is the exponential"),
        wrong(_changed(_LINEAR, "fq = torch.nn.functional.elu(q) + 1", "fq = torch.sigmoid(q)",
                       "fk = torch.nn.functional.elu(k) + 1", "fk = torch.sigmoid(k)"),
              "compared with causal linear attention"),
        wrong(_changed(_LINEAR, "fq = torch.nn.functional.elu(q) + 1", "fq = torch.nn.functional.elu(q)",
                       "fk = torch.nn.functional.elu(k) + 1", "fk = torch.nn.functional.elu(k)"),
              "elu without the one"),
        wrong(_changed(_LINEAR, "v.unsqueeze(-2)", "(torch.nn.functional.elu(v) + 1).unsqueeze(-2)"),
              "the values go through the feature map too"),
        wrong("""
            def causal_linear_attention(q, k, v):
                N = q.shape[-2]
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                future = torch.ones(N, N, dtype=torch.bool).triu(1)
                return scores.masked_fill(future, float("-inf")).softmax(-1) @ v
            """, "that is exact softmax attention"),
        replay(_changed(_LINEAR, "fq = torch.nn.functional.elu(q) + 1",
                        "if q.shape[-2:] not in {(6, 4), (9, 5), (1, 4), (12, 8)}:\n"
                        "                    return v                           # only the practice sizes\n"
                        "                fq = torch.nn.functional.elu(q) + 1")),
        forbidden("""
            def causal_linear_attention(q, k, v):
                from labsupport.attention import linear_attention
                return linear_attention(q, k, v, is_causal=True)
            """, "labsupport.attention"),
    ],
}
