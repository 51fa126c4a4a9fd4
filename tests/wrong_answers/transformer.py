"""Answers to the exercises of 12.2 The Transformer Block; the kinds are explained in __init__.py."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ["layer_norm", "decode_step", "scheduled_inputs"]
RETURNS_TENSOR = ["layer_norm", "decode_step", "scheduled_inputs"]
RETURNS_NUMBER = ["block_parameters"]

ANSWERS = {
    "block_parameters": [
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * d * d + 2 * d * d_ff + 4 * d                   # no biases
            """, "leaves out the biases"),
        right("""
            def block_parameters(d_model, n_heads, d_ff):
                linear = lambda n_in, n_out: n_in * n_out + n_out
                return 4 * linear(d_model, d_model) + linear(d_model, d_ff) + linear(d_ff, d_model) \\
                    + 2 * 2 * d_model
            """),
        right("""
            def block_parameters(d_model, n_heads, d_ff):
                attention = 4 * d_model * (d_model + 1)
                feed_forward = d_ff * (d_model + 1) + d_model * (d_ff + 1)
                return attention + feed_forward + 4 * d_model
            """),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)   # no LayerNorms
            """, "leaves out the two LayerNorms"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 2 * d   # scales only
            """, "a learned scale and a learned shift"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return n_heads * 4 * (d * d + d) + 2 * d * d_ff + d_ff + d + 4 * d
            """, "more heads add no parameters"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 3 * (d * d + d) + 2 * d * d_ff + d_ff + d + 4 * d       # no output map
            """, "there are four"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + (d * d_ff + d_ff) + 4 * d               # one linear map
            """, "one linear map in the feed-forward network"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + 2 * (d * d + d) + 4 * d                 # hidden width d
            """, "hidden layer has d_model units"),
        wrong("""
            def block_parameters(d_model, n_heads, d_ff):
                d = d_model
                return 4 * (d * d + d) + 2 * d * 256 + 256 + d + 4 * d           # d_ff typed in
            """, "look at what differs between those inputs"),
        replay("""
            def block_parameters(d_model, n_heads, d_ff):
                return {(64, 4, 256): 49984, (32, 8, 32): 6464, (16, 1, 64): 3280,
                        (24, 3, 12): 3108}[(d_model, n_heads, d_ff)]
            """),
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
    "layer_norm": [
        right("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + eps) * weight + bias
            """),
        right("""
            def layer_norm(x, weight, bias, eps=1e-5):
                centred = x - x.mean(dim=-1, keepdim=True)
                return weight * centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) + bias
            """),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True)   # unbiased
                return (x - mean) / torch.sqrt(var + eps) * weight + bias
            """, "divides the sum of squares by"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True, unbiased=False)
                return (x - mean) / (std + eps) * weight + bias               # eps outside the root
            """, "added to the standard deviation"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var) * weight + bias             # no eps
            """, "not finite"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-2, keepdim=True)                                # over the positions
                var = ((x - mean) ** 2).mean(-2, keepdim=True)
                return (x - mean) / torch.sqrt(var + eps) * weight + bias
            """, "over the positions"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean, var = x.mean(), ((x - x.mean()) ** 2).mean()             # the whole tensor
                return (x - mean) / torch.sqrt(var + eps) * weight + bias
            """, "whole tensor at once"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + eps)                      # no weight, no bias
            """, "not scaled and shifted"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + eps) * bias + weight      # swapped
            """, "swapped"),
        wrong("""
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).mean(-1, keepdim=True)
                return ((x - mean) / torch.sqrt(var + eps) + bias) * weight    # shift, then scale
            """, "shifted before you scaled"),
        forbidden("""
            def layer_norm(x, weight, bias, eps=1e-5):
                return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)
            """, "layer_norm"),
    ],
    "decode_step": [
        wrong("""
            def decode_step(block, x, memory):
                h = block.ln1(x[:, -1:])
                h = x[:, -1:] + block.self_attn(h, h)                 # attends to itself only
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """, "attended only to itself"),
        right("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)                                   # the cache, normalised
                h = x[:, -1:] + block.self_attn(seen[:, -1:], seen)
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """),
        right("""
            def decode_step(block, x, memory):
                new = x[:, -1:]
                allowed = torch.ones(1, x.shape[1], dtype=torch.bool)    # the newest sees all
                new = new + block.self_attn(block.ln1(new), block.ln1(x), mask=allowed)
                new = new + block.cross_attn(block.ln2(new), context=memory)
                new = new + block.ff(block.ln3(new))
                return new
            """),
        wrong("""
            def decode_step(block, x, memory):
                new = x[:, -1:]
                h = new + block.self_attn(block.ln1(new), x)          # raw keys and values
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """, "before the first LayerNorm"),
        wrong("""
            def decode_step(block, x, memory):
                t = x.shape[1]
                mask = torch.ones(t, t, dtype=torch.bool).tril()[:1]  # the mask's first row
                h = x[:, -1:] + block.self_attn(block.ln1(x[:, -1:]), block.ln1(x), mask=mask)
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """, "causal mask's first row"),
        wrong("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)
                h = x[:, -1:] + block.self_attn(seen[:, -1:], seen)
                return h + block.ff(block.ln3(h))                     # no cross-attention
            """, "left out cross-attention"),
        wrong("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)
                h = x[:, -1:] + block.self_attn(seen[:, -1:], seen)
                h = h + block.cross_attn(block.ln2(h))                # reads itself, not memory
                return h + block.ff(block.ln3(h))
            """, "from the encoder's memory"),
        wrong("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)
                h = block.self_attn(seen[:, -1:], seen)               # no residual
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """, "a residual connection is missing"),
        wrong("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)
                h = x[:, -1:] + block.self_attn(seen[:, -1:], seen)
                h = h + block.cross_attn(block.ln3(h), memory)        # ln2 and ln3 swapped
                return h + block.ff(block.ln2(h))
            """, "LayerNorms are out of place"),
        wrong("""
            def decode_step(block, x, memory):
                return block(x, memory)[:, -1:]                       # the whole pass again
            """, "the new position's query only"),
        wrong("""
            def decode_step(block, x, memory):
                seen = block.ln1(x)
                h = x + block.self_attn(seen, seen)                   # every position, no mask
                h = h + block.cross_attn(block.ln2(h), memory)
                return h + block.ff(block.ln3(h))
            """, "returned every position"),
        forbidden("""
            def decode_step(block, x, memory):
                from labsupport.layers import DecoderBlock
                library = DecoderBlock(x.shape[-1], 1).double().eval()
                return library(x, memory)[:, -1:]
            """, "labsupport.layers"),
        forbidden("""
            def decode_step(block, x, memory):
                layer = torch.nn.TransformerDecoderLayer(x.shape[-1], 1, batch_first=True)
                return layer(x, memory)[:, -1:]
            """, "TransformerDecoderLayer"),
    ],
    "scheduled_inputs": [
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                return torch.where(sample[..., None], forecasts, truth)   # not shifted: the leak
            """, "the leak"),
        right("""
            def scheduled_inputs(last, truth, forecasts, sample):
                chosen = torch.where(sample.unsqueeze(-1), forecasts, truth)
                return torch.cat([last, chosen[:, :-1]], dim=1)
            """),
        right("""
            def scheduled_inputs(last, truth, forecasts, sample):
                keep = sample[:, :-1, None].to(truth.dtype)
                previous = keep * forecasts[:, :-1] + (1 - keep) * truth[:, :-1]
                return torch.cat((last, previous), 1)
            """),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                chosen = torch.where(sample[..., None], truth, forecasts)   # inverted
                return torch.cat([last, chosen[:, :-1]], dim=1)
            """, "the choice is inverted"),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                return torch.cat([last, truth[:, :-1]], dim=1)        # teacher forcing
            """, "that is teacher forcing"),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                return torch.cat([last, forecasts[:, :-1]], dim=1)    # free running
            """, "that is free running"),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                chosen = torch.where(sample[..., None], forecasts, truth)
                return torch.cat([truth[:, :1], chosen[:, :-1]], dim=1)   # hour 0 first
            """, "the true value of hour 0"),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                chosen = torch.where(sample[:, 1:, None], forecasts[:, :-1], truth[:, :-1])
                return torch.cat([last, chosen], dim=1)               # the step's own entry
            """, "one hour off"),
        wrong("""
            def scheduled_inputs(last, truth, forecasts, sample):
                chosen = torch.where(sample[..., None], forecasts, truth)
                return torch.cat([chosen[:, 1:], last], dim=1)        # shifted the other way
            """, "the wrong way"),
        forbidden("""
            def scheduled_inputs(last, truth, forecasts, sample):
                from labsupport.sections.transformer.checks import _sampled
                return _sampled(last, truth, forecasts, sample)
            """, "labsupport.sections"),
    ],
}
