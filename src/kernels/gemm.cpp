// Packing, dispatch and threading for gemm.hpp: the work is split here, in baseline code, and
// each piece runs on the active kernel table (kernel_table.hpp).
#include "kernels/gemm.hpp"

#include <algorithm>
#include <vector>

#include "kernels/infra/aligned_vector.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {

std::int64_t min_panels_per_thread(std::int64_t M, std::int64_t K) {
  return min_product_items_per_thread(M * K * kPanel, K * kPanel * std::int64_t{sizeof(float)});
}

namespace {

// panel (K, w) = columns [0, w) of src (K, w; rows ld apart). A full panel's row is a fixed
// 16-float copy, inlined (std::copy of 64 bytes is a library call per row).
void copy_panel(float* panel, const float* src, std::int64_t ld, std::int64_t K, std::int64_t w) {
  if (w == kPanel) {
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < kPanel; ++j) panel[k * kPanel + j] = src[k * ld + j];
    return;
  }
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t j = 0; j < w; ++j) panel[k * w + j] = src[k * ld + j];
}

// panel (K, w) = the transpose of src (w, K; rows ld apart): on the table's 4x4 vector
// transposes where it has them (element by element, this was about a tenth of a batch-1
// forward of a small GPT, which packs every weight each call), else w read streams, one write.
void copy_panel_transposed(float* panel, const float* src, std::int64_t ld, std::int64_t K, std::int64_t w) {
  if (TransposePanelFn* const transpose = active_kernels().transpose_panel) return transpose(panel, src, ld, K, w);
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t j = 0; j < w; ++j) panel[k * w + j] = src[j * ld + k];
}

}  // namespace

void pack_panels(float* dst, const float* src, std::int64_t K, std::int64_t N) {
  // Threaded over panels: a step of training packs every weight (kernels::gemm below).
  parallel_for((N + kPanel - 1) / kPanel, min_items_per_thread(kPanel * K), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t col = first * kPanel; col < std::min(N, last * kPanel); col += kPanel) {
      const std::int64_t w = std::min(kPanel, N - col);
      copy_panel(dst + col * K, src + col, N, K, w);
    }
  });
}

void pack_panels_transposed(float* dst, const float* src, std::int64_t K, std::int64_t N) {
  parallel_for((N + kPanel - 1) / kPanel, min_items_per_thread(kPanel * K), [&](std::int64_t first, std::int64_t last) {
    std::vector<float> rows(static_cast<std::size_t>(kPanel * K));
    for (std::int64_t col = first * kPanel; col < std::min(N, last * kPanel); col += kPanel) {
      const std::int64_t w = std::min(kPanel, N - col);
      std::copy(src + col * K, src + (col + w) * K, rows.begin());  // rows col.. of src, (w, K)
      copy_panel_transposed(dst + col * K, rows.data(), K, K, w);
    }
  });
}

void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  const KernelTable& kt = active_kernels();
  parallel_for((N + kPanel - 1) / kPanel, min_panels_per_thread(T, K), [&](std::int64_t first, std::int64_t last) {
    const std::int64_t col = first * kPanel;
    kt.gemm_panels(out + col, N, inp, K, packed + col * K, kPanel, kPanel * K, true, T,
                   std::min(N, last * kPanel) - col, K, bias ? bias + col : nullptr, epilogue);
  });
}

void gemm_packed(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* packed, std::int64_t M,
                 std::int64_t N, std::int64_t K) {
  active_kernels().gemm_panels(out, ldo, a, lda, packed, kPanel, kPanel * K, true, M, N, K, nullptr, Epilogue::store);
}

void gemm_view(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const PanelView& b, std::int64_t M,
               std::int64_t N, std::int64_t K) {
  active_kernels().gemm_panels(out, ldo, a, lda, b.data, b.ldb, b.panel_stride, b.packed, M, N, K, nullptr,
                               Epilogue::store);
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  active_kernels().gemm_nt(out, ldo, a, lda, b, ldb, M, N, K, scale);
}

void gemm_nn(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K) {
  // Unpacked: panel p is simply columns [16p, 16p + 16) of b.
  active_kernels().gemm_panels(out, ldo, a, lda, b, ldb, kPanel, false, M, N, K, nullptr, Epilogue::store);
}

void gemm_tn(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  const KernelTable& kt = active_kernels();
  const Epilogue epilogue = accumulate ? Epilogue::residual : Epilogue::store;
  if (kt.gemm_panels_at != nullptr && M > 2) {
    kt.gemm_panels_at(c, ldc, a, lda, b, ldb, kPanel, false, M, N, K, nullptr, epilogue);
    return;
  }
  // op(a) (M, K) copied into rows: per k, a run of M contiguous inputs read.
  thread_local AlignedVector<float> a_rows;
  a_rows.resize(static_cast<std::size_t>(M * K));
  float* rows = a_rows.data();
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t i = 0; i < M; ++i) rows[i * K + k] = a[k * lda + i];
  kt.gemm_panels(c, ldc, rows, K, b, ldb, kPanel, false, M, N, K, nullptr, epilogue);
}

void gemm(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
          std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
          const float* bias) {
  if (M <= 0 || N <= 0) return;
  const KernelTable& kt = active_kernels();
  const Epilogue epilogue = accumulate ? Epilogue::residual : Epilogue::store;
  const auto bias_at = [bias](std::int64_t col) { return bias != nullptr ? bias + col : nullptr; };
  if (K <= 0) {  // an empty sum: the outputs are the bias (or zero)
    for (std::int64_t i = 0; i < M; ++i) {
      float* row = c + i * ldc;
      if (bias == nullptr && !accumulate) std::fill_n(row, N, 0.0f);
      if (bias != nullptr)
        for (std::int64_t j = 0; j < N; ++j) row[j] = accumulate ? row[j] + bias[j] : bias[j];
    }
    return;
  }
  // One row against a transposed B (a batch-1 linear on a torch-layout weight): the GEMV reads B
  // in place, with the bits of the packed product below, instead of packing all of it for one row.
  if (M == 1 && trans_b && !trans_a && kt.gemv_rows != nullptr) {
    parallel_for((N + kPanel - 1) / kPanel, min_panels_per_thread(1, K), [&](std::int64_t first, std::int64_t last) {
      const std::int64_t col = first * kPanel;
      kt.gemv_rows(c + col, a, b + col * ldb, ldb, std::min(N, last * kPanel) - col, K, bias_at(col), epilogue);
    });
    return;
  }
  // The micro-kernels read a row-major A and B in panels. A transposed A is copied once into
  // rows (M K floats, against M N K multiply-adds); B is packed into the exact panel layout
  // (K N floats) unless it is read only once or twice (M <= 2), or a few times (M <= 32, at
  // most three 12-row tiles) with narrow rows (ldb <= 512 floats, 2 KiB): strided panels, ldb
  // floats apart, touch a new page at every k once ldb passes a few KiB and run at a third of
  // the packed speed, but below that packing costs more than it saves (an LSTM step's
  // (20, 800) @ (800, 200): 83 -> 66 CPU us at one thread; (32, 4096) @ (4096, 512): 2.2 ->
  // 1.2 ms). The calling thread's buffers, filled and read by the workers through these
  // pointers; the arithmetic is the same whatever the layout. On cache lines, so that no 64-byte
  // panel row spans two.
  thread_local AlignedVector<float> a_rows, b_panels;
  const std::int64_t panels = (N + kPanel - 1) / kPanel;
  // The table's kernel reads a transposed A as it is (no copy: about a fifth of dW's time),
  // packing the rows it multiplies. Split by columns, every thread would pack all of A, so an A
  // with more rows than B has columns (an LSTM decoder's (10000, 200) dW packed its 28 MB A on
  // both threads) splits by rows instead, each thread packing its own.
  const bool read_transposed = trans_a && kt.gemm_panels_at != nullptr && M > 2;
  const bool split_columns =
      (panels >= 2 * num_threads() || M < 2 * kPanel) && !(read_transposed && M > N && M >= 2 * kPanel * num_threads());
  GemmPanelsFn* const panels_fn = read_transposed ? kt.gemm_panels_at : kt.gemm_panels;
  if (trans_a && !read_transposed) {
    a_rows.resize(static_cast<std::size_t>(M * K));
    float* rows = a_rows.data();
    // Tiles of 16 rows of op(a), each the transpose of 16 columns of a: 16 write streams.
    parallel_for((M + kPanel - 1) / kPanel, min_items_per_thread(kPanel * K), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t i0 = first * kPanel; i0 < std::min(M, last * kPanel); i0 += kPanel) {
        const std::int64_t h = std::min(kPanel, M - i0);
        for (std::int64_t k = 0; k < K; ++k)
          for (std::int64_t i = i0; i < i0 + h; ++i) rows[i * K + k] = a[k * lda + i];
      }
    });
    a = rows;
    lda = K;
  }
  PanelView view{b, ldb, kPanel, false};
  if (trans_b || (M > 2 && !(M <= 2 * kPanel && ldb <= 512))) {
    b_panels.resize(static_cast<std::size_t>(K * N));
    float* packed = b_panels.data();
    parallel_for((N + kPanel - 1) / kPanel, min_items_per_thread(kPanel * K), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t col = first * kPanel; col < std::min(N, last * kPanel); col += kPanel) {
        const std::int64_t w = std::min(kPanel, N - col);
        if (trans_b)
          copy_panel_transposed(packed + col * K, b + col * ldb, ldb, K, w);
        else
          copy_panel(packed + col * K, b + col, ldb, K, w);
      }
    });
    view = {packed, kPanel, kPanel * K, true};
  }
  if (split_columns) {
    parallel_for(panels, min_panels_per_thread(M, K), [&](std::int64_t first, std::int64_t last) {
      const std::int64_t col = first * kPanel;
      panels_fn(c + col, ldc, a, lda, view.data + first * view.panel_stride, view.ldb, view.panel_stride,
                view.packed, M, std::min(N, last * kPanel) - col, K, bias_at(col), epilogue);
    });
  } else {
    // Few columns, many rows (dX of a narrow layer): threads take rows instead (row r of a
    // transposed A is its column r).
    parallel_for(M, min_items_per_thread(N * K), [&](std::int64_t first, std::int64_t last) {
      panels_fn(c + first * ldc, ldc, read_transposed ? a + first : a + first * lda, lda, view.data, view.ldb,
                view.panel_stride, view.packed, last - first, N, K, bias, epilogue);
    });
  }
}

}  // namespace kael::kernels
