// The arithmetic a training run's matrix products use: the four of each block and the output
// head's, forward and backward (attention's small per-head products stay F32). bf16 is mixed
// precision as torch.autocast("cpu", dtype=torch.bfloat16) runs a product: operands rounded to
// BF16, sums in F32; a run sets the tensor library's float32 matmul precision to "medium" for it.
// The parameters, gradients, optimizer, loss and every other operation are F32 in both.
#pragma once

#include <string_view>

namespace kael::train {

enum class Precision { f32, bf16 };
// "f32" or "bf16"; ValueError otherwise.
Precision parse_precision(std::string_view name);
const char* precision_name(Precision precision);
// ValueError, saying what is missing, unless `precision` can run on this CPU and kernel set (bf16
// needs AMX-BF16 or AVX512-BF16).
void require_precision(Precision precision);

}  // namespace kael::train
