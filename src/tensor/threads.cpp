// The tensor library's thread count: the kernel table's pool, which every threaded op uses.
#include "kael/tensor/ops.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael {

void set_num_threads(int n) { kernels::set_num_threads(n); }
int get_num_threads() { return kernels::num_threads(); }

}  // namespace kael
