// scaled_dot_product_attention: softmax(scale q k^T + mask) v, as torch.nn.functional's.
// F32 causal self-attention with the default scale runs on the kernels (threaded over batch x
// heads): without a gradient or dropout on the engine's causal_attention, which keeps nothing;
// otherwise on the training kernels (kernels/attention_train.hpp),
// whose forward keeps the probabilities and applies dropout to them, and whose backward is the
// named rule scaled_dot_product_attention_backward (or _heads_backward). q, k and v that are
// heads of one tensor's rows (nanoGPT's split of its qkv product) are read where they lie and
// the output comes in torch's transposed (B, L, H, E) layout, so neither side copies them.
// Everything else is composed of matmul and softmax: with dropout as composed ops, without as
// one node whose backward (the named rule scaled_dot_product_attention_math_backward)
// recomputes the probabilities instead of keeping the (L, S) matrix of every op that made them.
#include <cmath>
#include <limits>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_train.hpp"
#include "tensor/backward.hpp"
#include "tensor/seed.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// What the mask adds to the scores: `bias` (broadcasts to (..., L, S), undefined for none)
// and `empty_rows` (BOOL (..., L, 1), undefined when every row keeps a position), the rows
// the mask hides entirely: their probabilities are 0 (PyTorch's safe softmax), not NaN.
struct MaskBias {
  Tensor bias;
  Tensor empty_rows;
};

MaskBias mask_bias(const Tensor& attn_mask, bool is_causal, std::int64_t L, std::int64_t S, DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor zero = full({}, 0, dtype), minus_inf = full({}, -inf, dtype);
  if (is_causal) {  // top-left aligned, as torch: row t keeps positions s <= t
    const Tensor keep = ge(arange(0, static_cast<double>(L), 1, DType::I64).reshape({L, 1}),
                           arange(0, static_cast<double>(S), 1, DType::I64));  // (L, S)
    return {where(keep, zero, minus_inf), Tensor()};
  }
  if (!attn_mask.defined()) return {};
  MaskBias out;
  out.bias = attn_mask.dtype() == DType::BOOL ? where(attn_mask, zero, minus_inf) : attn_mask.detach();
  const Shape full_shape = broadcast_shapes(out.bias.shape(), {L, S}, kOp);
  const Tensor empty = eq(max(out.bias.expand(full_shape), -1, true).first, -inf);  // (..., L, 1)
  if (S > 0 && sum(empty).item<std::int64_t>() > 0) out.empty_rows = empty;
  return out;
}

// P (..., L, S): the attention probabilities of q (..., L, E) and k (..., S, E).
Tensor probabilities(const Tensor& q, const Tensor& k, const MaskBias& mask, double scale) {
  Tensor scores = mul(matmul(q, k.transpose(-1, -2)), scale);  // (..., L, S)
  if (scores.shape().back() == 0) return scores;
  if (mask.bias.defined()) scores = add(scores, mask.bias);
  const Tensor zero = full({}, 0, q.dtype());
  if (mask.empty_rows.defined()) scores = where(mask.empty_rows, zero, scores);  // finite, so no NaN
  Tensor p = softmax(scores, -1);
  return mask.empty_rows.defined() ? where(mask.empty_rows, zero, p) : p;
}

// q, k, v (B, H, L, E) whose rows the kernels can read where they lie: each (B, L, H, E) in
// memory with rows `ld` floats apart, as the heads of a (B, L, ld) tensor's columns (nanoGPT's
// c_attn(x).split(C, 2) viewed as heads: ld = 3C). 0 when they do not share such a layout.
std::int64_t shared_row_stride(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& full) {
  if (full.size() != 4 || q.shape() != full || k.shape() != full || v.shape() != full) return 0;
  const std::int64_t L = full[2], E = full[3], ld = q.strides()[2];
  const std::vector<std::int64_t> rows = {L * ld, E, ld, 1};
  const bool fits = ld >= full[1] * E && q.strides() == rows && k.strides() == rows && v.strides() == rows;
  return fits ? ld : 0;
}

// The output (B, L, H, E) dense, as the kernels write it, seen as (B, H, L, E): torch's CPU
// attention returns the same transposed layout, so y.transpose(1, 2).contiguous() copies nothing.
Tensor heads_output(const Shape& full) { return Tensor::empty(DType::F32, {full[0], full[2], full[1], full[3]}); }

// The kernels' causal self-attention: q, k, v (batch..., L, E) F32 -> (batch..., L, E).
Tensor causal_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch) {
  const std::int64_t L = q.shape()[q.shape().size() - 2], E = q.shape().back();
  const std::int64_t G = shape_numel(batch);  // each batch element is one "head" of the kernel
  Shape full = batch;
  full.push_back(L);
  full.push_back(E);
  if (const std::int64_t ld = shared_row_stride(q, k, v, full)) {  // one kernel call per sequence
    const std::int64_t B = full[0], H = full[1];
    Tensor out = heads_output(full);
    std::vector<float> scratch(static_cast<std::size_t>(kernels::attention_scratch_size(L, 0, H)));
    for (std::int64_t b = 0; b < B; ++b)
      kernels::causal_attention(out.data<float>() + b * L * H * E, scratch.data(), q.data<float>() + b * L * ld,
                                k.data<float>() + b * L * ld, v.data<float>() + b * L * ld, L, 0, H, E, ld, ld);
    return out.transpose(1, 2);
  }
  // Heads side by side in each row, as the kernel reads them: (L, G, E).
  const auto rows = [&](const Tensor& t) { return dense(t.expand(full).reshape({G, L, E}).permute({1, 0, 2})); };
  const Tensor qr = rows(q), kr = rows(k), vr = rows(v);
  Tensor out = Tensor::empty(DType::F32, {L, G, E});
  std::vector<float> scratch(static_cast<std::size_t>(kernels::attention_scratch_size(L, 0, G)));
  kernels::causal_attention(out.data<float>(), scratch.data(), qr.data<float>(), kr.data<float>(), vr.data<float>(), L,
                            0, G, E, G * E, G * E);
  return dense_copy(out.permute({1, 0, 2})).reshape(full);
}

// t broadcast to full (batch..., L, E) as the training kernels read it: (G, L, E) dense, each of
// the G batch elements one sequence of one head.
Tensor sequences(const Tensor& t, const Shape& full, std::int64_t G, std::int64_t L, std::int64_t E) {
  return dense(t.expand(full).reshape({G, L, E}));
}

// The kernels' dropout for a draw's seed: p as a float (p == 0: none).
kernels::DropoutMask attention_dropout(double p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first) {
  return {static_cast<float>(p), seed, stream, first};
}

// The training kernels on q, k, v (B, H, L, E) read where they lie (shared_row_stride `ld`):
// neither the inputs nor the output are copied, nor are they in the backward
// (scaled_dot_product_attention_heads_backward).
Tensor causal_heads_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& full, std::int64_t ld,
                           double dropout_p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first) {
  const std::int64_t B = full[0], H = full[1], L = full[2], E = full[3];
  Tensor out = heads_output(full), probs = Tensor::empty(DType::F32, {B * H, L, L});
  kernels::causal_attention_forward(out.data<float>(), probs.data<float>(), q.data<float>(), k.data<float>(),
                                    v.data<float>(), ld, attention_dropout(dropout_p, seed, stream, first), B, L, H, E);
  if (!autograd::any_requires_grad({&q, &k, &v})) return out.transpose(1, 2);
  const autograd::SavedTensor sq(q), sk(k), sv(v);
  const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
  return autograd::record(kOp, out.transpose(1, 2), {&q, &k, &v}, [=](const Tensor& g) {  // g (B, H, L, E)
    auto grads = tensor_detail::scaled_dot_product_attention_heads_backward(g, sq.get(kOp), sk.get(kOp), sv.get(kOp),
                                                                            probs, ld, dropout_p, seed, stream, first);
    return std::vector<Tensor>{gq ? grads[0] : Tensor(), gk ? grads[1] : Tensor(), gv ? grads[2] : Tensor()};
  });
}

// The training kernels' forward: q, k, v (batch..., L, E) F32 -> (batch..., L, E), recording
// the backward (scaled_dot_product_attention_backward) when one of them wants a gradient. With
// dropout_p > 0 the mask's seed is one draw of the process-wide generator (or a DropoutStreams
// scope's stream), so manual_seed makes the mask reproducible; the backward redraws the same mask.
Tensor causal_training_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double dropout_p) {
  const std::int64_t L = q.shape()[q.shape().size() - 2], E = q.shape().back();
  const std::int64_t G = shape_numel(batch);
  Shape full = batch;
  full.push_back(L);
  full.push_back(E);
  // Rows along q's first dimension (a DropoutStreams scope numbers the mask by them).
  const std::int64_t rows = q.dim() > 2 && q.shape()[0] > 0 ? q.shape()[0] : 1;
  const kernels::DropoutMask mask = dropout_p > 0.0 ? dropout_mask(dropout_p, G * L * L / rows) : kernels::DropoutMask{};
  const std::uint64_t seed = mask.seed, stream = mask.stream, first = mask.first;
  if (const std::int64_t ld = shared_row_stride(q, k, v, full))
    return causal_heads_kernel(q, k, v, full, ld, dropout_p, seed, stream, first);
  Tensor out = Tensor::empty(DType::F32, {G, L, E}), probs = Tensor::empty(DType::F32, {G, L, L});
  {
    const autograd::NoGradGuard no_grad;
    const Tensor qs = sequences(q.detach(), full, G, L, E), ks = sequences(k.detach(), full, G, L, E),
                 vs = sequences(v.detach(), full, G, L, E);
    kernels::causal_attention_forward(out.data<float>(), probs.data<float>(), qs.data<float>(), ks.data<float>(),
                                      vs.data<float>(), E, attention_dropout(dropout_p, seed, stream, first), G, L, 1, E);
  }
  out = out.reshape(full);
  if (!autograd::any_requires_grad({&q, &k, &v})) return out;
  const autograd::SavedTensor sq(q), sk(k), sv(v);
  const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
  return autograd::record(kOp, std::move(out), {&q, &k, &v}, [=](const Tensor& g) {  // g (..., L, E)
    const Tensor& vq = sq.get(kOp);
    const Tensor& vk = sk.get(kOp);
    const Tensor& vv = sv.get(kOp);
    const auto grads = tensor_detail::scaled_dot_product_attention_backward(
        sequences(g, full, G, L, E), sequences(vq, full, G, L, E), sequences(vk, full, G, L, E),
        sequences(vv, full, G, L, E), probs, dropout_p, seed, stream, first);
    return std::vector<Tensor>{gq ? sum_to(grads[0].reshape(full), vq.shape()) : Tensor(),
                               gk ? sum_to(grads[1].reshape(full), vk.shape()) : Tensor(),
                               gv ? sum_to(grads[2].reshape(full), vv.shape()) : Tensor()};
  });
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, const Tensor& attn_mask) {
  const auto shapes = [&] {
    return str("q ", shape_to_string(q.shape()), ", k ", shape_to_string(k.shape()), ", v ", shape_to_string(v.shape()));
  };
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw ValueError(str(kOp, ": q, k and v need at least 2 dims (..., L, E), got ", shapes()));
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype() || (q.dtype() != DType::F32 && q.dtype() != DType::F64))
    throw TypeError(str(kOp, ": needs q, k and v all F32 or all F64, got ", dtype_name(q.dtype()), ", ",
                        dtype_name(k.dtype()), " and ", dtype_name(v.dtype())));
  if (q.shape().back() != k.shape().back())
    throw ValueError(str(kOp, ": q and k need the same last dim E, got ", shapes()));
  if (k.shape()[k.shape().size() - 2] != v.shape()[v.shape().size() - 2])
    throw ValueError(str(kOp, ": k and v need the same number of positions S (dim -2), got ", shapes()));
  if (!attn_mask.defined()) return;
  if (is_causal) throw ValueError(str(kOp, ": pass either attn_mask or is_causal, not both"));
  if (attn_mask.dtype() != DType::BOOL && attn_mask.dtype() != q.dtype())
    throw TypeError(str(kOp, ": attn_mask must be BOOL or q's dtype ", dtype_name(q.dtype()), ", got ",
                        dtype_name(attn_mask.dtype())));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                    const Tensor& attn_mask, std::optional<double> scale, double dropout_p) {
  check_inputs(q, k, v, is_causal, attn_mask);
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0)) throw ValueError(str(kOp, ": dropout_p must be in [0, 1], got ", dropout_p));
  const std::int64_t L = q.shape()[q.shape().size() - 2], S = k.shape()[k.shape().size() - 2];
  const std::int64_t E = q.shape().back(), Ev = v.shape().back();
  const Shape batch = broadcast_shapes(
      broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2), Shape(k.shape().begin(), k.shape().end() - 2), kOp),
      Shape(v.shape().begin(), v.shape().end() - 2), kOp);
  if (attn_mask.defined()) {
    Shape scores = batch;
    scores.push_back(L);
    scores.push_back(S);
    if (broadcast_shapes(attn_mask.shape(), scores, kOp) != scores)
      throw ValueError(str(kOp, ": attn_mask of shape ", shape_to_string(attn_mask.shape()),
                           " does not broadcast to the scores' shape ", shape_to_string(scores)));
  }
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
  // The kernels scale by the float 1 / sqrt(E) and keep s <= t: default scale, L == S only.
  const bool kernel_fits = q.dtype() == DType::F32 && is_causal && L == S && E == Ev && L > 0 && E > 0 &&
                           static_cast<float>(s) == 1.0f / std::sqrt(static_cast<float>(E));
  // The training kernels where a gradient or dropout needs what they keep; their dropout's scale
  // 1 / (1 - p) is a float, so p must stay below 1 as a float (p == 1 drops everything: composed).
  const bool wants_grad = autograd::any_requires_grad({&q, &k, &v});
  if (kernel_fits && static_cast<float>(dropout_p) < 1.0f && (dropout_p > 0.0 || wants_grad))
    return causal_training_kernel(q, k, v, batch, dropout_p);
  // Without a gradient or dropout the kernel needs no mask (building the causal one took about
  // 5% of a small GPT's batch-1 forward).
  if (kernel_fits && dropout_p == 0.0 && !wants_grad) {
    const autograd::NoGradGuard no_grad;
    return causal_kernel(q, k, v, batch);
  }
  const MaskBias mask = mask_bias(attn_mask, is_causal, L, S, q.dtype());
  // With dropout the probabilities themselves are dropped: composed ops, whose gradients follow
  // (the one-node backward below recomputes the probabilities, which a random mask forbids).
  if (dropout_p > 0.0) return matmul(dropout(probabilities(q, k, mask, s), dropout_p), v);
  Tensor out;
  {
    const autograd::NoGradGuard no_grad;
    out = matmul(probabilities(q.detach(), k.detach(), mask, s), v.detach());  // (..., L, Ev)
  }
  if (!wants_grad) return out;
  const autograd::SavedTensor sq(q), sk(k), sv(v);
  const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
  return autograd::record(kOp, std::move(out), {&q, &k, &v}, [=](const Tensor& g) {  // g (..., L, Ev)
    const Tensor& vq = sq.get(kOp);
    const Tensor& vk = sk.get(kOp);
    const Tensor& vv = sv.get(kOp);
    return scaled_dot_product_attention_math_backward(g, vq, vk, vv, probabilities(vq, vk, mask, s), s, {gq, gk, gv});
  });
}

std::vector<Tensor> tensor_detail::scaled_dot_product_attention_math_backward(const Tensor& g, const Tensor& q,
                                                                              const Tensor& k, const Tensor& v,
                                                                              const Tensor& p, double scale,
                                                                              std::array<bool, 3> output_mask) {
  const Tensor dp = matmul(g, v.transpose(-1, -2));                // (..., L, S)
  const Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));  // softmax's backward
  return {output_mask[0] ? sum_to(mul(matmul(ds, k), scale), q.shape()) : Tensor(),
          output_mask[1] ? sum_to(mul(matmul(ds.transpose(-1, -2), q), scale), k.shape()) : Tensor(),
          output_mask[2] ? sum_to(matmul(p.transpose(-1, -2), g), v.shape()) : Tensor()};
}

std::vector<Tensor> tensor_detail::scaled_dot_product_attention_backward(const Tensor& g, const Tensor& q,
                                                                         const Tensor& k, const Tensor& v,
                                                                         const Tensor& probs, double dropout_p,
                                                                         std::uint64_t seed, std::uint64_t stream,
                                                                         std::uint64_t first) {
  const auto fits = [&](const Tensor& t, const Shape& shape) {
    return t.dtype() == DType::F32 && t.is_contiguous() && t.shape() == shape;
  };
  const Shape heads = q.shape();
  if (heads.size() != 3 || !fits(q, heads) || !fits(k, heads) || !fits(v, heads) || !fits(g, heads) ||
      !fits(probs, {heads[0], heads[1], heads[1]}))
    throw ValueError(str("scaled_dot_product_attention_backward: needs contiguous F32 g, q, k, v of one shape (G, L, E) "
                         "and probs (G, L, L), got g ", shape_to_string(g.shape()), ", q ", shape_to_string(q.shape()),
                         ", k ", shape_to_string(k.shape()), ", v ", shape_to_string(v.shape()), ", probs ",
                         shape_to_string(probs.shape())));
  if (!(dropout_p >= 0.0 && static_cast<float>(dropout_p) < 1.0f))
    throw ValueError(str("scaled_dot_product_attention_backward: dropout_p must be in [0, 1), got ", dropout_p));
  const std::int64_t G = heads[0], L = heads[1], E = heads[2];
  Tensor dq = Tensor::empty(DType::F32, heads), dk = Tensor::empty(DType::F32, heads),
         dv = Tensor::empty(DType::F32, heads);
  kernels::causal_attention_backward(dq.data<float>(), dk.data<float>(), dv.data<float>(), g.data<float>(),
                                     q.data<float>(), k.data<float>(), v.data<float>(), E, probs.data<float>(),
                                     attention_dropout(dropout_p, seed, stream, first), G, L, 1, E);
  return {dq, dk, dv};
}

std::vector<Tensor> tensor_detail::scaled_dot_product_attention_heads_backward(
    const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs, std::int64_t ld,
    double dropout_p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first) {
  const Shape& full = q.shape();
  if (full.size() != 4 || q.dtype() != DType::F32 || shared_row_stride(q, k, v, full) != ld || ld == 0 ||
      g.dtype() != DType::F32 || g.shape() != full || probs.dtype() != DType::F32 || !probs.is_contiguous() ||
      probs.shape() != Shape{full[0] * full[1], full[2], full[2]})
    throw ValueError(str("scaled_dot_product_attention_heads_backward: needs F32 q, k, v (B, H, L, E) as heads of ",
                         "rows ", ld, " floats apart, g of their shape and contiguous probs (B H, L, L), got q ",
                         shape_to_string(q.shape()), ", g ", shape_to_string(g.shape()), ", probs ",
                         shape_to_string(probs.shape())));
  if (!(dropout_p >= 0.0 && static_cast<float>(dropout_p) < 1.0f))
    throw ValueError(str("scaled_dot_product_attention_heads_backward: dropout_p must be in [0, 1), got ", dropout_p));
  const std::int64_t B = full[0], H = full[1], L = full[2], E = full[3], C = H * E;
  const Tensor dy = dense(g.transpose(1, 2));  // (B, L, H, E), as the output
  const bool shared = ld >= 3 * C;
  Tensor buffer = Tensor::empty(DType::F32, {shared ? 1 : 3, B * L * ld});
  const std::int64_t at[3] = {0, shared ? C : B * L * ld, shared ? 2 * C : 2 * B * L * ld};
  float* base = buffer.data<float>();
  kernels::causal_attention_backward(base + at[0], base + at[1], base + at[2], dy.data<float>(), q.data<float>(),
                                     k.data<float>(), v.data<float>(), ld, probs.data<float>(),
                                     attention_dropout(dropout_p, seed, stream, first), B, L, H, E);
  const auto grad = [&](int i) { return buffer.as_strided(full, {L * ld, E, ld, 1}, at[i]); };
  return {grad(0), grad(1), grad(2)};
}


}  // namespace kael
