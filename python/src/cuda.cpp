// kael._kael._cuda: the CUDA runtime's queries and memory figures (kael/core/cuda.hpp), which
// python/kael/cuda.py presents with torch.cuda's names.
#include "bindings.hpp"
#include "kael/core/cuda.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace kael::python {

void init_cuda(py::module_& m) {
  py::module_ cuda = m.def_submodule("_cuda", "The CUDA runtime (use kael.cuda)");
  cuda.def("is_available", &kael::cuda::is_available);
  cuda.def("device_count", &kael::cuda::device_count);
  cuda.def("synchronize", &kael::cuda::synchronize, py::call_guard<py::gil_scoped_release>());
  cuda.def("manual_seed", &kael::cuda::manual_seed, "seed"_a);
  cuda.def("initial_seed", &kael::cuda::initial_seed);
  cuda.def("memory_allocated", &kael::cuda::memory_allocated, "device"_a = 0);
  cuda.def("max_memory_allocated", &kael::cuda::max_memory_allocated, "device"_a = 0);
  cuda.def("memory_reserved", &kael::cuda::memory_reserved, "device"_a = 0);
  cuda.def("reset_peak_memory_stats", &kael::cuda::reset_peak_memory_stats, "device"_a = 0);
  cuda.def("empty_cache", &kael::cuda::empty_cache);
}

}  // namespace kael::python
