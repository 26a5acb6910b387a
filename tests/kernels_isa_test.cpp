// The run-time-dispatched kernels (gemm.hpp, kernel_table.hpp) on every instruction set
// against the plain references, on ragged sizes around every vector and panel width (8, 16) and every
// register block (6 rows, 4 panels), with 1 and several threads.
#include <cxxabi.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kael/core/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/exp.hpp"
#include "kernels/norm.hpp"
#include "kernels/sum.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;

namespace {

using test_util::max_error;
using test_util::random_vector;

std::vector<float> packed(const std::vector<float>& w, std::int64_t K, std::int64_t N) {
  std::vector<float> p(w.size());
  pack_panels(p.data(), w.data(), K, N);
  return p;
}

const std::int64_t kRagged[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 100};

using IsaKernels = test_util::OnEveryIsa;

// The function symbols of this executable, from its ELF .symtab (local ones included, which the
// dynamic symbol table lacks), to name the code a table entry points to. Release builds keep
// .symtab; under qemu-aarch64, /proc/self/exe is the emulated program.
class FunctionSymbols {
 public:
  FunctionSymbols() {
    std::ifstream file("/proc/self/exe", std::ios::binary);
    const std::string image((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (image.size() < sizeof(Elf64_Ehdr)) return;
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(image.data());
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(image.data() + header->e_shoff);
    for (int i = 0; i < header->e_shnum; ++i) {
      if (sections[i].sh_type != SHT_SYMTAB) continue;
      const char* names = image.data() + sections[sections[i].sh_link].sh_offset;
      const auto* symbols = reinterpret_cast<const Elf64_Sym*>(image.data() + sections[i].sh_offset);
      for (std::size_t j = 0; j < sections[i].sh_size / sizeof(Elf64_Sym); ++j)
        if (ELF64_ST_TYPE(symbols[j].st_info) == STT_FUNC && symbols[j].st_size > 0)
          by_address_[symbols[j].st_value] = {symbols[j].st_size, names + symbols[j].st_name};
    }
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* base) {
          *static_cast<std::uintptr_t*>(base) = info->dlpi_addr;  // the first object: the program
          return 1;
        },
        &load_base_);
  }
  bool empty() const { return by_address_.empty(); }
  // The demangled name of the function holding `code`, or "" where none does.
  std::string name_of(const void* code) const {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(code) - load_base_;
    auto it = by_address_.upper_bound(address);
    if (it == by_address_.begin()) return "";
    --it;
    if (address >= it->first + it->second.first) return "";
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> name(
        abi::__cxa_demangle(it->second.second.c_str(), nullptr, nullptr, &status), &std::free);
    return status == 0 ? name.get() : it->second.second;
  }

 private:
  std::map<std::uintptr_t, std::pair<std::uint64_t, std::string>> by_address_;  // start -> (size, name)
  std::uintptr_t load_base_ = 0;
};

// Each function-pointer entry of a table, by name.
template <class F>
void for_each_entry(const KernelTable& t, F visit) {
#define KAEL_ENTRY(name) visit(#name, reinterpret_cast<const void*>(t.name))
  KAEL_ENTRY(gemm_panels); KAEL_ENTRY(gemm_panels_at); KAEL_ENTRY(gemm_nt); KAEL_ENTRY(dequantize_f16_panel);
  KAEL_ENTRY(f16_gemm); KAEL_ENTRY(quantize_rows); KAEL_ENTRY(int8_gemm); KAEL_ENTRY(attend_head);
  KAEL_ENTRY(attend_row); KAEL_ENTRY(transpose_panel); KAEL_ENTRY(gelu_erf); KAEL_ENTRY(gelu_erf_backward);
  KAEL_ENTRY(softmax); KAEL_ENTRY(gelu_new); KAEL_ENTRY(exp); KAEL_ENTRY(sigmoid); KAEL_ENTRY(tanh);
  KAEL_ENTRY(sum); KAEL_ENTRY(layer_norm_row); KAEL_ENTRY(gelu_backward); KAEL_ENTRY(adamw_update);
  KAEL_ENTRY(sum_of_squares); KAEL_ENTRY(bf16_pack_rows); KAEL_ENTRY(bf16_pack_panels);
  KAEL_ENTRY(bf16_pack_panels_sums); KAEL_ENTRY(bf16_pack_both); KAEL_ENTRY(gemm_bf16);
  KAEL_ENTRY(int8c_quantize_rows); KAEL_ENTRY(int8c_gemv); KAEL_ENTRY(int8c_tile_gemm);
#undef KAEL_ENTRY
}

}  // namespace

TEST(CpuFeatures, NamesAndPhysicalCores) {
  EXPECT_STREQ(isa_name(Isa::scalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::avx512), "avx512");
  EXPECT_STREQ(isa_name(Isa::amx), "amx");
  EXPECT_STREQ(isa_name(Isa::neon), "neon");
  EXPECT_GE(physical_cores(), 1);
  EXPECT_NO_THROW(set_isa(Isa::scalar));
  EXPECT_EQ(active_isa(), Isa::scalar);
  EXPECT_EQ(active_kernels().isa, Isa::scalar);
  set_isa(detected_isa());
}

TEST(CpuFeatures, EachSetNeedsItsBaseAndUnsupportedSetsAreRefused) {
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_EQ(base_isa(Isa::avx512), Isa::avx2);
  EXPECT_EQ(base_isa(Isa::neon), Isa::scalar);
  for (Isa isa : kAllIsas) {
    std::string why;
    const bool ok = isa_supported(isa, &why);
    if (!isa_supported(base_isa(isa))) {
      EXPECT_FALSE(ok) << isa_name(isa);
    }
    if (ok) {
      EXPECT_TRUE(why.empty());
      EXPECT_EQ(kernels_for(isa).isa, isa);
      EXPECT_LE(isa, detected_isa());
    } else {
      EXPECT_FALSE(why.empty()) << isa_name(isa);
      EXPECT_THROW(set_isa(isa), kael::ValueError) << isa_name(isa);
      EXPECT_THROW(kernels_for(isa), kael::ValueError) << isa_name(isa);
    }
  }
  EXPECT_TRUE(isa_supported(detected_isa()));
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) {
    EXPECT_TRUE(f.avx2) << "AVX-512 without AVX2";
  }
  // One family per build: an x86 build never offers neon, an ARM64 one always does.
#if defined(__aarch64__)
  EXPECT_TRUE(isa_supported(Isa::neon));
  EXPECT_EQ(detected_isa(), Isa::neon);
  EXPECT_FALSE(isa_supported(Isa::avx2));
#else
  EXPECT_FALSE(isa_supported(Isa::neon));
#endif
}

TEST(CpuFeatures, EveryTableIsComplete) {
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const KernelTable& t = kernels_for(isa);
    EXPECT_NE(t.gemm_panels, nullptr);
    EXPECT_NE(t.gemm_nt, nullptr);
    EXPECT_NE(t.dequantize_f16_panel, nullptr);
    EXPECT_NE(t.quantize_rows, nullptr);
    EXPECT_NE(t.int8_gemm, nullptr);
    EXPECT_NE(t.softmax, nullptr);
    EXPECT_NE(t.gelu_new, nullptr);
    EXPECT_NE(t.layer_norm_row, nullptr);
    EXPECT_NE(t.exp, nullptr);
    EXPECT_NE(t.sigmoid, nullptr);
    EXPECT_NE(t.tanh, nullptr);
    EXPECT_NE(t.sum, nullptr);
    EXPECT_NE(t.int8_dot, nullptr);
    EXPECT_EQ(t.attend_row == nullptr, t.attend_head == nullptr) << isa_name(isa);  // decode rows take it
  }
}

// A kernel family is one template compiled once per target (kernels/family/): each target's copy
// must have a name of its own, or the linker keeps one copy for every caller and an AVX2 CPU
// could run AVX-512 code. So every entry a set puts in its table (one that differs from its base
// set's) must name that set's target: its own namespace, or its traits type as a template
// argument. (The avx512 set's BF16 product still lives under amx/, though it is AVX-512 code.)
TEST(CpuFeatures, EachSetsEntriesAreItsOwnTargetsCode) {
  const FunctionSymbols symbols;
  ASSERT_FALSE(symbols.empty()) << "no .symtab in /proc/self/exe";
  const std::map<Isa, std::vector<std::string>> own = {
      {Isa::avx2, {"kael::kernels::avx2::"}},
      {Isa::avx512, {"kael::kernels::avx512::"}},
      {Isa::amx, {"kael::kernels::amx::"}},
      {Isa::neon, {"kael::kernels::neon::"}}};
  int checked = 0;
  for (const auto& [isa, targets] : own) {
    if (!isa_supported(isa)) continue;
    const KernelTable& table = kernels_for(isa);
    std::map<std::string, const void*> base;
    for_each_entry(kernels_for(base_isa(isa)), [&](const char* name, const void* fn) { base[name] = fn; });
    for_each_entry(table, [&](const char* name, const void* fn) {
      if (fn == nullptr || fn == base[name]) return;
      const std::string symbol = symbols.name_of(fn);
      const bool ours = std::any_of(targets.begin(), targets.end(),
                                    [&](const std::string& t) { return symbol.find(t) != std::string::npos; });
      EXPECT_TRUE(ours) << isa_name(isa) << "." << name << " is " << (symbol.empty() ? "no known function" : symbol);
      ++checked;
    });
  }
  EXPECT_GT(checked, 0);
}

TEST(PackPanels, LayoutIsPanelsOfSixteenColumns) {
  const std::int64_t K = 3, N = 20;  // one full panel, one of width 4
  std::vector<float> w(K * N);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  const auto p = packed(w, K, N);
  EXPECT_EQ(p[0], w[0]);               // panel 0, k 0, column 0
  EXPECT_EQ(p[16], w[1 * N + 0]);      // panel 0, k 1
  EXPECT_EQ(p[16 * K], w[16]);         // panel 1 starts at 16 K: k 0, column 16
  EXPECT_EQ(p[16 * K + 4], w[N + 16]);  // panel 1 rows are 4 wide
  EXPECT_EQ(p.back(), w.back());
}

TEST(PackPanels, TransposedInPlaceAndColumns) {
  // The output head: src (N, K) packed as src^T (K, N), in place; column n gives row n back.
  for (std::int64_t N : {1, 15, 16, 17, 50}) {
    const std::int64_t K = 7;
    const auto src = random_vector(N * K, 30);
    std::vector<float> t(static_cast<std::size_t>(K * N));  // src^T, row-major (K, N)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < K; ++k) t[k * N + n] = src[n * K + k];
    auto in_place = src;
    pack_panels_transposed(in_place.data(), in_place.data(), K, N);
    ASSERT_EQ(in_place, packed(t, K, N)) << "N=" << N;
  }
}

TEST_P(IsaKernels, LinearPackedMatchesReference) {
  for (std::int64_t T : {1, 2, 3, 5, 6, 7, 13, 16})
    for (std::int64_t K : {1, 7, 64, 100})
      for (std::int64_t N : {1, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 100})
        for (Epilogue epilogue : {Epilogue::store, Epilogue::gelu, Epilogue::residual}) {
          const bool with_bias = (T + N) % 2 == 0;
          auto inp = random_vector(T * K, 1), w = random_vector(K * N, 2, 0.3f), b = random_vector(N, 3);
          const auto p = packed(w, K, N);
          std::vector<float> fast = random_vector(T * N, 4), slow = fast;  // residual adds to these
          linear_packed(fast.data(), inp.data(), p.data(), with_bias ? b.data() : nullptr, T, K, N, epilogue);
          ref::linear_packed(slow.data(), inp.data(), p.data(), with_bias ? b.data() : nullptr, T, K, N, epilogue);
          ASSERT_LT(max_error(fast, slow), 1e-5)
              << "T=" << T << " K=" << K << " N=" << N << " epilogue=" << static_cast<int>(epilogue);
        }
}

TEST_P(IsaKernels, LinearPackedGpt2Shapes) {
  // The shapes of GPT-2 small's layers, at decode (1), batched decode (16) and a prefill chunk.
  for (auto [K, N] : {std::pair<std::int64_t, std::int64_t>{768, 2304}, {3072, 768}})
    for (std::int64_t T : {1, 16, 70}) {
      auto inp = random_vector(T * K, 5), w = random_vector(K * N, 6, 0.05f), b = random_vector(N, 7);
      const auto p = packed(w, K, N);
      std::vector<float> fast(T * N), slow(T * N);
      linear_packed(fast.data(), inp.data(), p.data(), b.data(), T, K, N);
      ref::linear_packed(slow.data(), inp.data(), p.data(), b.data(), T, K, N);
      // One float chain over K products: the rounding error grows with K (3072 here).
      ASSERT_LT(max_error(fast, slow), 4e-5) << "T=" << T << " K=" << K << " N=" << N;
    }
}

TEST_P(IsaKernels, LinearPackedRowsDoNotDependOnBatch) {
  // Prefill (many rows), batched decode and decode (one row) must give bitwise equal rows.
  const std::int64_t T = 13, K = 50, N = 130;
  auto inp = random_vector(T * K, 8), w = random_vector(K * N, 9), b = random_vector(N, 10);
  const auto p = packed(w, K, N);
  std::vector<float> all(T * N), one(N);
  linear_packed(all.data(), inp.data(), p.data(), b.data(), T, K, N, Epilogue::gelu);
  for (std::int64_t t = 0; t < T; ++t) {
    linear_packed(one.data(), inp.data() + t * K, p.data(), b.data(), 1, K, N, Epilogue::gelu);
    ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + t * N)) << "row " << t;
  }
}

TEST(X86Kernels, Avx512F32GemmEqualsAvx2BitForBit) {
  // Both run each output as one FMA chain over k in order, then the same vector epilogue.
  std::string why;
  if (!isa_supported(Isa::avx512, &why)) GTEST_SKIP() << "avx512 not run: " << why;
  const KernelTable &a = kernels_for(Isa::avx2), &b = kernels_for(Isa::avx512);
  // AVX-512 runs K above 256 in k-blocks (and rows in blocks sized by K and the L2): K = 300
  // and 3000 cross block edges, M = 250 at K = 3000 spans two or more row blocks (1.5 MiB each
  // with a 2 MiB L2); N = 200 (12 full panels) copies them into row tiles of even heights (13
  // rows: 7 + 6; 16: 8 + 8), the narrower N read them in place.
  struct Shape {
    std::int64_t M, K;
  };
  std::vector<Shape> shapes;
  for (std::int64_t M : {1, 2, 3, 12, 13, 16, 25, 40})
    for (std::int64_t K : {1, 17, 300}) shapes.push_back({M, K});
  shapes.push_back({250, 3000});
  for (const auto [M, K] : shapes)
    for (std::int64_t N : {5, 16, 33, 100, 200})
      for (Epilogue epilogue : {Epilogue::store, Epilogue::gelu, Epilogue::residual}) {
        const auto inp = random_vector(M * K, 51), w = random_vector(K * N, 52), bias = random_vector(N, 53);
        const auto p = packed(w, K, N);
        auto x = random_vector(M * N, 54), y = x;
        a.gemm_panels(x.data(), N, inp.data(), K, p.data(), kPanel, kPanel * K, true, M, N, K, bias.data(), epilogue);
        b.gemm_panels(y.data(), N, inp.data(), K, p.data(), kPanel, kPanel * K, true, M, N, K, bias.data(), epilogue);
        ASSERT_EQ(x, y) << "M=" << M << " K=" << K << " N=" << N << " epilogue=" << static_cast<int>(epilogue);
      }
}

TEST_P(IsaKernels, GemmNtMatchesReference) {
  for (std::int64_t M : {1, 2, 3, 4, 7})
    for (std::int64_t N : kRagged)
      for (std::int64_t K : {1, 7, 8, 9, 64, 100}) {
        const std::int64_t lda = K + 2, ldb = K + 5, ldo = N + 1;  // padded rows
        auto a = random_vector(M * lda, 11), b = random_vector(N * ldb, 12);
        std::vector<float> fast(M * ldo, 0.0f), slow(M * ldo, 0.0f);
        gemm_nt(fast.data(), ldo, a.data(), lda, b.data(), ldb, M, N, K, 0.125f);
        ref::gemm_nt(slow.data(), ldo, a.data(), lda, b.data(), ldb, M, N, K, 0.125f);
        ASSERT_LT(max_error(fast, slow), 1e-5) << "M=" << M << " N=" << N << " K=" << K;
      }
}

TEST_P(IsaKernels, GemmNnMatchesReference) {
  for (std::int64_t M : {1, 2, 3, 6, 7, 13})
    for (std::int64_t N : kRagged)
      for (std::int64_t K : {1, 5, 64, 100}) {
        const std::int64_t lda = K + 3, ldb = N + 7, ldo = N + 2;
        auto a = random_vector(M * lda, 13), b = random_vector(K * ldb, 14);
        std::vector<float> fast(M * ldo, 0.0f), slow(M * ldo, 0.0f);
        gemm_nn(fast.data(), ldo, a.data(), lda, b.data(), ldb, M, N, K);
        ref::gemm_nn(slow.data(), ldo, a.data(), lda, b.data(), ldb, M, N, K);
        ASSERT_LT(max_error(fast, slow), 1e-5) << "M=" << M << " N=" << N << " K=" << K;
      }
}

TEST_P(IsaKernels, GemmTnMatchesReferenceAndItsCopyBitForBit) {
  // a read as its transpose (in place where the set has gemm_panels_at, a partial last panel
  // included): the bits of gemm_nn on the transposed copy, added to c with `accumulate`.
  for (bool accumulate : {false, true})
    for (std::int64_t M : {1, 2, 3, 7, 13, 70})
      for (std::int64_t N : {1, 9, 16, 17, 32, 64})
        for (std::int64_t K : {1, 5, 64, 300}) {
          const std::int64_t lda = M + 3, ldb = N + 5, ldc = N + 2;
          const auto a = random_vector(K * lda, 61), b = random_vector(K * ldb, 62);
          std::vector<float> rows(M * K);  // op(a) (M, K)
          for (std::int64_t k = 0; k < K; ++k)
            for (std::int64_t i = 0; i < M; ++i) rows[i * K + k] = a[k * lda + i];
          const auto before = random_vector(M * ldc, 63);
          std::vector<float> fast = before, slow = before, copy(M * ldc, 0.0f);
          gemm_tn(fast.data(), ldc, a.data(), lda, b.data(), ldb, M, N, K, accumulate);
          ref::gemm_tn(slow.data(), ldc, a.data(), lda, b.data(), ldb, M, N, K, accumulate);
          gemm_nn(copy.data(), ldc, rows.data(), K, b.data(), ldb, M, N, K);
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) {
              const float want = accumulate ? before[i * ldc + j] + copy[i * ldc + j] : copy[i * ldc + j];
              ASSERT_EQ(fast[i * ldc + j], want) << "M=" << M << " N=" << N << " K=" << K << " accumulate=" << accumulate;
            }
          ASSERT_LT(max_error(fast, slow), 1e-4) << "M=" << M << " N=" << N << " K=" << K;
        }
}

TEST_P(IsaKernels, GeneralGemmMatchesReferenceWithEveryTranspose) {
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (bool accumulate : {false, true})
        for (std::int64_t M : {1, 2, 7, 33, 70})
          for (std::int64_t N : {1, 9, 16, 17, 50})
            for (std::int64_t K : {1, 8, 31}) {
              // Leading dimensions wider than the matrices, as views into larger buffers.
              const std::int64_t lda = (trans_a ? M : K) + 3, ldb = (trans_b ? K : N) + 2, ldc = N + 1;
              const auto a = random_vector((trans_a ? K : M) * lda, 41), b = random_vector((trans_b ? N : K) * ldb, 42);
              std::vector<float> fast = random_vector(M * ldc, 43), slow = fast;
              gemm(fast.data(), ldc, a.data(), lda, trans_a, b.data(), ldb, trans_b, M, N, K, accumulate);
              ref::gemm(slow.data(), ldc, a.data(), lda, trans_a, b.data(), ldb, trans_b, M, N, K, accumulate);
              ASSERT_LT(max_error(fast, slow), 1e-5) << "trans_a=" << trans_a << " trans_b=" << trans_b
                                                     << " accumulate=" << accumulate << " M=" << M << " N=" << N
                                                     << " K=" << K;
            }
}

// The exact GELU (torch's default form) and its derivative against erfc in double, on every set
// and ragged lengths across the 256-element blocks; the far negative tail keeps a relative
// accuracy of 2% (1 - erf from the approximation's own tail, where 1 + erf in float would be 0).
TEST_P(IsaKernels, GeluErfRowsMatchReference) {
  for (std::int64_t n : {1, 7, 16, 17, 255, 256, 257, 1000}) {
    const auto inp = random_vector(n, 21, 6.0f), dout = random_vector(n, 22, 1.0f);
    std::vector<float> fast(n), slow(n);
    gelu_erf_rows(fast.data(), inp.data(), n);
    ref::gelu_erf(slow.data(), inp.data(), n);
    ASSERT_LT(max_error(fast, slow), 1e-6) << "gelu n=" << n;
    gelu_erf_backward_rows(fast.data(), inp.data(), dout.data(), n);
    ref::gelu_erf_backward(slow.data(), inp.data(), dout.data(), n);
    ASSERT_LT(max_error(fast, slow), 2e-6) << "gelu backward n=" << n;
  }
  const std::vector<float> x = {-9.0f, -6.0f, 0.0f, -0.0f, 3.0f, 40.0f, NAN};
  std::vector<float> fast(x.size()), slow(x.size());
  gelu_erf_rows(fast.data(), x.data(), static_cast<std::int64_t>(x.size()));
  ref::gelu_erf(slow.data(), x.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(fast[i] / slow[i], 1.0f, 0.02f) << x[i];
  EXPECT_EQ(fast[2], 0.0f);
  EXPECT_EQ(fast[5], 40.0f);
  EXPECT_TRUE(std::isnan(fast[6]));
}

TEST_P(IsaKernels, TransposePanelIsTheTransposeOfRaggedRows) {
  // Every panel width (a weight's last rows) against K ragged to the 4x4 blocks.
  const KernelTable& kt = active_kernels();
  if (kt.transpose_panel == nullptr) GTEST_SKIP() << isa_name(isa()) << " packs element by element";
  for (std::int64_t w = 1; w <= kPanel; ++w)
    for (std::int64_t K : {1, 3, 4, 7, 64, 130}) {
      const std::int64_t ld = K + 5;
      const auto src = random_vector(w * ld, 71);
      std::vector<float> panel(static_cast<std::size_t>(K * w), -1.0f);
      kt.transpose_panel(panel.data(), src.data(), ld, K, w);
      for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t r = 0; r < w; ++r)
          ASSERT_EQ(panel[k * w + r], src[r * ld + k]) << "w=" << w << " K=" << K << " at " << k << "," << r;
    }
}

TEST_P(IsaKernels, GeneralGemmBiasHasTheBitsOfAPassAfter) {
  // Every path of kernels::gemm with a bias (one row against a transposed B, rows split, columns
  // split, a transposed A read in place, an empty sum): the bits of the product without it,
  // then the bias added to each output (to c after the sum with `accumulate`).
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (bool accumulate : {false, true})
        for (std::int64_t M : {1, 3, 40, 70})
          for (std::int64_t N : {9, 16, 50, 200})
            for (std::int64_t K : {0, 31, 300}) {
              const std::int64_t lda = (trans_a ? M : K) + 3, ldb = (trans_b ? K : N) + 2, ldc = N + 1;
              const auto a = random_vector((trans_a ? K : M) * lda, 51), b = random_vector((trans_b ? N : K) * ldb, 52);
              const auto bias = random_vector(N, 53);
              const auto before = random_vector(M * ldc, 54);
              std::vector<float> with = before, without(M * ldc, 0.0f), slow = before;
              gemm(with.data(), ldc, a.data(), lda, trans_a, b.data(), ldb, trans_b, M, N, K, accumulate, bias.data());
              gemm(without.data(), ldc, a.data(), lda, trans_a, b.data(), ldb, trans_b, M, N, K);
              ref::gemm(slow.data(), ldc, a.data(), lda, trans_a, b.data(), ldb, trans_b, M, N, K, accumulate,
                        bias.data());
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < N; ++j) {
                  const float sum = without[i * ldc + j] + bias[j];
                  ASSERT_EQ(with[i * ldc + j], accumulate ? before[i * ldc + j] + sum : sum)
                      << "trans_a=" << trans_a << " trans_b=" << trans_b << " accumulate=" << accumulate
                      << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
                }
              ASSERT_LT(max_error(with, slow), 1e-4) << "M=" << M << " N=" << N << " K=" << K;
            }
}

TEST_P(IsaKernels, GeneralGemmTransposedAMatchesItsCopyBitForBit) {
  // dW = X^T dY: where the table reads a transposed A in place (gemm_panels_at), the same bits as
  // the product of the transposed copy; ragged row tiles (12 rows), K over the 256-long k-blocks,
  // an odd panel count, and (M = 400, K = 1100) more rows than one row block's share of L2; a
  // partial last panel read in place (M = 7) and packed (the rest), as an LSTM decoder's
  // (10000, 200) dW has.
  struct Shape {
    std::int64_t M, N, K;
  };
  for (const Shape s : {Shape{7, 16, 31}, Shape{70, 160, 300}, Shape{35, 48, 257}, Shape{400, 80, 1100},
                        Shape{7, 23, 31}, Shape{70, 200, 300}, Shape{35, 41, 257}, Shape{400, 87, 1100}})
    for (bool accumulate : {false, true}) {
      const std::int64_t lda = s.M + 5, ldc = s.N + 3;
      const auto a = random_vector(s.K * lda, 46), b = random_vector(s.K * s.N, 47);
      std::vector<float> rows(s.M * s.K);  // op(a) (M, K)
      for (std::int64_t k = 0; k < s.K; ++k)
        for (std::int64_t i = 0; i < s.M; ++i) rows[i * s.K + k] = a[k * lda + i];
      std::vector<float> fast = random_vector(s.M * ldc, 48), copy = fast, slow = fast;
      gemm(fast.data(), ldc, a.data(), lda, true, b.data(), s.N, false, s.M, s.N, s.K, accumulate);
      gemm(copy.data(), ldc, rows.data(), s.K, false, b.data(), s.N, false, s.M, s.N, s.K, accumulate);
      ref::gemm(slow.data(), ldc, a.data(), lda, true, b.data(), s.N, false, s.M, s.N, s.K, accumulate);
      ASSERT_TRUE(fast == copy) << "M=" << s.M << " N=" << s.N << " K=" << s.K << " accumulate=" << accumulate;
      ASSERT_LT(max_error(fast, slow), 1e-4) << "M=" << s.M << " N=" << s.N << " K=" << s.K;
    }
}

TEST_P(IsaKernels, GeneralGemmRowsDoNotDependOnTheSplit) {
  // Wide (threads split columns) and narrow (threads split rows) give each row the same bits
  // as computing it alone.
  for (std::int64_t N : {8, 300}) {
    const std::int64_t M = 100, K = 40;
    const auto a = random_vector(M * K, 44), b = random_vector(K * N, 45);
    std::vector<float> all(M * N), one(N);
    gemm(all.data(), N, a.data(), K, false, b.data(), N, false, M, N, K);
    for (std::int64_t i = 0; i < M; i += 7) {
      gemm(one.data(), N, a.data() + i * K, K, false, b.data(), N, false, 1, N, K);
      ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + i * N)) << "N=" << N << " row " << i;
    }
  }
}

TEST_P(IsaKernels, GeneralGemmReadsAFewRowsBInPlaceWithThePackedBits) {
  // Up to 32 rows against a B of narrow rows (ldb <= 512) read B's panels in place; more rows
  // pack B first. Each row has the same bits either way: rows of a 20-row product equal those of
  // a 45-row one. Ragged N around the panel, K past the 256-long k-blocks, ldb wider than N.
  for (std::int64_t N : {9, 17, 200, 500})
    for (std::int64_t K : {31, 300})
      for (bool accumulate : {false, true}) {
        const std::int64_t few = 20, many = 45, ldb = N + 3;
        const auto a = random_vector(many * K, 70), b = random_vector(K * ldb, 71);
        const auto start = random_vector(many * N, 72);
        std::vector<float> packed = start, in_place(start.begin(), start.begin() + few * N), slow = start;
        gemm(packed.data(), N, a.data(), K, false, b.data(), ldb, false, many, N, K, accumulate);
        gemm(in_place.data(), N, a.data(), K, false, b.data(), ldb, false, few, N, K, accumulate);
        ref::gemm(slow.data(), N, a.data(), K, false, b.data(), ldb, false, many, N, K, accumulate);
        ASSERT_TRUE(std::equal(in_place.begin(), in_place.end(), packed.begin()))
            << "N=" << N << " K=" << K << " accumulate=" << accumulate;
        ASSERT_LT(max_error(packed, slow), 1e-4) << "N=" << N << " K=" << K;
      }
}

TEST_P(IsaKernels, GemvOfATorchLayoutWeightHasTheBitsOfTheBatchRow) {
  // One row against a transposed B (a batch-1 linear on an (out, in) weight) runs the table's
  // GEMV on B in place; a row of a 5-row product packs B. Ragged N around the panel and the
  // 4-panel group, K around the 4-wide transposition and the 256-long k-blocks.
  for (std::int64_t N : {1, 5, 16, 17, 63, 64, 65, 130})
    for (std::int64_t K : {1, 3, 4, 63, 255, 256, 257, 600})
      for (bool accumulate : {false, true}) {
        const std::int64_t M = 5, lda = K + 1, ldb = K + 3, ldc = N + 2;
        const auto a = random_vector(M * lda, 60), b = random_vector(N * ldb, 61);
        const auto start = random_vector(M * ldc, 62);
        std::vector<float> all = start, slow = start;
        gemm(all.data(), ldc, a.data(), lda, false, b.data(), ldb, true, M, N, K, accumulate);
        ref::gemm(slow.data(), ldc, a.data(), lda, false, b.data(), ldb, true, M, N, K, accumulate);
        ASSERT_LT(max_error(all, slow), 1e-4) << "N=" << N << " K=" << K;
        for (std::int64_t i = 0; i < M; i += 2) {
          std::vector<float> one(start.begin() + i * ldc, start.begin() + i * ldc + N);
          gemm(one.data(), N, a.data() + i * lda, lda, false, b.data(), ldb, true, 1, N, K, accumulate);
          ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + i * ldc))
              << "N=" << N << " K=" << K << " accumulate=" << accumulate << " row " << i;
        }
      }
}

TEST_P(IsaKernels, GemvWithBiasEqualsTheReference) {
  const KernelTable& kt = active_kernels();
  ASSERT_NE(kt.gemv_rows, nullptr);
  for (std::int64_t N : {7, 48, 81})
    for (std::int64_t K : {5, 70}) {
      const auto x = random_vector(K, 63), w = random_vector(N * K, 64), bias = random_vector(N, 65);
      std::vector<float> fast(N), slow(N);
      kt.gemv_rows(fast.data(), x.data(), w.data(), K, N, K, bias.data(), Epilogue::store);
      ref::gemm(slow.data(), N, x.data(), K, false, w.data(), K, true, 1, N, K);
      for (std::int64_t j = 0; j < N; ++j) slow[j] += bias[j];
      ASSERT_LT(max_error(fast, slow), 1e-5) << "N=" << N << " K=" << K;
    }
}

TEST_P(IsaKernels, GemmPackedMatchesReference) {
  for (std::int64_t M : {1, 2, 3, 7})
    for (std::int64_t N : kRagged)
      for (std::int64_t K : {1, 9, 64}) {
        const std::int64_t lda = K + 1, ldo = N + 3;
        auto a = random_vector(M * lda, 31), b = random_vector(K * N, 32);
        const auto p = packed(b, K, N);
        std::vector<float> fast(M * ldo, 0.0f), slow(M * ldo, 0.0f);
        gemm_packed(fast.data(), ldo, a.data(), lda, p.data(), M, N, K);
        ref::gemm_nn(slow.data(), ldo, a.data(), lda, b.data(), N, M, N, K);
        ASSERT_LT(max_error(fast, slow), 1e-5) << "M=" << M << " N=" << N << " K=" << K;
      }
}

TEST_P(IsaKernels, AttentionMatchesReferenceOnRaggedSizes) {
  for (std::int64_t head_dim : {1, 7, 16, 17, 64})
    for (std::int64_t pos0 : {0, 3, 16, 40})
      for (std::int64_t T : {1, 6, 17, 100}) {  // 100: three causal chunks of query rows, the last ragged
        const std::int64_t n_head = 3, C = n_head * head_dim, q_stride = 3 * C, kv_stride = C + 5;
        auto q = random_vector(T * q_stride, 33), k = random_vector((pos0 + T) * kv_stride, 34, 2.0f);
        auto v = random_vector((pos0 + T) * kv_stride, 35);
        std::vector<float> scratch(attention_scratch_size(T, pos0, n_head)), fast(T * C), slow(T * C);
        causal_attention(fast.data(), scratch.data(), q.data(), k.data(), v.data(), T, pos0, n_head, head_dim,
                         q_stride, kv_stride);
        ref::causal_attention(slow.data(), scratch.data(), q.data(), k.data(), v.data(), T, pos0, n_head, head_dim,
                              q_stride, kv_stride);
        ASSERT_LT(max_error(fast, slow), 1e-5) << "head_dim=" << head_dim << " pos0=" << pos0 << " T=" << T;
        // The same positions in the cache layout (kv_store) give the same results bit for bit,
        // and each row equals a decode step at its position, through both cached entry points.
        const std::int64_t positions = pos0 + T, capacity = kv_capacity(positions);
        std::vector<float> k_layer(kv_layer_floats(n_head, head_dim, positions), NAN), v_layer = k_layer;
        for (std::int64_t s = 0; s < positions; ++s)
          kv_store(k_layer.data(), v_layer.data(), k.data() + s * kv_stride, v.data() + s * kv_stride, s, n_head,
                   head_dim, capacity);
        std::vector<float> cached(T * C);
        cached_attention(cached.data(), scratch.data(), q.data(), q_stride, k_layer.data(), v_layer.data(), T, pos0,
                         n_head, head_dim, capacity);
        ASSERT_EQ(cached, fast);
        for (std::int64_t t = 0; t < T; ++t) {
          std::vector<float> one(C);
          cached_attention(one.data(), scratch.data(), q.data() + t * q_stride, q_stride, k_layer.data(),
                           v_layer.data(), 1, pos0 + t, n_head, head_dim, capacity);
          ASSERT_TRUE(std::equal(one.begin(), one.end(), fast.begin() + t * C)) << "row " << t;
        }
      }
}

// The same positions in blocks (kv_store_paged and _rows, in shuffled memory) give what the contiguous
// cache gives, bit for bit, for lengths within one block, at a boundary and past several,
// through paged_attention (a chunk of rows) and paged_attention_rows (a batch of decode rows).
TEST_P(IsaKernels, PagedAttentionEqualsContiguousAcrossBlocks) {
  for (std::int64_t block_positions : {16, 32})
    for (std::int64_t head_dim : {7, 16, 64})
      for (std::int64_t pos0 : {0, 5, 15, 31, 32, 70})
        for (std::int64_t T : {1, 2, 17, 33}) {
          const std::int64_t n_head = 3, C = n_head * head_dim, q_stride = 3 * C, positions = pos0 + T;
          auto q = random_vector(T * q_stride, 36), k = random_vector(positions * C, 37, 2.0f);
          auto v = random_vector(positions * C, 38);
          const std::int64_t capacity = kv_capacity(positions);
          std::vector<float> k_layer(kv_layer_floats(n_head, head_dim, positions), NAN), v_layer = k_layer;
          // Two layers per block, the second one's keys and values used, blocks in reverse order.
          const std::int64_t layer_floats = kv_layer_floats(n_head, head_dim, block_positions);
          const std::int64_t n_blocks = (positions + block_positions - 1) / block_positions;
          std::vector<float> memory(static_cast<std::size_t>(n_blocks * 4 * layer_floats), NAN);
          std::vector<float*> blocks;
          for (std::int64_t b = 0; b < n_blocks; ++b) blocks.push_back(memory.data() + (n_blocks - 1 - b) * 4 * layer_floats);
          const KvBlocks cache{blocks.data(), 2 * layer_floats, 3 * layer_floats, block_positions};
          // The cached positions one at a time (decode), the T new ones together (a prefill chunk).
          for (std::int64_t s = 0; s < positions; ++s) {
            kv_store(k_layer.data(), v_layer.data(), k.data() + s * C, v.data() + s * C, s, n_head, head_dim, capacity);
            if (s < pos0) kv_store_paged(cache, k.data() + s * C, v.data() + s * C, s, n_head, head_dim);
          }
          kv_store_paged_rows(cache, k.data() + pos0 * C, v.data() + pos0 * C, C, T, pos0, n_head, head_dim);
          std::vector<float> scratch(attention_scratch_size(T, pos0, n_head)), contiguous(T * C), paged(T * C);
          cached_attention(contiguous.data(), scratch.data(), q.data(), q_stride, k_layer.data(), v_layer.data(), T,
                           pos0, n_head, head_dim, capacity);
          paged_attention(paged.data(), scratch.data(), q.data(), q_stride, cache, T, pos0, n_head, head_dim);
          ASSERT_EQ(paged, contiguous) << "block " << block_positions << " head_dim=" << head_dim << " pos0=" << pos0
                                       << " T=" << T;
          {  // The T new rows stored by paged_attention itself: the same cache and the same output.
            std::vector<float> memory2(memory.size(), NAN);
            std::vector<float*> blocks2;
            for (std::int64_t b = 0; b < n_blocks; ++b)
              blocks2.push_back(memory2.data() + (n_blocks - 1 - b) * 4 * layer_floats);
            const KvBlocks cache2{blocks2.data(), 2 * layer_floats, 3 * layer_floats, block_positions};
            for (std::int64_t s = 0; s < pos0; ++s)
              kv_store_paged(cache2, k.data() + s * C, v.data() + s * C, s, n_head, head_dim);
            const NewKv rows{k.data() + pos0 * C, v.data() + pos0 * C, C};
            std::vector<float> stored(T * C);
            paged_attention(stored.data(), scratch.data(), q.data(), q_stride, cache2, T, pos0, n_head, head_dim, &rows);
            ASSERT_EQ(stored, contiguous) << "storing, block " << block_positions << " head_dim=" << head_dim
                                          << " pos0=" << pos0 << " T=" << T;
            ASSERT_EQ(0, std::memcmp(memory.data(), memory2.data(), memory.size() * sizeof(float)))
                << "the cache the attention stored differs from kv_store_paged_rows'";
          }
          // Every row at once, as a batch of decode steps of sequences of different lengths.
          std::vector<PagedRow> rows;
          std::vector<float> batched(T * C), rows_scratch(T * n_head * positions);
          for (std::int64_t t = 0; t < T; ++t)
            rows.push_back({batched.data() + t * C, q.data() + t * q_stride, cache, pos0 + t});
          paged_attention_rows(rows.data(), T, rows_scratch.data(), positions, n_head, head_dim);
          ASSERT_EQ(batched, contiguous) << "paged_attention_rows, block " << block_positions
                                         << " head_dim=" << head_dim << " pos0=" << pos0 << " T=" << T;
        }
}

// Decode rows long enough that each thread takes one head (min_heads), so threads split a row's
// heads, and in a batch a thread's run of (row, head) pairs ends inside a row: every row still
// equals the contiguous cache's, bit for bit.
TEST_P(IsaKernels, DecodeRowsSplitOverThreadsEqualTheContiguousCache) {
  const std::int64_t n_head = 5, head_dim = 64, C = n_head * head_dim, positions = 600, block_positions = 32;
  auto q = random_vector(2 * C, 39), k = random_vector(positions * C, 40, 2.0f), v = random_vector(positions * C, 41);
  const std::int64_t capacity = kv_capacity(positions), layer_floats = kv_layer_floats(n_head, head_dim, block_positions);
  std::vector<float> k_layer(kv_layer_floats(n_head, head_dim, positions), NAN), v_layer = k_layer;
  const std::int64_t n_blocks = (positions + block_positions - 1) / block_positions;
  std::vector<float> memory(static_cast<std::size_t>(n_blocks * 2 * layer_floats), NAN);
  std::vector<float*> blocks;
  for (std::int64_t b = 0; b < n_blocks; ++b) blocks.push_back(memory.data() + b * 2 * layer_floats);
  const KvBlocks cache{blocks.data(), 0, layer_floats, block_positions};
  for (std::int64_t s = 0; s < positions; ++s) {
    kv_store(k_layer.data(), v_layer.data(), k.data() + s * C, v.data() + s * C, s, n_head, head_dim, capacity);
    kv_store_paged(cache, k.data() + s * C, v.data() + s * C, s, n_head, head_dim);
  }
  const std::int64_t pos[2] = {positions - 1, 544};  // the second row ends inside a block
  std::vector<float> scratch(attention_scratch_size(1, positions - 1, n_head)), expected(2 * C), paged(2 * C);
  for (int r = 0; r < 2; ++r) {
    cached_attention(expected.data() + r * C, scratch.data(), q.data() + r * C, C, k_layer.data(), v_layer.data(), 1,
                     pos[r], n_head, head_dim, capacity);
    paged_attention(paged.data() + r * C, scratch.data(), q.data() + r * C, C, cache, 1, pos[r], n_head, head_dim);
  }
  ASSERT_EQ(paged, expected);
  const PagedRow rows[2] = {{paged.data(), q.data(), cache, pos[0]}, {paged.data() + C, q.data() + C, cache, pos[1]}};
  std::fill(paged.begin(), paged.end(), NAN);
  std::vector<float> rows_scratch(2 * n_head * positions);
  paged_attention_rows(rows, 2, rows_scratch.data(), positions, n_head, head_dim);
  ASSERT_EQ(paged, expected);
}

TEST_P(IsaKernels, SoftmaxAndGeluMatchReference) {
  const KernelTable& kt = kernels_for(isa());
  for (std::int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 33, 100, 1000}) {
    auto inp = random_vector(n, 15, 30.0f);  // wide: exp would overflow without the max shift
    std::vector<float> fast(n), slow(n);
    kt.softmax(fast.data(), inp.data(), n);
    ref::softmax(slow.data(), inp.data(), n);
    ASSERT_LT(max_error(fast, slow), 1e-6) << "softmax n=" << n;

    inp = random_vector(n, 16, 4.0f);
    inp[0] = 0.0f;
    kt.gelu_new(fast.data(), inp.data(), n);
    ref::gelu_new(slow.data(), inp.data(), n);
    ASSERT_LT(max_error(fast, slow), 1e-6) << "gelu n=" << n;
  }
  // Extremes: no NaN, the limits of GELU, and a one-hot softmax.
  const std::vector<float> x = {-100.0f, -20.0f, 20.0f, 100.0f, 0.0f, -1e30f, 1e30f, -0.0f, 1.0f};
  std::vector<float> y(x.size());
  kt.gelu_new(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_NEAR(y[0], 0.0f, 1e-30f);
  EXPECT_NEAR(y[1], 0.0f, 1e-30f);
  EXPECT_EQ(y[2], 20.0f);
  EXPECT_EQ(y[3], 100.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[6], 1e30f);
  EXPECT_NEAR(y[8], 0.8411920f, 1e-6);
  for (float v : y) EXPECT_FALSE(std::isnan(v));
  std::vector<float> s(x.size());
  kt.softmax(s.data(), x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(s[6], 1.0f);
  EXPECT_EQ(s[0], 0.0f);
}

namespace {

// Distance in representable floats between a and b of the same sign (0 and -0 are 0 apart).
std::int64_t ulps_apart(float a, float b) {
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  if (ia < 0) ia = std::numeric_limits<std::int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<std::int32_t>::min() - ib;
  return std::abs(static_cast<std::int64_t>(ia) - ib);
}

// Inputs for exp on ragged sizes: most in [-110, 95], across underflow to 0, the subnormal
// results below -87.3 and overflow past 88.72, with the special values scattered among them.
std::vector<float> exp_inputs(std::int64_t n, unsigned seed) {
  static const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::denorm_min(), -1e-40f, 0.0f, -0.0f,
                                   88.72283f, 88.72284f, 89.0f, -87.33655f, -100.0f, -103.97f, -103.972084f, -104.0f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-110.0f, 95.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = rng() % 4 == 0 ? specials[rng() % std::size(specials)] : uniform(rng);
  return x;
}

}  // namespace

TEST_P(IsaKernels, ExpKeepsTheCLibrarySemanticsOnRaggedSizes) {
  const KernelTable& kt = kernels_for(isa());
  ASSERT_NE(kt.exp, nullptr);
  for (std::int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099}) {
    const auto x = exp_inputs(n, static_cast<unsigned>(60 + n));
    // Two sentinels past the end: a masked tail must not write them.
    std::vector<float> fast(static_cast<std::size_t>(n) + 2, 7.0f), slow(static_cast<std::size_t>(n));
    kt.exp(fast.data(), x.data(), n);
    ref::exp(slow.data(), x.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      const float f = fast[static_cast<std::size_t>(i)], s = slow[static_cast<std::size_t>(i)];
      if (std::isnan(s)) {
        ASSERT_TRUE(std::isnan(f)) << "exp(" << x[i] << ") = " << f << ", n=" << n;
        continue;
      }
      // Within one ulp of the correctly rounded value (the reference), subnormals included;
      // infinities and zeros exactly.
      ASSERT_LE(ulps_apart(f, s), std::isinf(s) || s == 0.0f ? 0 : 1)
          << "exp(" << x[i] << ") = " << f << ", expected " << s << ", n=" << n;
    }
    ASSERT_EQ(fast[static_cast<std::size_t>(n)], 7.0f) << "wrote past the end, n=" << n;
    ASSERT_EQ(fast[static_cast<std::size_t>(n) + 1], 7.0f) << "wrote past the end, n=" << n;
    auto in_place = x;  // out may equal inp
    kt.exp(in_place.data(), in_place.data(), n);
    ASSERT_EQ(0, std::memcmp(in_place.data(), fast.data(), in_place.size() * sizeof(float))) << "in place, n=" << n;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 100.0f, 88.72284f, -104.0f,
                                -1000.0f, 1e-40f, -1e-40f, 0.0f, 1.0f, -103.97f};
  std::vector<float> y(x.size());
  kt.exp(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], inf);  // overflow
  EXPECT_EQ(y[4], inf);  // just past ln(FLT_MAX)
  EXPECT_EQ(y[5], 0.0f);  // below half the smallest subnormal
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[7], 1.0f);  // subnormal inputs
  EXPECT_EQ(y[8], 1.0f);
  EXPECT_EQ(y[9], 1.0f);
  EXPECT_EQ(y[10], std::exp(1.0f));
  EXPECT_EQ(y[11], std::numeric_limits<float>::denorm_min());
}

TEST(X86Kernels, Avx512ExpEqualsAvx2BitForBit) {
  std::string why;
  if (!isa_supported(Isa::avx512, &why)) GTEST_SKIP() << "avx512 not run: " << why;
  const auto x = exp_inputs(10007, 71);
  std::vector<float> a(x.size()), b(x.size());
  kernels_for(Isa::avx2).exp(a.data(), x.data(), static_cast<std::int64_t>(x.size()));
  kernels_for(Isa::avx512).exp(b.data(), x.data(), static_cast<std::int64_t>(x.size()));
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// sigmoid and tanh (exp.hpp) on exp's inputs and on a band around 0 where tanh switches form:
// within 2 ulp of the reference, NaN kept, infinities, zeros and signs exact; in place alike.
TEST_P(IsaKernels, SigmoidAndTanhStayWithinTwoUlpOnRaggedSizes) {
  const KernelTable& kt = kernels_for(isa());
  ASSERT_NE(kt.sigmoid, nullptr);
  ASSERT_NE(kt.tanh, nullptr);
  const struct {
    const char* name;
    RowFn* fast;
    RowFn* slow;
  } functions[] = {{"sigmoid", kt.sigmoid, ref::sigmoid}, {"tanh", kt.tanh, ref::tanh}};
  for (const auto& fn : functions)
    for (std::int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099}) {
      auto x = exp_inputs(n, static_cast<unsigned>(90 + n));
      std::mt19937 rng(static_cast<unsigned>(n));
      std::uniform_real_distribution<float> near_zero(-1.5f, 1.5f);
      for (std::size_t i = 0; i < x.size(); i += 3) x[i] = near_zero(rng);
      std::vector<float> fast(static_cast<std::size_t>(n) + 2, 7.0f), slow(static_cast<std::size_t>(n));
      fn.fast(fast.data(), x.data(), n);
      fn.slow(slow.data(), x.data(), n);
      for (std::int64_t i = 0; i < n; ++i) {
        const float f = fast[static_cast<std::size_t>(i)], s = slow[static_cast<std::size_t>(i)];
        if (std::isnan(s)) {
          ASSERT_TRUE(std::isnan(f)) << fn.name << "(" << x[i] << ") = " << f << ", n=" << n;
          continue;
        }
        // sigmoid below about -88 gives 0 where the true value is a tiny subnormal (e^-x
        // overflows first), as torch's does: absolute error under the smallest normal there.
        if (std::fabs(s) < std::numeric_limits<float>::min()) {
          ASSERT_LT(std::fabs(f - s), std::numeric_limits<float>::min()) << fn.name << "(" << x[i] << ")";
          continue;
        }
        ASSERT_LE(ulps_apart(f, s), s == 1.0f || s == -1.0f || s == 0.0f ? 1 : 2)
            << fn.name << "(" << x[i] << ") = " << f << ", expected " << s << ", n=" << n;
        ASSERT_EQ(std::signbit(f), std::signbit(s)) << fn.name << "(" << x[i] << ")";
      }
      ASSERT_EQ(fast[static_cast<std::size_t>(n)], 7.0f) << "wrote past the end, n=" << n;
      ASSERT_EQ(fast[static_cast<std::size_t>(n) + 1], 7.0f) << "wrote past the end, n=" << n;
      auto in_place = x;
      fn.fast(in_place.data(), in_place.data(), n);
      ASSERT_EQ(0, std::memcmp(in_place.data(), fast.data(), in_place.size() * sizeof(float))) << fn.name << " in place";
    }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {inf, -inf, 0.0f, -0.0f, 20.0f, -20.0f};
  std::vector<float> y(x.size());
  kt.tanh(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_TRUE(y[2] == 0.0f && !std::signbit(y[2]));
  EXPECT_TRUE(y[3] == 0.0f && std::signbit(y[3]));
  EXPECT_EQ(y[4], 1.0f);
  EXPECT_EQ(y[5], -1.0f);
  kt.sigmoid(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 0.5f);
}

TEST(X86Kernels, Avx512SigmoidAndTanhEqualAvx2BitForBit) {
  std::string why;
  if (!isa_supported(Isa::avx512, &why)) GTEST_SKIP() << "avx512 not run: " << why;
  const auto x = exp_inputs(10007, 73);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> a(x.size()), b(x.size());
  kernels_for(Isa::avx2).sigmoid(a.data(), x.data(), n);
  kernels_for(Isa::avx512).sigmoid(b.data(), x.data(), n);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  kernels_for(Isa::avx2).tanh(a.data(), x.data(), n);
  kernels_for(Isa::avx512).tanh(b.data(), x.data(), n);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// The sum's order (sum.hpp) is the same on every set: the portable loop's bits exactly, close
// to the long double sum, special values carried.
TEST_P(IsaKernels, SumHasThePortableOrderOnRaggedSizes) {
  const KernelTable& kt = kernels_for(isa());
  ASSERT_NE(kt.sum, nullptr);
  for (std::int64_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 1000, 4099}) {
    // Magnitudes over eight decades, so that the order of the adds shows in the low bits.
    auto x = random_vector(n, static_cast<unsigned>(200 + n), 1.0f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.0f, static_cast<float>(i % 9) - 4.0f);
    const double fast = kt.sum(x.data(), n);
    ASSERT_EQ(fast, portable::sum(x.data(), n)) << "n=" << n;
    double magnitude = 0;
    for (const float v : x) magnitude += std::fabs(v);
    ASSERT_LE(std::fabs(fast - ref::sum(x.data(), n)), 1e-15 * magnitude) << "n=" << n;
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(37, 1.0f);
  x[35] = inf;
  EXPECT_EQ(kt.sum(x.data(), 37), inf);
  x[2] = -inf;
  EXPECT_TRUE(std::isnan(kt.sum(x.data(), 37)));
  x.assign(37, -0.0f);
  EXPECT_EQ(kt.sum(x.data(), 37), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Isas, IsaKernels, test_util::every_isa_and_threads(), test_util::isa_threads_name);
