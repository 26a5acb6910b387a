// Entry point of kael._kael: each layer's bindings live in their own file.
#include "bindings.hpp"
#include "kael/version.hpp"

PYBIND11_MODULE(_kael, m) {
  m.doc() = "kael: GPT-2 inference in C++ (native extension; import kael, not kael._kael)";
  kael::python::init_errors(m);
  kael::python::init_dtype(m);
  kael::python::init_tensor(m);
  kael::python::init_tensor_math(m);
  kael::python::init_tensor_ops(m);
  kael::python::init_tensor_creation(m);
  kael::python::init_tensor_index(m);
  kael::python::init_autograd(m);
  kael::python::init_nn(m);
  kael::python::init_conv(m);
  kael::python::init_rnn(m);
  kael::python::init_transformer(m);
  kael::python::init_optim(m);
  kael::python::init_io(m);
  kael::python::init_text(m);
  kael::python::init_model(m);
  m.attr("__version__") = kael::version();
  kael::python::init_finetune(m);
  kael::python::init_cuda(m);
  kael::python::guard_construction(m);
}
