// The tensor library's operations, with PyTorch's names and semantics: NumPy broadcasting for
// elementwise ops, PyTorch's type promotion (a float operand wins over integers, the wider
// float wins; BOOL < I64 < F32 < F64; `/` on integers gives F32), dims that may be negative,
// and reverse-mode gradients for every differentiable op (tensor/autograd.hpp). Errors name the
// op and the shapes: ValueError for shapes, TypeError for dtypes, IndexError for dims/indices.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael {

// A number given beside a tensor: integral ones keep an integer tensor's dtype, others make
// the result floating (as a Python int or float would in PyTorch).
struct Scalar {
  double value;
  bool integral;
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v) : value(static_cast<double>(v)), integral(std::is_integral_v<T>) {}  // NOLINT: implicit on purpose
};

// --- creation (default dtype F32) ---
Tensor empty(Shape shape, DType dtype = DType::F32);
Tensor zeros(Shape shape, DType dtype = DType::F32);
Tensor ones(Shape shape, DType dtype = DType::F32);
Tensor full(Shape shape, Scalar value, DType dtype = DType::F32);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, Scalar value);
// [start, end) in steps of step: ceil((end - start) / step) values.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::F32);
Tensor arange(double end, DType dtype = DType::F32);
Tensor linspace(double start, double end, std::int64_t steps, DType dtype = DType::F32);
Tensor eye(std::int64_t n, DType dtype = DType::F32);
// A tensor holding a copy of `values` with `shape` (numel must match); T's dtype.
template <class T>
Tensor from_vector(const std::vector<T>& values, Shape shape);
// A 1-D F32 tensor of the values, or 2-D from nested rows of equal length.
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::F32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype = DType::F32);

// --- random numbers: one process-wide generator (a 64-bit Mersenne Twister), reseeded by
// manual_seed; the same seed gives the same stream of draws in the same order of calls. ---
void manual_seed(std::uint64_t seed);
Tensor rand(Shape shape, DType dtype = DType::F32);   // uniform in [0, 1)
Tensor randn(Shape shape, DType dtype = DType::F32);  // standard normal
Tensor randint(std::int64_t low, std::int64_t high, Shape shape, DType dtype = DType::I64);  // [low, high)
// A random permutation of 0 .. n-1 (Fisher-Yates on the generator).
Tensor randperm(std::int64_t n, DType dtype = DType::I64);
// Class ids drawn from each row of `probs` ((C) or (B, C): non-negative weights, not
// necessarily summing to 1): (num_samples) or (B, num_samples) I64. Without replacement a
// class is drawn at most once per row, so num_samples must not exceed the nonzero weights.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement = false);
// Fill `t` in place with normal (mean, std) or uniform [from, to) draws; t.normal_() in torch.
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& uniform_(Tensor& t, double from = 0.0, double to = 1.0);

// --- threads: torch.set_num_threads. The library's ops (and the engine's forward pass) share
// one pool of the kernel table; n <= 0 means one thread per physical core (the default).
// Results do not depend on the count. ---
void set_num_threads(int n);
int get_num_threads();

// --- dtypes ---
DType promote_types(DType a, DType b);
bool is_integral(DType dtype, bool include_bool = false);

// --- elementwise, broadcasting ---
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
// approximate "none" (the erf form) or "tanh" (GPT-2's gelu_new).
Tensor gelu(const Tensor& a, const char* approximate = "none");
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
// Each element bounded to [min, max] (either bound may be absent, not both); the gradient
// passes where min <= x <= max, as torch's.
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
// Python's // and %: floor(a / b), and a - floor(a / b) * b (the sign of b). A backward
// through floor_divide is a ValueError (as torch's); remainder's is g for a and -floor(a / b) g for b.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
// Comparisons give BOOL.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
// condition ? a : b, all three broadcast.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value);
// In place: a's values where mask (broadcast to a's shape) is true become value.
Tensor& masked_fill_(Tensor& a, const Tensor& mask, Scalar value);

// --- reductions (dims may be negative; an empty list means every dim) ---
Tensor sum(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false);
// Whether every (all) or some (any) element is nonzero, NaN included: BOOL (U8 for a U8 input, as torch).
Tensor all(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false);
Tensor any(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false);
// correction 1 is the unbiased estimate (PyTorch's default).
Tensor var(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false, int correction = 1);
// sqrt(var): the standard deviation.
Tensor std(const Tensor& a, std::vector<int> dims = {}, bool keepdim = false, int correction = 1);
// The k largest (or smallest) values along `dim` and their I64 indices, largest first when
// sorted (NaN counts as the largest, as torch's); the gradient goes to the picked positions.
std::pair<Tensor, Tensor> topk(const Tensor& a, std::int64_t k, int dim = -1, bool largest = true, bool sorted = true);
// out[..., j, ...] = a[..., index[..., j, ...], ...] along dim (torch.gather); index is I64
// with a's dims, no larger than a's outside `dim`. The gradient adds back to the picked places.
Tensor gather(const Tensor& a, int dim, const Tensor& index);
// The largest (smallest) value along `dim` and its first index (I64).
std::pair<Tensor, Tensor> max(const Tensor& a, int dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int dim, bool keepdim = false);
Tensor max(const Tensor& a);  // of all elements
Tensor min(const Tensor& a);
Tensor argmax(const Tensor& a, int dim, bool keepdim = false);
Tensor argmax(const Tensor& a);  // flat index of the first largest element
Tensor argmin(const Tensor& a, int dim, bool keepdim = false);

// --- products ---
// torch.matmul: 1-D @ 1-D is a dot product, 2-D the matrix product, more dims batched with the
// batch dims broadcast. F32 runs on the kernel table's threaded GEMM.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (..., in) @ weight (out, in)^T + bias (out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Batched matrix product of (B, n, m) and (B, m, p) (torch.bmm: no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
// Einstein summation: "ij,jk->ik", "bhqd,bhkd->bhqk", "...ij,...jk", "ii->i" is not taken (no
// diagonals). Any number of operands, contracted a pair at a time by permute, reshape and
// matmul; without "->" the output is the letters used once, in alphabetical order.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

// --- neural-network functions ---
Tensor softmax(const Tensor& a, int dim);
Tensor log_softmax(const Tensor& a, int dim);
// Normalizes over the last dims of `normalized_shape`, then * weight + bias (either may be undefined).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// torch.nn.functional.scaled_dot_product_attention: q (..., L, E), k (..., S, E),
// v (..., S, Ev) -> (..., L, Ev), batch dims broadcast; softmax(scale q k^T + mask) v with scale
// 1 / sqrt(E) unless given. is_causal keeps positions s <= t of row t (top-left aligned when
// L != S); attn_mask (broadcast to (..., L, S)) is BOOL (true takes part) or q's dtype (added to
// the scores); not both. A row the mask hides entirely gives 0 (PyTorch's safe softmax).
// dropout_p > 0 drops probabilities (always: pass 0 outside training, as torch's callers do).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal = false,
                                    const Tensor& attn_mask = Tensor(), std::optional<double> scale = std::nullopt,
                                    double dropout_p = 0.0);
// --- joining, splitting and indexing ---
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);
// Views of consecutive pieces along dim: of split_size each (the last may be shorter), of the
// given sizes (which must add up to the dim's size), `chunks` pieces of ceil(size / chunks),
// or each index (unbind).
std::vector<Tensor> split(const Tensor& a, std::int64_t split_size, int dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<std::int64_t>& sizes, int dim = 0);
std::vector<Tensor> chunk(const Tensor& a, std::int64_t chunks, int dim = 0);
std::vector<Tensor> unbind(const Tensor& a, int dim = 0);
// The tensor tiled repeats[d] times along each dim (repeats may have more dims than a).
Tensor repeat(const Tensor& a, const Shape& repeats);
// Elements shifted along dims, wrapping around; with no dims, over the flattened tensor.
Tensor roll(const Tensor& a, const std::vector<std::int64_t>& shifts, const std::vector<int>& dims = {});
// The lower (upper) triangle of the last two dims, from `diagonal` (0: the main one) on; the
// rest zero.
Tensor tril(const Tensor& a, std::int64_t diagonal = 0);
Tensor triu(const Tensor& a, std::int64_t diagonal = 0);
// input with the elements of a contiguous tensor of its shape at (size, stride, offset)
// replaced by src (broadcast): torch.as_strided_scatter; what t[index] = value computes.
Tensor as_strided_scatter(const Tensor& input, const Tensor& src, const Shape& size,
                          const std::vector<std::int64_t>& stride, std::int64_t offset = 0);
// I64 (ids..., num_classes) with a 1 at each id; num_classes -1 means max(ids) + 1.
Tensor one_hot(const Tensor& ids, std::int64_t num_classes = -1);
// The entries of `a` at the ids of a 1-D integer index along dim; IndexError for an id
// outside [0, size), negative ones included (torch's rule).
Tensor index_select(const Tensor& a, int dim, const Tensor& index);
// weight (num, dim) rows picked by integer ids of any shape: (ids..., dim); ids in [0, num).
Tensor embedding(const Tensor& ids, const Tensor& weight);
// torch.nn.functional.cross_entropy with class ids: logits (N, C), (C) or (N, C, d...) and
// integer targets (N), () or (N, d...). Targets equal to ignore_index count for nothing;
// reduction "mean" (over the counted targets), "sum" or "none" (the targets' shape);
// label_smoothing e mixes (1 - e) of the target's loss with e of the mean over the classes.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index = -100,
                     std::string_view reduction = "mean", double label_smoothing = 0.0);
// torch.nn.functional.nll_loss: the same on log-probabilities (no softmax, no smoothing).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index = -100,
                std::string_view reduction = "mean");
// Squared error, reduced as cross_entropy's ("mean", "sum", "none"); a and b broadcast.
Tensor mse_loss(const Tensor& a, const Tensor& b, std::string_view reduction = "mean");
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training;
// the mask comes from the process-wide generator.
Tensor dropout(const Tensor& a, double p, bool training = true);

// --- operators ---
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
inline Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(Scalar a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b);
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
// A scalar on the left compares the other way round: 1 < t is t > 1.
inline Tensor operator==(Scalar a, const Tensor& b) { return eq(b, a); }
inline Tensor operator!=(Scalar a, const Tensor& b) { return ne(b, a); }
inline Tensor operator<(Scalar a, const Tensor& b) { return gt(b, a); }
inline Tensor operator<=(Scalar a, const Tensor& b) { return ge(b, a); }
inline Tensor operator>(Scalar a, const Tensor& b) { return lt(b, a); }
inline Tensor operator>=(Scalar a, const Tensor& b) { return le(b, a); }

// Prints the values (PyTorch's layout, elided past 1000 elements) with shape and dtype.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

// True when every element of a and b (broadcast) is within atol + rtol * |b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace kael
