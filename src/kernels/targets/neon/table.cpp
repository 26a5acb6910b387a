// The NEON table: the kernel families (kernels/family/) instantiated for this target's traits
// (neon/vec.hpp), and this folder's int8 kernels. The activation quantizer stays the portable
// one, which the compiler vectorizes (all sets give it equal bits).
#include "kernels/family/fill.hpp"
#include "kernels/targets/neon/kernels.hpp"
#include "kernels/targets/neon/vec.hpp"

namespace kael::kernels::neon {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  family::fill_families<Vec>(table);
  fill_training(table);
  table.gemm_nt = family::gemm_nt<Vec>;
  table.int8_gemm = cpu.dotprod ? int8_gemm_sdot : int8_gemm;
  table.int8_dot = cpu.dotprod ? "neon-sdot" : "neon-smull";
}

}  // namespace kael::kernels::neon
