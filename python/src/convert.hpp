// Conversions between Python objects and kael values shared by the binding files.
#pragma once

#include <pybind11/numpy.h>

#include <optional>
#include <string>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::python {

using namespace pybind11::literals;

// What kael.dtype objects hold (python/src/dtype.cpp).
struct DTypeObject {
  DType value;
};

// The kael dtype of a numpy dtype, if kael has one.
std::optional<DType> dtype_from_numpy(const pybind11::dtype& dtype);
// The kael.dtype object of `dtype` (one per dtype).
pybind11::object dtype_object(DType dtype);
// A dtype argument: None (nullopt), a kael.dtype, a name ("F32" or "float32") or a numpy dtype.
std::optional<DType> optional_dtype_arg(const pybind11::handle& object);
DType dtype_arg(const pybind11::handle& object, DType default_dtype);
// The floating dtype of Python floats and of creation functions given no dtype
// (kael.set_default_dtype: F32 unless set to F64). Process-wide, as torch's.
DType default_float_dtype();
void set_default_float_dtype(DType dtype);
// A device argument: a kael.device or a name ("cpu").
Device device_arg(const pybind11::handle& object);

// An optional tensor argument (None: nullopt) as the C++ API takes it: undefined for none.
inline Tensor tensor_or_undefined(const std::optional<Tensor>& t) { return t.value_or(Tensor()); }
// A tensor result that may be undefined, as the tensor or None.
inline pybind11::object tensor_or_none(const Tensor& t) { return t.defined() ? pybind11::cast(t) : pybind11::none(); }

// A kael.Tensor as is, or a copy of anything numpy.asarray accepts (optionally converted to F32).
Tensor tensor_from_object(const pybind11::handle& object, std::optional<std::string> dtype_name = std::nullopt);
// The one conversion of Python integers and text for the bindings: the argument (an int, a
// numpy integer, anything with __index__; a str) as a C++ value, or a kael.ValueError /
// TypeError that names it (`what`, such as "zeros: size") and the range it must be in.
std::int64_t int64_arg(const pybind11::handle& object, const std::string& what);
int int_arg(const pybind11::handle& object, const std::string& what);
// A seed: -2**63 .. 2**64 - 1, negatives taken modulo 2**64 (torch.manual_seed's rule).
std::uint64_t seed_arg(const pybind11::handle& object, const std::string& what);
// A str as UTF-8; ValueError for a lone surrogate, which has none.
std::string utf8_arg(const pybind11::handle& object, const std::string& what);
// `op`'s generator= argument: kael draws from the one generator kael.manual_seed seeds, so a
// generator object is refused with a ValueError rather than silently ignored.
void check_no_generator(const pybind11::handle& generator, const char* op);

// A Python number (bool, int, float or a numpy scalar) as a Scalar; nullopt for anything else.
std::optional<Scalar> scalar_arg(const pybind11::handle& object, const std::string& what = "the number");
// A kael.Tensor argument of `op`; TypeError naming the op for anything else.
Tensor tensor_arg(const pybind11::handle& object, const char* op);
// A tensor or a number, as a tensor: numbers become 0-d tensors of the dtype PyTorch would give
// them beside `like` (an int keeps an integer tensor's dtype, a float a floating one's).
Tensor operand_like(const pybind11::handle& object, const Tensor& like, const char* op);
// Dims from a Python int, a sequence of ints or None (every dim).
std::vector<int> dims_arg(const pybind11::handle& object);
// A shape from a sequence of ints, or from *args as PyTorch allows (t.view(2, 3) or t.view((2, 3))).
Shape shape_from_args(const pybind11::args& args, const char* op);
Shape shape_arg(const pybind11::handle& object, const char* op);

}  // namespace kael::python

namespace kael::python {
// Bytes as a Python str; invalid UTF-8 becomes U+FFFD.
pybind11::str utf8_piece(const std::string& bytes);
// A model's shape as a dict named as config.json names it (n_layer, n_head, ...).
pybind11::dict config_dict(const model::Config& config);
}  // namespace kael::python
