// The precisions kael trains at (kael/train/precision.hpp): their names and what each needs.
#include "kael/train/precision.hpp"

#include "kael/core/error.hpp"
#include "kernels/gemm_bf16.hpp"

namespace kael::train {

Precision parse_precision(std::string_view name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  throw ValueError(str("precision '", name, "' is not one kael trains at (expected f32 or bf16)"));
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f32"; }

void require_precision(Precision precision) {
  if (precision != Precision::bf16) return;
  std::string why;
  if (!kernels::gemm_bf16_available(&why))
    throw ValueError(str("precision bf16 needs a CPU with AMX-BF16 or AVX512-BF16 for its matrix products: ", why,
                         " (train at --precision f32 instead)"));
}

}  // namespace kael::train
