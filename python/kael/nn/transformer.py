"""torch.nn's MultiheadAttention, TransformerEncoderLayer and TransformerEncoder, with torch's
signatures, parameter names and initialization. MultiheadAttention takes its initialized
parameters from kael::nn's C++ layer (Xavier-uniform in_proj_weight, zero biases) and its forward
is the C++ multi_head_attention_forward (kael.nn.functional's), which holds torch's mask rules: a
boolean attn_mask or key_padding_mask is True where a position may NOT be attended (the opposite
of scaled_dot_product_attention's), a float mask is added to the scores; attn_mask is (L, S) or
(N * num_heads, L, S), key_padding_mask (N, S). The encoder layer composes it with Linear,
LayerNorm and Dropout as torch's does, so its gradients are those ops' own.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from .. import _kael
from .._kael import Tensor
from . import functional as F
from .modules import Dropout, LayerNorm, Linear, Module, ModuleList, _check_device, _initialized


def generate_square_subsequent_mask(size: int, dtype: Any = None) -> Tensor:
    """(size, size): 0 on and below the diagonal, -inf above (torch's causal mask)."""
    return _kael.generate_square_subsequent_mask(size, dtype)


class MultiheadAttention(Module):
    """Multi-head attention as torch.nn.MultiheadAttention: in_proj_weight (3E, E) (or q/k/v_proj_weight
    when kdim or vdim differ from E) Xavier-uniform, in_proj_bias and out_proj.bias zero."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        native = _kael._MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim,
                                           vdim, batch_first)  # checks the options
        params = dict(native.named_parameters())
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _initialized(params["in_proj_weight"], dtype)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = _initialized(params["q_proj_weight"], dtype)
            self.k_proj_weight = _initialized(params["k_proj_weight"], dtype)
            self.v_proj_weight = _initialized(params["v_proj_weight"], dtype)
            self.in_proj_weight = None
        self.in_proj_bias = _initialized(params["in_proj_bias"], dtype) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.out_proj.weight = _initialized(params["out_proj.weight"], dtype)
        if bias:
            self.out_proj.bias = _initialized(params["out_proj.bias"], dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        return F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal, batch_first=self.batch_first)


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
        causal = _kael._detect_is_causal_mask(mask, is_causal, length)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask)
        return self.norm(output) if self.norm is not None else output
