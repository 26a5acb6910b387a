// Matrix products on CUDA devices, on cuBLAS. cuBLAS is loaded when the first product runs
// (dlopen of the toolkit's soname), not linked: a CUDA build then starts, and runs on the CPU, on
// a machine without cuBLAS, and a process that has PyTorch's cuBLAS loaded uses that one.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda_runtime.hpp"
#include "kael/core/error.hpp"
#include "kernels/cuda.hpp"

namespace kael::kernels::cuda {

namespace {

// The functions kael calls, resolved from the library once.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

template <class F>
void resolve(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (function == nullptr) throw Error(str("cuBLAS was loaded but has no ", name));
}

const Cublas& cublas() {
  static const Cublas loaded = [] {
    const std::string soname = str("libcublas.so.", CUBLAS_VER_MAJOR);
    void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr)
      throw Error(str("matrix products on CUDA need cuBLAS, which could not be loaded (", dlerror(),
                      "); install the CUDA toolkit's cuBLAS ", CUBLAS_VER_MAJOR, " or put it on LD_LIBRARY_PATH"));
    Cublas c;
    resolve(library, "cublasCreate_v2", c.create);
    resolve(library, "cublasSetMathMode", c.set_math_mode);
    resolve(library, "cublasSgemmStridedBatched", c.sgemm_strided_batched);
    resolve(library, "cublasGetStatusString", c.status_string);
    return c;
  }();
  return loaded;
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(str("cuBLAS ", what, " failed: ", cublas().status_string(status)));
}

// One handle per device, made on first use and kept for the process (as torch keeps its own);
// `lock` serializes the calls on it, as a handle is not for several threads at once.
struct Handles {
  std::mutex lock;
  std::vector<cublasHandle_t> per_device;
};

Handles& handles() {
  static Handles h;
  return h;
}

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(str("matmul on CUDA: ", what, " ", v, " is past cuBLAS's int range"));
  return static_cast<int>(v);
}

}  // namespace

void gemm_f32(int device, const Gemm& g, bool allow_tf32) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const Cublas& api = cublas();
  Handles& h = handles();
  const std::lock_guard<std::mutex> guard(h.lock);
  cuda_runtime::set_device(device);
  if (h.per_device.size() <= static_cast<std::size_t>(device)) h.per_device.resize(static_cast<std::size_t>(device) + 1);
  cublasHandle_t& handle = h.per_device[static_cast<std::size_t>(device)];
  if (handle == nullptr) check(api.create(&handle), "cublasCreate");
  // TF32 only where the float32 matmul precision allows it, as torch.backends.cuda.matmul.allow_tf32.
  check(api.set_math_mode(handle, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // Row-major C = A B is column-major C^T = B^T A^T: the operands swap, and each stored matrix
  // is, read column-major, its own transpose.
  const float one = 1.0f, zero = 0.0f;
  check(api.sgemm_strided_batched(handle, g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  g.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(g.n, "N"), as_int(g.m, "M"),
                                  as_int(g.k, "K"), &one, g.b, as_int(g.ldb, "ldb"), g.stride_b, g.a,
                                  as_int(g.lda, "lda"), g.stride_a, &zero, g.c, as_int(g.ldc, "ldc"), g.stride_c,
                                  as_int(g.batch, "the batch")),
        "sgemm");
}

}  // namespace kael::kernels::cuda
