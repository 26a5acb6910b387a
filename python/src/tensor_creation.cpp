// kael.zeros/ones/arange/randn/..., joining (cat, stack, index_select) and the neural-network
// functions (linear, layer_norm, cross_entropy, ...; python/kael/nn/functional.py re-exports
// them as kael.nn.functional), with PyTorch's signatures.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/tensor/precision.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

// The keyword arguments creation functions share, as torch.zeros(..., dtype=, device=, requires_grad=).
struct CreationOptions {
  std::optional<DType> dtype;
  std::optional<Device> device;  // made on the CPU, then copied there
  bool requires_grad = false;
};

CreationOptions creation_options(const py::kwargs& kwargs, const char* op) {
  CreationOptions options;
  for (const auto& [key, value] : kwargs) {
    const auto name = key.cast<std::string>();
    if (name == "dtype") options.dtype = optional_dtype_arg(value);
    else if (name == "requires_grad") options.requires_grad = value.cast<bool>();
    else if (name == "device") { if (!value.is_none()) options.device = device_arg(value); }
    else throw TypeError(str(op, "() got an unexpected keyword argument '", name, "'"));
  }
  return options;
}

Tensor finish(Tensor t, const CreationOptions& options) {
  if (options.device) t = t.to(*options.device);
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

// zeros(2, 3), zeros((2, 3)), zeros([2, 3]), each with dtype=, requires_grad=, device=.
template <Tensor (*make)(Shape, DType)>
auto sized(const char* op) {
  return [op](const py::args& size, const py::kwargs& kwargs) {
    const auto options = creation_options(kwargs, op);
    return finish(make(shape_from_args(size, op), options.dtype.value_or(default_float_dtype())), options);
  };
}

// The dtype PyTorch infers for a fill value: bool, int64 for ints, float32 for floats.
DType inferred_dtype(const Scalar& value, const py::handle& object) {
  if (PyBool_Check(object.ptr())) return DType::BOOL;
  return value.integral ? DType::I64 : default_float_dtype();
}

// A number argument; `what` names it ("full: fill_value").
Scalar number(const py::handle& object, const std::string& what) {
  auto s = scalar_arg(object, what);
  if (!s) throw TypeError(str(what, ": expected a number, got ", std::string(py::str(py::type::of(object).attr("__name__")))));
  return *s;
}

Tensor like_with(const Tensor& like, const py::kwargs& kwargs, const char* op, Tensor (*make)(Shape, DType)) {
  auto options = creation_options(kwargs, op);
  if (!options.device) options.device = like.device();  // torch's *_like: the device of `like`
  return finish(make(like.shape(), options.dtype.value_or(like.dtype())), options);
}

Tensor zeros_of(Shape shape, DType dtype) { return zeros(std::move(shape), dtype); }
Tensor ones_of(Shape shape, DType dtype) { return ones(std::move(shape), dtype); }
Tensor empty_of(Shape shape, DType dtype) { return empty(std::move(shape), dtype); }
Tensor rand_of(Shape shape, DType dtype) { return rand(std::move(shape), dtype); }
Tensor randn_of(Shape shape, DType dtype) { return randn(std::move(shape), dtype); }

std::vector<Tensor> tensor_list(const py::handle& tensors, const char* op) {
  std::vector<Tensor> out;
  for (const py::handle item : tensors) out.push_back(tensor_arg(item, op));
  return out;
}

}  // namespace

void init_tensor_creation(py::module_& m) {
  m.def("zeros", sized<&zeros_of>("zeros"), "Zeros of the given size: kael.zeros(2, 3, dtype=kael.int64).");
  m.def("ones", sized<&ones_of>("ones"));
  m.def("empty", sized<&empty_of>("empty"), "Uninitialized values of the given size.");
  m.def("rand", sized<&rand_of>("rand"), "Uniform in [0, 1) from the generator kael.manual_seed seeds.");
  m.def("randn", sized<&randn_of>("randn"), "Standard normal from the generator kael.manual_seed seeds.");
  m.def("zeros_like", [](const Tensor& t, const py::kwargs& kw) { return like_with(t, kw, "zeros_like", &zeros_of); }, "input"_a);
  m.def("ones_like", [](const Tensor& t, const py::kwargs& kw) { return like_with(t, kw, "ones_like", &ones_of); }, "input"_a);
  m.def("empty_like", [](const Tensor& t, const py::kwargs& kw) { return like_with(t, kw, "empty_like", &empty_of); }, "input"_a);
  m.def("rand_like", [](const Tensor& t, const py::kwargs& kw) { return like_with(t, kw, "rand_like", &rand_of); }, "input"_a);
  m.def("randn_like", [](const Tensor& t, const py::kwargs& kw) { return like_with(t, kw, "randn_like", &randn_of); }, "input"_a);
  m.def(
      "full",
      [](const py::object& size, const py::object& fill_value, const py::kwargs& kwargs) {
        const auto options = creation_options(kwargs, "full");
        const Scalar value = number(fill_value, "full: fill_value");
        return finish(full(shape_arg(size, "full"), value, options.dtype.value_or(inferred_dtype(value, fill_value))), options);
      },
      "size"_a, "fill_value"_a);
  m.def(
      "full_like",
      [](const Tensor& t, const py::object& fill_value, const py::kwargs& kwargs) {
        auto options = creation_options(kwargs, "full_like");
        if (!options.device) options.device = t.device();
        return finish(full(t.shape(), number(fill_value, "full_like: fill_value"), options.dtype.value_or(t.dtype())), options);
      },
      "input"_a, "fill_value"_a);
  m.def(
      "arange",
      [](const py::object& start, const py::object& end, const py::object& step, const py::kwargs& kwargs) {
        const auto options = creation_options(kwargs, "arange");
        Scalar from = number(start, "arange: start"), by = number(step, "arange: step");
        Scalar to = end.is_none() ? from : number(end, "arange: end");
        if (end.is_none()) from = Scalar(0);
        const DType inferred = from.integral && to.integral && by.integral ? DType::I64 : default_float_dtype();
        return finish(arange(from.value, to.value, by.value, options.dtype.value_or(inferred)), options);
      },
      "start"_a, "end"_a = py::none(), "step"_a = 1,
      "[start, end) in steps of step; arange(end) starts at 0. int64 when all are ints, else float32.");
  m.def(
      "linspace",
      [](double start, double end, std::int64_t steps, const py::kwargs& kwargs) {
        const auto options = creation_options(kwargs, "linspace");
        return finish(linspace(start, end, steps, options.dtype.value_or(default_float_dtype())), options);
      },
      "start"_a, "end"_a, "steps"_a);
  m.def(
      "eye",
      [](std::int64_t n, const py::kwargs& kwargs) {
        const auto options = creation_options(kwargs, "eye");
        return finish(eye(n, options.dtype.value_or(default_float_dtype())), options);
      },
      "n"_a);
  m.def(
      "randint",
      [](const py::args& args, const py::kwargs& kwargs) {
        // randint(high, size) or randint(low, high, size), as torch.randint.
        if (args.size() != 2 && args.size() != 3)
          throw TypeError("randint(low=0, high, size): expected 2 or 3 positional arguments");
        const std::int64_t low = args.size() == 3 ? int64_arg(args[0], "randint: low") : 0;
        const std::int64_t high = int64_arg(args[args.size() - 2], "randint: high");
        const auto options = creation_options(kwargs, "randint");
        return finish(randint(low, high, shape_arg(args[args.size() - 1], "randint"), options.dtype.value_or(DType::I64)),
                      options);
      },
      "Integers uniform in [low, high) from the generator kael.manual_seed seeds.");
  m.def("get_default_dtype", [] { return dtype_object(default_float_dtype()); },
        "The dtype Python floats and the float creation functions give (kael.float32 unless set).");
  m.def(
      "set_default_dtype",
      [](const py::object& dtype) {
        const DType d = dtype_arg(dtype, DType::F32);
        if (d != DType::F32 && d != DType::F64)
          throw TypeError(str("set_default_dtype: only float32 and float64 can be the default, not ", dtype_name(d)));
        set_default_float_dtype(d);
      },
      "d"_a, "Sets the dtype of Python floats in kael.tensor and of zeros/ones/rand/randn/... without a dtype.");
  m.def("manual_seed", [](const py::object& seed) { manual_seed(seed_arg(seed, "manual_seed: seed")); }, "seed"_a,
        "Reseeds the one process-wide generator that rand, randn, randint and dropout draw from; a seed in "
        "-2**63 .. 2**64 - 1, negatives taken modulo 2**64 as torch.manual_seed takes them.");
  m.def("set_num_threads", &set_num_threads, "n"_a,
        "Threads the library's ops (and the engine) compute on, the caller included; 0 or less: one per "
        "physical core. Results do not depend on it.");
  m.def("get_num_threads", &get_num_threads, "Threads the library's ops compute on.");
  m.def("set_float32_matmul_precision", [](const std::string& precision) { set_float32_matmul_precision(precision); },
        "precision"_a,
        "How matmul and linear multiply float32 matrices, forward and backward (torch's setting): \"highest\" "
        "(the default) and \"high\" (TF32 on torch's GPUs; on this CPU as \"highest\") in float32; \"medium\" "
        "with bfloat16 operands and float32 sums, where the CPU has AMX-BF16 or AVX512-BF16 (else as "
        "\"highest\"). Process-wide.");
  m.def("get_float32_matmul_precision", &get_float32_matmul_precision,
        "The float32 matmul precision set_float32_matmul_precision set: \"highest\", \"high\" or \"medium\".");
  m.def(
      "promote_types", [](const py::object& a, const py::object& b) {
        return dtype_object(promote_types(dtype_arg(a, DType::F32), dtype_arg(b, DType::F32)));
      },
      "type1"_a, "type2"_a);
  m.def(
      "broadcast_shapes",
      [](const py::args& shapes) {
        Shape out;
        for (const py::handle shape : shapes) out = broadcast_shapes(out, shape_arg(shape, "broadcast_shapes"));
        return py::tuple(py::cast(out));
      });
  m.def("is_tensor", [](const py::object& object) { return py::isinstance<Tensor>(object); }, "obj"_a);
  m.def("numel", [](const Tensor& t) { return t.numel(); }, "input"_a);

  // --- joining and indexing ---
  m.def("cat", [](const py::object& tensors, int dim) { return cat(tensor_list(tensors, "cat"), dim); }, "tensors"_a,
        "dim"_a = 0);
  m.def("stack", [](const py::object& tensors, int dim) { return stack(tensor_list(tensors, "stack"), dim); },
        "tensors"_a, "dim"_a = 0);
  m.def("index_select", &index_select, "input"_a, "dim"_a, "index"_a);
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("index_select", &index_select, "dim"_a, "index"_a);

  // --- neural-network functions (kael.nn.functional) ---
  m.def(
      "linear",
      [](const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
        py::gil_scoped_release release;
        return linear(x, weight, bias.value_or(Tensor()));
      },
      "input"_a, "weight"_a, "bias"_a = py::none(), "input (..., in) @ weight (out, in)^T + bias (out).");
  m.def(
      "layer_norm",
      [](const Tensor& x, const py::object& normalized_shape, const std::optional<Tensor>& weight,
         const std::optional<Tensor>& bias, double eps) {
        return layer_norm(x, shape_arg(normalized_shape, "layer_norm"), weight.value_or(Tensor()), bias.value_or(Tensor()),
                          eps);
      },
      "input"_a, "normalized_shape"_a, "weight"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5);
  m.def("embedding", [](const Tensor& input, const Tensor& weight) { return embedding(input, weight); }, "input"_a,
        "weight"_a, "Rows of weight (num, dim) picked by the integer ids in input: (ids..., dim).");
  m.def("dropout", [](const Tensor& input, double p, bool training) { return dropout(input, p, training); }, "input"_a,
        "p"_a = 0.5, "training"_a = true, "Zeroes elements with probability p, scales the rest by 1/(1-p).");
}

}  // namespace kael::python
