"""torch.nn's MultiheadAttention, TransformerEncoderLayer and TransformerEncoder, with torch's
signatures, parameter names and initialization, composed of kael's linear, layer_norm,
scaled_dot_product_attention (the kernels' causal attention where the mask allows it), softmax
and dropout, so their gradients are those ops' own.

Masks follow torch: in MultiheadAttention a boolean attn_mask or key_padding_mask is True where
a position may NOT be attended (the opposite of scaled_dot_product_attention's), a float mask is
added to the scores; attn_mask is (L, S) or (N * num_heads, L, S), key_padding_mask (N, S).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable

from .. import _kael
from .._kael import Tensor
from . import functional as F
from . import init
from .modules import Dropout, LayerNorm, Linear, Module, ModuleList, Parameter


def _float_mask(mask: Tensor | None, dtype: Any, name: str) -> Tensor | None:
    """torch's canonical mask: a boolean mask (True = hidden) as 0 / -inf of `dtype`; a float one as is."""
    if mask is None:
        return None
    if mask.dtype == _kael.bool:
        return _kael.zeros(*mask.shape, dtype=dtype).masked_fill(mask, -math.inf)
    if not mask.dtype.is_floating_point:
        raise _kael.TypeError(f"only bool and floating types of {name} are supported, got {mask.dtype}")
    return mask


def generate_square_subsequent_mask(size: int, dtype: Any = None) -> Tensor:
    """(size, size): 0 on and below the diagonal, -inf above (torch's causal mask)."""
    return _kael.full((size, size), -math.inf, dtype=dtype or _kael.float32).triu(1)


class MultiheadAttention(Module):
    """Multi-head attention as torch.nn.MultiheadAttention: in_proj_weight (3E, E) (or q/k/v_proj_weight
    when kdim or vdim differ from E) Xavier-uniform, in_proj_bias and out_proj.bias zero."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise _kael.ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                                   f"and num_heads={num_heads} instead")
        if embed_dim % num_heads != 0:
            raise _kael.ValueError(f"embed_dim must be divisible by num_heads, got {embed_dim} and {num_heads}")
        if add_bias_kv or add_zero_attn:
            raise _kael.ValueError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        dtype = dtype or _kael.float32
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_kael.empty(3 * embed_dim, embed_dim, dtype=dtype))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = Parameter(_kael.empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(_kael.empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(_kael.empty(embed_dim, self.vdim, dtype=dtype))
            self.in_proj_weight = None
        self.in_proj_bias = Parameter(_kael.empty(3 * embed_dim, dtype=dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        E = self.embed_dim
        biases = (None, None, None) if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        if self._qkv_same_embed_dim:
            if query is key and key is value:  # self-attention: one product
                return F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1)
            weights = (self.in_proj_weight[:E], self.in_proj_weight[E:2 * E], self.in_proj_weight[2 * E:])
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        batched = query.dim() == 3
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise _kael.ValueError(f"MultiheadAttention: query, key and value must all be 2-D (unbatched) or 3-D, "
                                   f"got {query.dim()}-D, {key.dim()}-D and {value.dim()}-D")
        if batched and self.batch_first:  # (N, L, E) -> (L, N, E); `is` kept for the one-product path
            if key is value:
                if query is key:
                    query = key = value = query.transpose(0, 1)
                else:
                    query, key = query.transpose(0, 1), key.transpose(0, 1)
                    value = key
            else:
                query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise _kael.ValueError(f"MultiheadAttention: expected embedding dimension {self.embed_dim}, got {E}")
        if key.shape[:2] != value.shape[:2] or key.shape[1] != N:
            raise _kael.ValueError(f"MultiheadAttention: key {tuple(key.shape)} and value {tuple(value.shape)} must "
                                   f"match query's batch {N} and each other's length")
        if is_causal and attn_mask is None:
            raise _kael.ValueError("Need attn_mask if specifying the is_causal hint (torch's rule); "
                                   "kael.nn.transformer.generate_square_subsequent_mask(L) makes one")
        H, D = self.num_heads, self.head_dim
        bias = _float_mask(attn_mask, query.dtype, "attn_mask")
        if bias is not None:
            expected = (L, S) if bias.dim() == 2 else (N * H, L, S)
            if bias.dim() not in (2, 3) or tuple(bias.shape) != expected:
                raise _kael.ValueError(f"attn_mask has shape {tuple(bias.shape)}, but should be {(L, S)} or "
                                       f"{(N * H, L, S)}")
            bias = bias.reshape(1, 1, L, S) if bias.dim() == 2 else bias.reshape(N, H, L, S)
        padding = _float_mask(key_padding_mask, query.dtype, "key_padding_mask")
        if padding is not None:
            if tuple(padding.shape) != (N, S):
                raise _kael.ValueError(f"key_padding_mask has shape {tuple(padding.shape)}, but should be {(N, S)}")
            padding = padding.reshape(N, 1, 1, S)
            bias = padding if bias is None else bias + padding

        q, k, v = self._projections(query, key, value)  # (L, N, E), (S, N, E), (S, N, E)
        q = q.reshape(L, N, H, D).permute(1, 2, 0, 3)  # (N, H, L, D)
        k = k.reshape(S, N, H, D).permute(1, 2, 0, 3)
        v = v.reshape(S, N, H, D).permute(1, 2, 0, 3)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = _kael.matmul(q * math.sqrt(1.0 / D), k.transpose(-1, -2))  # (N, H, L, S)
            if bias is not None:
                scores = scores + bias
            weights = F.softmax(scores, -1)
            attended = _kael.matmul(F.dropout(weights, dropout_p, True) if dropout_p > 0 else weights, v)
        elif bias is None and not is_causal:
            attended = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        elif is_causal and key_padding_mask is None:  # the hint: attn_mask is causal
            attended = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        else:
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.expand(N, H, L, S),
                                                      dropout_p=dropout_p)
        output = self.out_proj(attended.permute(2, 0, 1, 3).reshape(L, N, E))  # (L, N, E)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)  # (N, L, S)
        if not batched:
            output = output.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, weights


def _activation(name: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(name):
        return name
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise _kael.ValueError(f"activation should be relu/gelu, not {name}")


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each added to its input, with layer norms after
    (torch's default) or before (norm_first=True) them; dropout as torch's."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _is_causal_mask(mask: Tensor | None, is_causal: bool | None, size: int) -> bool:
    """torch's _detect_is_causal_mask: the hint when given, else whether mask is the causal one."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    if tuple(mask.shape) != (size, size):
        return False
    expected = generate_square_subsequent_mask(size)
    if mask.dtype == _kael.bool:
        return bool((mask == (expected < 0)).all())
    return bool((mask.float() == expected).all())


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (copy.deepcopy, as torch's), then norm if given."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        if num_layers < 0:
            raise _kael.ValueError(f"num_layers must be at least 0, got {num_layers}")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor  # taken for torch's signature: no nested tensors
        self.mask_check = mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        batch_first = getattr(self.layers[0].self_attn, "batch_first", False) if self.num_layers else False
        length = src.shape[0] if src.dim() == 2 else src.shape[1 if batch_first else 0]
        causal = _is_causal_mask(mask, is_causal, length)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask)
        return self.norm(output) if self.norm is not None else output
