// The training kernels of family/training.hpp for this target, instantiated here alone: the
// build gives the units named training.cpp -ffp-contract=off (the AdamW update keeps the
// portable loop's roundings).
#include "kernels/family/training.hpp"
#include "kernels/targets/avx512/kernels.hpp"
#include "kernels/targets/avx512/vec.hpp"

namespace kael::kernels::avx512 {

void fill_training(KernelTable& table) { family::fill_training<Vec>(table); }

}  // namespace kael::kernels::avx512
