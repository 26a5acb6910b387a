#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// The largest of x (n >= 1), in sixteen lanes the compiler vectorizes (where a search for the
// largest one's index is one branchy chain).
float lane_max(const float* x, std::int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes];
  std::fill(acc, acc + kLanes, x[0]);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (; i < n; ++i) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
  float largest = acc[0];
  for (int j = 1; j < kLanes; ++j) largest = acc[j] > largest ? acc[j] : largest;
  return largest;
}

// The calling thread's row of at least n floats, for a forward without dlogits.
float* row_scratch(std::int64_t n) {
  thread_local std::vector<float> buffer;
  if (static_cast<std::int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

}  // namespace

float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V) {
  if (target < 0) {
    if (dlogits != nullptr) std::fill(dlogits, dlogits + V, 0.0f);
    return 0.0f;
  }
  const float margin = lane_max(logits, V) - logits[target];
  float* p = dlogits != nullptr ? dlogits : row_scratch(V);
  active_kernels().softmax(p, logits, V);
  const float loss = margin - std::log(lane_max(p, V));
  if (dlogits == nullptr) return loss;
  p[target] -= 1.0f;
  for (std::int64_t j = 0; j < V; ++j) p[j] *= dscale;
  return loss;
}

namespace {

// Rows of the output head done at a time: the logits chunk is kHeadRows * V floats (103 MB for
// GPT-2's vocabulary), not B * T * V. Each chunk packs a copy of w and adds into all of dw, so
// fewer, larger chunks pack less often (the two sizes measured: docs/training_speed.md, "The
// measurements behind the training step's constants").
constexpr std::int64_t kHeadRows = 512;

// Vocabulary entries summed at a time in the head's dx = dlogits @ w: one float sum over all
// 50257 of them loses precision, and sums of 2048 added block by block come closer to float64
// (by how much: docs/training_speed.md, "The measurements behind the training step's
// constants").
constexpr std::int64_t kHeadVocabBlock = 2048;

// BF16 elements of the head's operands at bf16, each converted once per call and
// read by every chunk of rows: w^T for the logits, then (for the backward) each vocabulary
// block of w for dx and one chunk's x for dw, in that order.
std::int64_t head_bf16_elements(std::int64_t R, std::int64_t C, std::int64_t V) {
  std::int64_t n = bf16_operand_elements(V, C) + bf16_operand_elements(C, R);
  for (std::int64_t v0 = 0; v0 < V; v0 += kHeadVocabBlock)
    n += bf16_operand_elements(C, std::min(kHeadVocabBlock, V - v0));
  return n;
}

}  // namespace

std::int64_t head_scratch_floats(std::int64_t M, std::int64_t C, std::int64_t V) {
  const std::int64_t R = std::min(M, kHeadRows);
  return std::max(V * C, (head_bf16_elements(R, C, V) + 1) / 2) + R * V;
}

void head_cross_entropy(float* losses, float* dx, float* dw, float* scratch, const float* x, const float* w,
                        const std::int32_t* targets, float dscale, std::int64_t M, std::int64_t C, std::int64_t V,
                        bool bf16) {
  const bool backward = dx != nullptr;
  const std::int64_t R_max = std::min(M, kHeadRows);
  // The weight converted for the kernels once, for every chunk of rows: the head is the largest
  // weight. F32: w^T (C, V) in panels. BF16: w^T, then w's vocabulary blocks, then x's chunk.
  float* packed = scratch;
  auto* w_t16 = reinterpret_cast<std::uint16_t*>(scratch);
  std::uint16_t* w_blocks16 = w_t16 + bf16_operand_elements(V, C);
  std::uint16_t* x16 = w_t16 + head_bf16_elements(R_max, C, V) - bf16_operand_elements(C, R_max);
  float* logits = scratch + head_scratch_floats(M, C, V) - R_max * V;  // (R, V)
  if (!bf16) {
    pack_panels_transposed(packed, w, C, V);
  } else {
    pack_bf16_operand(w_t16, w, C, true, V, C);
    std::uint16_t* block16 = w_blocks16;
    for (std::int64_t v0 = 0; backward && v0 < V; v0 += kHeadVocabBlock) {
      const std::int64_t kb = std::min(kHeadVocabBlock, V - v0);
      pack_bf16_operand(block16, w + v0 * C, C, false, C, kb);
      block16 += bf16_operand_elements(C, kb);
    }
  }
  for (std::int64_t r0 = 0; r0 < M; r0 += kHeadRows) {
    const std::int64_t R = std::min(kHeadRows, M - r0);
    const float* xr = x + r0 * C;
    if (bf16)
      gemm_bf16_packed(logits, V, xr, C, false, w_t16, R, V, C);  // (R, V) = x (R, C) @ w^T
    else
      linear_packed(logits, xr, packed, nullptr, R, C, V);
    parallel_for(R, 1, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        float* row = logits + i * V;
        losses[r0 + i] = cross_entropy_row(backward ? row : nullptr, row, targets[r0 + i], dscale, V);
      }
    });
    if (!backward) continue;
    // Per block of the vocabulary: dx (R, C) += dlogits[:, block] @ w[block], and
    // dw[block] (kb, C) += dlogits[:, block]^T @ x.
    float* dxr = dx + r0 * C;
    std::fill(dxr, dxr + R * C, 0.0f);
    if (bf16) pack_bf16_operand(x16, xr, C, false, C, R);
    const std::uint16_t* block16 = w_blocks16;
    for (std::int64_t v0 = 0; v0 < V; v0 += kHeadVocabBlock) {
      const std::int64_t kb = std::min(kHeadVocabBlock, V - v0);
      if (bf16) {
        gemm_bf16_packed(dxr, C, logits + v0, V, false, block16, R, C, kb, /*accumulate=*/true);
        gemm_bf16_packed(dw + v0 * C, C, logits + v0, V, true, x16, kb, C, R, /*accumulate=*/true);
        block16 += bf16_operand_elements(C, kb);
        continue;
      }
      gemm(dxr, C, logits + v0, V, false, w + v0 * C, C, false, R, C, kb, /*accumulate=*/true);
      gemm(dw + v0 * C, C, logits + v0, V, true, xr, C, false, kb, C, R, /*accumulate=*/true);
    }
  }
}

namespace ref {

float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V) {
  if (target < 0) {
    if (dlogits != nullptr) std::fill(dlogits, dlogits + V, 0.0f);
    return 0.0f;
  }
  const double largest = *std::max_element(logits, logits + V);
  double sum = 0;
  for (std::int64_t j = 0; j < V; ++j) sum += std::exp(logits[j] - largest);
  const double loss = std::log(sum) - (logits[target] - largest);
  if (dlogits != nullptr) {
    for (std::int64_t j = 0; j < V; ++j)
      dlogits[j] = static_cast<float>((std::exp(logits[j] - largest) / sum - (j == target ? 1.0 : 0.0)) * dscale);
  }
  return static_cast<float>(loss);
}

}  // namespace ref
}  // namespace kael::kernels
