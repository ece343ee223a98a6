"""Attention: MultiheadAttention (self- and cross-attention, key padding and attention masks,
separate key/value sizes, with and without weights) and TransformerEncoderLayer with masks, in
training and evaluation mode (where PyTorch takes its fused fast path)."""

from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor


def _padding_mask(torch: Any, batch: int, length: int) -> Any:
    """A boolean key padding mask that never hides a whole row (which gives NaN)."""
    mask = random_tensor(shape=[batch, length], dtype="bool", requires_grad=False)
    mask[:, 0] = False
    return mask


def _causal_mask(torch: Any, target: int, source: int) -> Any:
    return torch.triu(torch.ones(target, source, dtype=torch.bool), diagonal=1)


@autotest(n=16, ops=["torch.nn.MultiheadAttention"])
def multihead_attention(torch: Any) -> Any:
    heads = int(random(1, 3))
    embed = heads * int(random(1, 4))
    batch_first, self_attention = bool(random_bool()), bool(random_bool())
    kdim = embed if self_attention else int(random(1, 5))
    vdim = embed if self_attention else int(random(1, 5))
    attention = torch.nn.MultiheadAttention(
        embed, heads, bias=random_bool() | nothing(), add_bias_kv=random_bool() | nothing(),
        kdim=kdim, vdim=vdim, batch_first=batch_first)
    if random_bool():
        attention.eval()
    batch, target = int(random(1, 3)), int(random(1, 4))
    source = target if self_attention else int(random(1, 4))

    def sequence(length: int, features: int) -> Any:
        shape = [batch, length, features] if batch_first else [length, batch, features]
        return random_tensor(shape=shape, low=-1, high=1)

    query = sequence(target, embed)
    key = query if self_attention else sequence(source, kdim)
    value = query if self_attention else sequence(source, vdim)
    padding = _padding_mask(torch, batch, source) if random_bool() else None
    causal = _causal_mask(torch, target, source) if random_bool() else None
    return attention(query, key, value, key_padding_mask=padding, attn_mask=causal,
                     need_weights=random_bool() | nothing(),
                     average_attn_weights=random_bool() | nothing())


@autotest(n=12, ops=["torch.nn.TransformerEncoderLayer"])
def transformer_encoder_layer(torch: Any) -> Any:
    """Dropout is random in training mode: a drawn dropout comes with ``.eval()``."""
    heads = int(random(1, 3))
    width = heads * int(random(1, 3))
    batch_first = bool(random_bool())
    evaluate = bool(random_bool())
    layer = torch.nn.TransformerEncoderLayer(
        width, heads, dim_feedforward=int(random(1, 9)),
        dropout=oneof(0.1, 0.5) if evaluate else 0.0,
        activation=oneof("relu", "gelu") | nothing(), batch_first=batch_first,
        norm_first=random_bool() | nothing(), bias=random_bool() | nothing())
    if evaluate:
        layer.eval()
    batch, length = int(random(1, 3)), int(random(2, 5))
    shape = [batch, length, width] if batch_first else [length, batch, width]
    source = random_tensor(shape=shape, low=-1, high=1)
    padding = _padding_mask(torch, batch, length) if random_bool() else None
    causal = _causal_mask(torch, length, length) if random_bool() else None
    return layer(source, src_mask=causal, src_key_padding_mask=padding)
