// The AVX-512 table: on top of the AVX2 one (kernel_table.hpp), the entries of this folder.
#include "kernels/kernel_table.hpp"

namespace kael::kernels::avx512 {

void fill(KernelTable& table, const CpuFeatures& cpu) { (void)table, (void)cpu; }

}  // namespace kael::kernels::avx512
