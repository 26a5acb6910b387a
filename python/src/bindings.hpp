// Shared declarations of the kael Python extension: one init function per library layer.
#pragma once

#include <pybind11/pybind11.h>

namespace kael::python {

void init_errors(pybind11::module_& m);
void init_dtype(pybind11::module_& m);
void init_tensor(pybind11::module_& m);  // the class; the files below add its methods
void init_tensor_math(pybind11::module_& m);
void init_tensor_ops(pybind11::module_& m);  // further ops, losses (tensor_ops.cpp)
void init_tensor_creation(pybind11::module_& m);
void init_tensor_index(pybind11::module_& m);
void init_autograd(pybind11::module_& m);
void init_nn(pybind11::module_& m);
void init_conv(pybind11::module_& m);  // convolution, pooling, normalization (conv.cpp)
void init_rnn(pybind11::module_& m);   // recurrent layers (rnn.cpp)
void init_transformer(pybind11::module_& m);  // multi-head attention (transformer.cpp)
void init_optim(pybind11::module_& m);
void init_io(pybind11::module_& m);
void init_text(pybind11::module_& m);
void init_model(pybind11::module_& m);
void init_finetune(pybind11::module_& m);
void init_cuda(pybind11::module_& m);  // kael._kael._cuda (cuda.cpp)
// Last: every class of the module refuses Cls.__new__(Cls) (construction_guard.cpp).
void guard_construction(pybind11::module_& m);

}  // namespace kael::python
