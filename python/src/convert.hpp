// Conversions between Python objects and kael values shared by the binding files.
#pragma once

#include <pybind11/numpy.h>

#include <optional>
#include <string>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::python {

using namespace pybind11::literals;

// The kael dtype of a numpy dtype, if safetensors has one.
std::optional<DType> dtype_from_numpy(const pybind11::dtype& dtype);
// A kael.Tensor as is, or a copy of anything numpy.asarray accepts (optionally converted to F32).
Tensor tensor_from_object(const pybind11::handle& object, std::optional<std::string> dtype_name = std::nullopt);

}  // namespace kael::python

namespace kael::python {
// Bytes as a Python str; invalid UTF-8 becomes U+FFFD.
pybind11::str utf8_piece(const std::string& bytes);
// A model's shape as a dict named as config.json names it (n_layer, n_head, ...).
pybind11::dict config_dict(const model::Config& config);
}  // namespace kael::python
