"""Answers to the exercises of the lab; the kinds are explained in __init__.py."""
from .answers import forbidden, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['causal_block', 'ridge_weights']
RETURNS_TENSOR = ['causal_block', 'ridge_weights']
RETURNS_NUMBER = ['step_peak']

ANSWERS = {
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
