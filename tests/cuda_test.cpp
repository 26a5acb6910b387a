// Tensors on a CUDA device, on a machine with one: storage, copies, the caching allocator's
// figures, out of memory, and the elementwise ops against the CPU's. Every test is skipped
// where no CUDA device is usable (the no-GPU behaviour is tests/core_device_test.cpp's and
// tests/library_tensor_device_test.cpp's); scripts/test_cuda.sh runs it on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kael/core/cuda.hpp"
#include "kael/nn/layers.hpp"
#include "kael/optim/adam.hpp"
#include "kael/optim/sgd.hpp"
#include "kael/tensor/ops.hpp"

using namespace kael;

namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no usable CUDA device here";
  }
};

const Device kCuda{Device::Type::cuda, 0};

std::vector<float> random_values(std::int64_t n, unsigned seed, float low = -3.0f, float high = 3.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (float& v : out) v = dist(engine);
  return out;
}

template <class E>
std::string message_of(auto&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of that type)";
}

}  // namespace

TEST_F(Cuda, DeviceQueries) {
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_EQ(parse_device("cuda"), kCuda);
  const std::string past = message_of<Error>([] { parse_device(str("cuda:", cuda::device_count())); });
  EXPECT_NE(past.find("this machine has"), std::string::npos) << past;
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda_synchronize());
}

TEST_F(Cuda, CopiesThereAndBack) {
  const std::vector<float> values = random_values(6 * 7, 1);
  const Tensor host = from_vector<float>(values, {6, 7});
  const Tensor device = host.to("cuda");
  EXPECT_EQ(device.device(), kCuda);
  EXPECT_EQ(device.shape(), host.shape());
  EXPECT_EQ(device.to_vector<float>(), values);
  EXPECT_EQ(device.cpu().device(), Device::cpu());
  EXPECT_EQ(device.cpu().to_vector<float>(), values);
  EXPECT_EQ(device.to(kCuda).device_raw_data(), device.device_raw_data());  // already there: the same tensor
  EXPECT_EQ(device.select(0, 2).select(0, 3).item<float>(), values[2 * 7 + 3]);
  // Strided views both ways: a transposed or stepped view copies its own elements only.
  EXPECT_EQ(host.transpose(0, 1).to("cuda").to_vector<float>(), host.transpose(0, 1).contiguous().to_vector<float>());
  EXPECT_EQ(device.transpose(0, 1).cpu().to_vector<float>(), host.transpose(0, 1).contiguous().to_vector<float>());
  EXPECT_EQ(device.slice(1, 1, 7, 3).cpu().to_vector<float>(), host.slice(1, 1, 7, 3).contiguous().to_vector<float>());
  EXPECT_EQ(device.select(1, 4).to(kCuda).device(), kCuda);
  const Tensor ids = from_vector<std::int64_t>({3, 1, 4}, {3}).to("cuda");
  EXPECT_EQ(ids.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 1, 4}));
  EXPECT_EQ(Tensor::empty(DType::F32, {0}, kCuda).cpu().numel(), 0);
}

TEST_F(Cuda, PrintsFromAHostCopy) {
  std::ostringstream out;
  out << from_vector<float>({1.0f, 2.5f}, {2}).to("cuda");
  EXPECT_EQ(out.str(), "tensor([1.0000, 2.5000], shape=[2], dtype=F32, device='cuda:0')");
}

TEST_F(Cuda, CpuOpsRefuseDeviceTensors) {
  const Tensor x = ones({4}).to("cuda");
  EXPECT_THROW(x.data<float>(), Error);
  EXPECT_NE(message_of<Error>([&] { matmul(x, x); }).find("expected a cpu tensor, got one on cuda:0"), std::string::npos);
  EXPECT_NE(message_of<ValueError>([&] { add(ones({4}), x); }).find("got cpu and cuda:0"), std::string::npos);
  EXPECT_NE(message_of<Error>([&] { nn::Linear(2, 2).to("cuda"); }).find("run on the CPU only so far"), std::string::npos);
}

TEST_F(Cuda, TheAllocatorCachesAndCounts) {
  cuda::synchronize();
  cuda::empty_cache();
  const std::size_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  {
    const Tensor a = Tensor::empty(DType::F32, {1000}, kCuda);  // 4000 bytes, rounded to 4096
    EXPECT_EQ(cuda::memory_allocated(), before + 4096);
    const Tensor b = Tensor::empty(DType::F32, {1 << 20}, kCuda);  // 4 MiB
    EXPECT_EQ(cuda::memory_allocated(), before + 4096 + (4u << 20));
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  EXPECT_EQ(cuda::max_memory_allocated(), before + 4096 + (4u << 20));
  EXPECT_GE(cuda::memory_reserved(), before + 4096 + (4u << 20));  // cached
  const Tensor again = Tensor::empty(DType::F32, {1000}, kCuda);  // served from the cache
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(), cuda::memory_allocated());
}

TEST_F(Cuda, OutOfMemoryIsAnErrorNamingTheSize) {
  const std::string message = message_of<Error>([] { Tensor::empty(DType::F32, {std::int64_t{1} << 42}, kCuda); });
  EXPECT_NE(message.find("out of memory on cuda:0"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(std::uint64_t{1} << 44) + " bytes"), std::string::npos) << message;
  EXPECT_NO_THROW(ones({8}).to("cuda").cpu());  // the device still works after
}

// Each element as the CPU computes it (the shared arithmetic of kernels/binary_arith.hpp, no
// fused multiply-add on either side): equal bit for bit.
TEST_F(Cuda, ElementwiseOpsEqualTheCpus) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{(1 << 24) + 77}}) {
    const Tensor a = from_vector<float>(random_values(n, 2), {n});
    const Tensor b = from_vector<float>(random_values(n, 3, 0.5f, 4.0f), {n});
    const Tensor da = a.to("cuda"), db = b.to("cuda");
    EXPECT_EQ(add(da, db).to_vector<float>(), add(a, b).to_vector<float>()) << n;
    EXPECT_EQ(add(da, db, 0.3).to_vector<float>(), add(a, b, 0.3).to_vector<float>()) << n;
    EXPECT_EQ(sub(da, db).to_vector<float>(), sub(a, b).to_vector<float>()) << n;
    EXPECT_EQ(mul(da, db).to_vector<float>(), mul(a, b).to_vector<float>()) << n;
    EXPECT_EQ(div(da, db).to_vector<float>(), div(a, b).to_vector<float>()) << n;
    EXPECT_EQ(mul(da, 2.5).to_vector<float>(), mul(a, 2.5).to_vector<float>()) << n;    // a CPU scalar
    EXPECT_EQ(div(da, db.select(0, 0)).to_vector<float>(), div(a, b.select(0, 0)).to_vector<float>()) << n;
    EXPECT_EQ(add(da, db).device(), kCuda);
  }
  const Tensor m = from_vector<float>(random_values(12, 4), {3, 4});
  EXPECT_EQ(mul(m.to("cuda"), m.to("cuda")).shape(), (Shape{3, 4}));
  EXPECT_EQ(mul(Tensor::empty(DType::F32, {0}, kCuda), Tensor::empty(DType::F32, {0}, kCuda)).numel(), 0);
  cuda::synchronize();
}

namespace {

// The device's result beside the CPU's, on one device op's inputs.
void expect_equal_bits(const Tensor& device, const Tensor& host, const std::string& what) {
  EXPECT_EQ(device.device(), kCuda) << what;
  EXPECT_EQ(device.shape(), host.shape()) << what;
  EXPECT_EQ(device.dtype(), host.dtype()) << what;
  if (host.dtype() == DType::BOOL) {
    EXPECT_EQ(device.cpu().to(DType::I64).to_vector<std::int64_t>(), host.to(DType::I64).to_vector<std::int64_t>()) << what;
    return;
  }
  EXPECT_EQ(device.cpu().contiguous().to_vector<float>(), host.contiguous().to_vector<float>()) << what;
}

void expect_close(const Tensor& device, const Tensor& host, double tolerance, const std::string& what) {
  EXPECT_EQ(device.device(), kCuda) << what;
  ASSERT_EQ(device.shape(), host.shape()) << what;
  const std::vector<float> got = device.cpu().contiguous().to_vector<float>(), want = host.contiguous().to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tolerance * (1.0 + std::abs(want[i]))) << what << " at " << i;
  }
}

}  // namespace

// Broadcasting and strided views: the device walks each operand's strides as the CPU does,
// and runs the same arithmetic, so the bits are the CPU's.
TEST_F(Cuda, BroadcastAndStridedBinaryOpsEqualTheCpus) {
  const Tensor a = from_vector<float>(random_values(3 * 1 * 5, 11), {3, 1, 5});
  const Tensor b = from_vector<float>(random_values(4 * 5, 12, 0.5f, 4.0f), {4, 5});
  const Tensor m = from_vector<float>(random_values(6 * 4, 13), {6, 4});
  const Tensor da = a.to("cuda"), db = b.to("cuda"), dm = m.to("cuda");
  expect_equal_bits(add(da, db), add(a, b), "add broadcast");
  expect_equal_bits(sub(da, db, 0.5), sub(a, b, 0.5), "sub alpha");
  expect_equal_bits(mul(da, db), mul(a, b), "mul broadcast");
  expect_equal_bits(div(db, da), div(b, a), "div broadcast");
  expect_equal_bits(maximum(da, db), maximum(a, b), "maximum");
  expect_equal_bits(minimum(da, db), minimum(a, b), "minimum");
  expect_equal_bits(mul(dm.transpose(0, 1), dm.transpose(0, 1)), mul(m.transpose(0, 1), m.transpose(0, 1)), "transposed");
  expect_equal_bits(add(dm.slice(0, 1, 6, 2), dm.select(0, 0)), add(m.slice(0, 1, 6, 2), m.select(0, 0)), "stepped");
  expect_equal_bits(add(dm, 1.5), add(m, 1.5), "a CPU scalar");
  // More dims than the walk holds, unless they merge: 9 dims of 2 with the last ones merged.
  const Shape nine = {2, 2, 2, 2, 2, 2, 2, 2, 2};
  const Tensor big = from_vector<float>(random_values(512, 14), nine);
  expect_equal_bits(mul(big.to("cuda"), big.to("cuda")), mul(big, big), "nine dims");
}

TEST_F(Cuda, ComparisonsWhereAndMaskedFillEqualTheCpus) {
  std::vector<float> values = random_values(24, 21);
  values[3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = from_vector<float>(values, {4, 6});
  const Tensor b = from_vector<float>(random_values(6, 22), {6});
  const Tensor da = a.to("cuda"), db = b.to("cuda");
  expect_equal_bits(eq(da, db), eq(a, b), "eq");
  expect_equal_bits(ne(da, db), ne(a, b), "ne");
  expect_equal_bits(lt(da, db), lt(a, b), "lt");
  expect_equal_bits(le(da, 0.0), le(a, 0.0), "le scalar");
  expect_equal_bits(gt(da, db), gt(a, b), "gt");
  expect_equal_bits(ge(da, db), ge(a, b), "ge");
  const Tensor mask = gt(a, b), dmask = mask.to("cuda");
  expect_equal_bits(where(dmask, da, db), where(mask, a, b), "where");
  expect_equal_bits(masked_fill(da, dmask, -1e9), masked_fill(a, mask, -1e9), "masked_fill");
}

// The transcendental functions are the CUDA math library's (kernels/unary_arith.hpp), within a
// few ulp of the CPU's vector kernels; neg, abs and relu are exact.
TEST_F(Cuda, UnaryOpsAgreeWithTheCpus) {
  const Tensor x = from_vector<float>(random_values(1000, 31, -6.0f, 6.0f), {10, 100});
  const Tensor p = from_vector<float>(random_values(1000, 32, 0.01f, 9.0f), {10, 100});
  const Tensor dx = x.to("cuda"), dp = p.to("cuda");
  expect_equal_bits(neg(dx), neg(x), "neg");
  expect_equal_bits(abs(dx), abs(x), "abs");
  expect_equal_bits(relu(dx), relu(x), "relu");
  expect_close(exp(dx), exp(x), 1e-6, "exp");
  expect_close(log(dp), log(p), 1e-6, "log");
  expect_close(sqrt(dp), sqrt(p), 1e-6, "sqrt");
  expect_close(rsqrt(dp), rsqrt(p), 1e-6, "rsqrt");
  expect_close(tanh(dx), tanh(x), 1e-6, "tanh");
  expect_close(sigmoid(dx), sigmoid(x), 1e-6, "sigmoid");
  expect_close(sin(dx), sin(x), 1e-6, "sin");
  expect_close(cos(dx), cos(x), 1e-6, "cos");
  expect_close(gelu(dx), gelu(x), 1e-6, "gelu");
  expect_close(gelu(dx, "tanh"), gelu(x, "tanh"), 1e-6, "gelu tanh");
  expect_close(exp(dx.transpose(0, 1)), exp(x.transpose(0, 1)), 1e-6, "exp of a transposed view");
}

TEST_F(Cuda, CopiesConversionsAndFillsEqualTheCpus) {
  const Tensor m = from_vector<float>(random_values(6 * 7, 41, -70000.0f, 70000.0f), {6, 7});
  const Tensor dm = m.to("cuda");
  expect_equal_bits(dm.transpose(0, 1).contiguous(), m.transpose(0, 1).contiguous(), "contiguous");
  EXPECT_TRUE(dm.transpose(0, 1).contiguous().is_contiguous());
  for (const DType dtype : {DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::BOOL}) {
    const Tensor got = dm.transpose(0, 1).to(dtype);
    EXPECT_EQ(got.device(), kCuda);
    EXPECT_EQ(got.dtype(), dtype);
    // Each dtype's bytes, compared through a lossless widening on the host.
    const DType wide = dtype == DType::F64 || is_floating(dtype) ? DType::F64 : DType::I64;
    if (wide == DType::F64)
      EXPECT_EQ(got.cpu().to(wide).to_vector<double>(), m.transpose(0, 1).to(dtype).to(wide).to_vector<double>())
          << dtype_name(dtype);
    else
      EXPECT_EQ(got.cpu().to(wide).to_vector<std::int64_t>(), m.transpose(0, 1).to(dtype).to(wide).to_vector<std::int64_t>())
          << dtype_name(dtype);
  }
  expect_equal_bits(dm.to(DType::F16).to(DType::F32), m.to(DType::F16).to(DType::F32), "through F16");
  expect_equal_bits(zeros_like(dm), zeros_like(m), "zeros_like");
  expect_equal_bits(ones_like(dm), ones_like(m), "ones_like");
  expect_equal_bits(full_like(dm, -2.5), full_like(m, -2.5), "full_like");
  EXPECT_EQ(full_like(dm.to(DType::F16), 3.0).cpu().to(DType::F32).to_vector<float>(), std::vector<float>(42, 3.0f));
  Tensor filled = dm.clone();
  filled.fill_(7.0);
  EXPECT_EQ(filled.cpu().to_vector<float>(), std::vector<float>(42, 7.0f));
  filled.zero_();
  EXPECT_EQ(filled.cpu().to_vector<float>(), std::vector<float>(42, 0.0f));
}

TEST_F(Cuda, SumsAndMeansAgreeWithTheCpus) {
  const Tensor t = from_vector<float>(random_values(5 * 6 * 7, 51), {5, 6, 7});
  const Tensor dt = t.to("cuda");
  for (const std::vector<int>& dims : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {}}) {
    std::ostringstream name;
    name << "dims";
    for (const int d : dims) name << ' ' << d;
    expect_close(dims.empty() ? dt.sum() : sum(dt, dims), dims.empty() ? t.sum() : sum(t, dims), 1e-6, str("sum ", name.str()));
    expect_close(sum(dt, dims.empty() ? std::vector<int>{0} : dims, true),
                 sum(t, dims.empty() ? std::vector<int>{0} : dims, true), 1e-6, str("sum keepdim ", name.str()));
  }
  expect_close(mean(dt, {1}), mean(t, {1}), 1e-6, "mean");
  expect_close(sum(dt.transpose(0, 2), {1}), sum(t.transpose(0, 2), {1}), 1e-6, "sum of a transposed view");
  const Tensor big = from_vector<float>(random_values(1 << 20, 52), {1 << 20});
  expect_close(big.to("cuda").sum(), big.sum(), 1e-6, "a million elements");
}

// Autograd on the device: the backward rules are written in ops, so the gradients of a chain
// of device ops come out on the device, equal to the CPU's within the ops' own tolerance.
TEST_F(Cuda, GradientsFlowOnTheDevice) {
  const Tensor x0 = from_vector<float>(random_values(4 * 5, 61), {4, 5});
  const Tensor w0 = from_vector<float>(random_values(5, 62), {5});
  const auto loss_of = [](const Tensor& x, const Tensor& w) {
    const Tensor h = gelu(add(mul(x, w), 0.1));
    return mean(mul(where(gt(h, 0.0), h, mul(h, 0.5)), sigmoid(x)), {0, 1});
  };
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
  loss_of(x, w).backward();
  Tensor dx = x0.to("cuda").requires_grad_(), dw = w0.to("cuda").requires_grad_();
  const Tensor loss = loss_of(dx, dw);
  EXPECT_EQ(loss.device(), kCuda);
  loss.backward();
  ASSERT_TRUE(dx.grad().defined());
  EXPECT_EQ(dx.grad().device(), kCuda);
  expect_close(dx.grad(), x.grad(), 1e-5, "x's gradient");
  expect_close(dw.grad(), w.grad(), 1e-5, "w's gradient");
}

// Products on cuBLAS (F32, TF32 off at the default precision): within F32's rounding of the
// CPU's, for plain, transposed, batched and broadcast operands, vectors, and an empty sum.
TEST_F(Cuda, MatrixProductsAgreeWithTheCpus) {
  const Tensor a = from_vector<float>(random_values(2 * 3 * 7 * 5, 71), {2, 3, 7, 5});
  const Tensor b = from_vector<float>(random_values(3 * 5 * 4, 72), {3, 5, 4});
  const Tensor w = from_vector<float>(random_values(6 * 5, 73), {6, 5});
  const Tensor v = from_vector<float>(random_values(5, 74), {5});
  const Tensor da = a.to("cuda"), db = b.to("cuda"), dw = w.to("cuda"), dv = v.to("cuda");
  expect_close(matmul(da, db), matmul(a, b), 1e-5, "batched, broadcast");
  expect_close(matmul(da, dw.transpose(0, 1)), matmul(a, w.transpose(0, 1)), 1e-5, "folded, transposed");
  expect_close(matmul(dw, dv), matmul(w, v), 1e-5, "matrix-vector");
  expect_close(matmul(dv, dw.transpose(0, 1)), matmul(v, w.transpose(0, 1)), 1e-5, "vector-matrix");
  expect_close(matmul(da.transpose(-1, -2).contiguous().transpose(-1, -2), db), matmul(a, b), 1e-5,
               "a stored transposed, batched");
  expect_close(matmul(da.slice(3, 0, 5, 2), db.slice(1, 0, 5, 2)), matmul(a.slice(3, 0, 5, 2), b.slice(1, 0, 5, 2)), 1e-5,
               "stepped columns, copied");
  const Tensor bias = from_vector<float>(random_values(6, 75), {6});
  expect_close(linear(da, dw, bias.to("cuda")), linear(a, w, bias), 1e-5, "linear with a bias");
  const Tensor none = matmul(Tensor::empty(DType::F32, {3, 0}, kCuda), Tensor::empty(DType::F32, {0, 2}, kCuda));
  EXPECT_EQ(none.cpu().to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST_F(Cuda, LinearLayersTrainOnTheDevice) {
  const Tensor x0 = from_vector<float>(random_values(8 * 5, 81), {8, 5});
  const Tensor w0 = from_vector<float>(random_values(6 * 5, 82), {6, 5});
  const Tensor b0 = from_vector<float>(random_values(6, 83), {6});
  const auto loss_of = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return mean(mul(gelu(linear(x, w, b)), 0.5), {0, 1});
  };
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  loss_of(x, w, b).backward();
  Tensor dx = x0.to("cuda").requires_grad_(), dw = w0.to("cuda").requires_grad_(), db = b0.to("cuda").requires_grad_();
  loss_of(dx, dw, db).backward();
  expect_close(dx.grad(), x.grad(), 1e-5, "x's gradient");
  expect_close(dw.grad(), w.grad(), 1e-5, "weight's gradient");
  expect_close(db.grad(), b.grad(), 1e-5, "bias's gradient");
}

// max, min and argmax along a dim by torch's rule (NaN wins, first of equals), and the row
// functions composed of the device's ops: softmax, log_softmax, layer_norm and their gradients.
TEST_F(Cuda, ExtremesAndRowFunctionsAgreeWithTheCpus) {
  std::vector<float> values = random_values(4 * 300, 91);
  values[5] = values[7] = 50.0f;  // a tie: the first index
  values[300 + 9] = std::numeric_limits<float>::quiet_NaN();
  const Tensor t = from_vector<float>(values, {4, 300}), dt = t.to("cuda");
  for (const int dim : {0, 1}) {
    const auto [v, i] = max(dt, dim, true);
    const auto [cv, ci] = max(t, dim, true);
    expect_equal_bits(v, cv, "max values");
    EXPECT_EQ(i.cpu().to_vector<std::int64_t>(), ci.to_vector<std::int64_t>()) << dim;
    expect_equal_bits(min(dt, dim).first, min(t, dim).first, "min values");
    EXPECT_EQ(argmax(dt, dim).cpu().to_vector<std::int64_t>(), argmax(t, dim).to_vector<std::int64_t>()) << dim;
  }
  const Tensor x0 = from_vector<float>(random_values(6 * 40, 92), {6, 40});
  const Tensor w0 = from_vector<float>(random_values(40, 93), {40});
  const Tensor b0 = from_vector<float>(random_values(40, 94), {40});
  const auto loss_of = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    const Tensor h = layer_norm(x, {40}, w, b, 1e-5);
    return add(mean(mul(softmax(h, -1), h), {0, 1}), mean(log_softmax(h, 0), {0, 1}));
  };
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  const Tensor loss = loss_of(x, w, b);
  loss.backward();
  Tensor dx = x0.to("cuda").requires_grad_(), dw = w0.to("cuda").requires_grad_(), db = b0.to("cuda").requires_grad_();
  const Tensor dloss = loss_of(dx, dw, db);
  dloss.backward();
  expect_close(dloss, loss, 1e-5, "loss");
  expect_close(dx.grad(), x.grad(), 1e-5, "x's gradient");
  expect_close(dw.grad(), w.grad(), 1e-5, "weight's gradient");
  expect_close(db.grad(), b.grad(), 1e-5, "bias's gradient");
}

// The optimizers update parameters on their device with the CPU's per-element rule
// (kernels/optim_arith.hpp): three steps of a small regression, the CPU's parameters beside the
// device's.
TEST_F(Cuda, OptimizersStepOnTheDevice) {
  const Tensor x = from_vector<float>(random_values(16 * 4, 101), {16, 4});
  const Tensor y = from_vector<float>(random_values(16 * 3, 102), {16, 3});
  const Tensor w0 = from_vector<float>(random_values(3 * 4, 103), {3, 4});
  const auto run = [&](Device device, auto make_optimizer) {
    Tensor w = w0.to(device).requires_grad_();
    auto optimizer = make_optimizer(std::vector<Tensor>{w});
    const Tensor xd = x.to(device), yd = y.to(device);
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      const Tensor error = sub(linear(xd, w), yd);
      mean(mul(error, error), {0, 1}).backward();
      optimizer.step();
    }
    return w.detach().cpu();
  };
  const auto sgd = [](std::vector<Tensor> params) {
    return optim::SGD(std::move(params), {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  };
  const auto adam = [](std::vector<Tensor> params) { return optim::Adam(std::move(params), {.lr = 0.05, .weight_decay = 0.1}); };
  const auto adamw = [](std::vector<Tensor> params) { return optim::AdamW(std::move(params), {.lr = 0.05}); };
  expect_close(run(kCuda, sgd).to("cuda"), run(Device::cpu(), sgd), 1e-6, "SGD, Nesterov momentum");
  expect_close(run(kCuda, adam).to("cuda"), run(Device::cpu(), adam), 1e-6, "Adam, L2");
  expect_close(run(kCuda, adamw).to("cuda"), run(Device::cpu(), adamw), 1e-6, "AdamW");
}
