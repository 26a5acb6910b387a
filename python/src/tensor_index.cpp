// kael.Tensor's views and subscripts: view/reshape/permute/... as PyTorch's, and t[...] with
// ints, slices (positive steps), None, Ellipsis, one integer tensor or a boolean mask. Basic
// subscripts give views that share memory; t[...] = value writes through them.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/tensor/autograd.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

std::string type_name(const py::handle& object) { return py::str(py::type::of(object).attr("__name__")); }

bool is_int(const py::handle& item) {
  return PyLong_Check(item.ptr()) ? !PyBool_Check(item.ptr())
                                  : (!py::isinstance<Tensor>(item) && PyIndex_Check(item.ptr()) != 0);
}

// A list or tuple of ints inside a subscript is an integer index, as in NumPy.
Tensor index_tensor(const py::handle& item) {
  if (py::isinstance<Tensor>(item)) return item.cast<Tensor>();
  std::vector<std::int64_t> ids;
  for (const py::handle id : item) ids.push_back(int64_arg(id, "index"));
  return from_vector(ids, {static_cast<std::int64_t>(ids.size())});
}

bool is_advanced(const py::handle& item) {
  return py::isinstance<Tensor>(item) || py::isinstance<py::list>(item);
}

// The flat positions (I64, (n)) of the true elements of a BOOL mask.
Tensor true_positions(const Tensor& mask) {
  const auto values = mask.contiguous().to_vector<bool>();
  std::vector<std::int64_t> positions;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i]) positions.push_back(static_cast<std::int64_t>(i));
  return from_vector(positions, {static_cast<std::int64_t>(positions.size())});
}

// Negative ids counted from the end, as t[ids] does in torch and NumPy (index_select does not);
// ids below -size stay negative for index_select to refuse.
Tensor from_end(const Tensor& ids, std::int64_t size) {
  std::vector<std::int64_t> values = ids.contiguous().to_vector<std::int64_t>();
  for (auto& id : values)
    if (id < 0 && id >= -size) id += size;
  return from_vector(values, ids.shape());
}

// t[index] along `dim` for an integer tensor or a mask over dims dim.. dim+mask.dim()-1.
Tensor advanced(const Tensor& t, int dim, const Tensor& index) {
  Shape shape = t.shape();
  if (index.dtype() == DType::BOOL) {
    const auto first = shape.begin() + dim;
    if (dim + index.dim() > t.dim() || !std::equal(index.shape().begin(), index.shape().end(), first))
      throw IndexError(str("index: mask of shape ", shape_to_string(index.shape()), " does not match shape ",
                           shape_to_string(t.shape()), " at dim ", dim));
    Shape flat(shape.begin(), first);
    flat.push_back(index.numel());
    flat.insert(flat.end(), first + index.dim(), shape.end());
    return index_select(t.reshape(flat), dim, true_positions(index));
  }
  if (is_floating(index.dtype()))
    throw IndexError(str("index: tensors used as indices must be integer or bool, not ", dtype_name(index.dtype())));
  Tensor picked = index_select(t, dim, from_end(index.reshape({-1}).to(DType::I64), shape[static_cast<std::size_t>(dim)]));
  Shape out(shape.begin(), shape.begin() + dim);
  out.insert(out.end(), index.shape().begin(), index.shape().end());
  out.insert(out.end(), shape.begin() + dim + 1, shape.end());
  return picked.reshape(out);
}

// The dims a subscript item consumes (None and Ellipsis none; a mask its own dim).
int consumed(const py::handle& item) {
  if (item.is_none() || item.ptr() == Py_Ellipsis) return 0;
  if (py::isinstance<Tensor>(item) && item.cast<Tensor>().dtype() == DType::BOOL) return item.cast<Tensor>().dim();
  return 1;
}

struct Indexed {
  Tensor result;
  bool is_view = true;  // false once a tensor index copied
};

Indexed subscript(const Tensor& t, const py::handle& key) {
  std::vector<py::handle> items;
  if (py::isinstance<py::tuple>(key)) {
    for (const py::handle item : key) items.push_back(item);
  } else {
    items.push_back(key);
  }
  int used = 0, ellipses = 0, tensors = 0;
  for (const auto& item : items) {
    used += consumed(item);
    ellipses += item.ptr() == Py_Ellipsis;
    tensors += is_advanced(item);
  }
  if (ellipses > 1) throw IndexError("index: an index can only have a single ellipsis ('...')");
  if (tensors > 1) throw IndexError("index: kael takes one tensor or list index per subscript");
  if (used > t.dim())
    throw IndexError(str("index: too many indices for a tensor of dimension ", t.dim(), " (shape ",
                         shape_to_string(t.shape()), ")"));
  Indexed out{t};
  int dim = 0;
  for (const auto& item : items) {
    if (item.ptr() == Py_Ellipsis) {
      dim += t.dim() - used;
    } else if (item.is_none()) {
      out.result = out.result.unsqueeze(dim++);
    } else if (PySlice_Check(item.ptr())) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      if (step <= 0) throw ValueError(str("index: slice step must be positive, got ", step));
      PySlice_AdjustIndices(static_cast<Py_ssize_t>(out.result.size(dim)), &start, &stop, step);
      out.result = out.result.slice(dim++, start, stop, step);
    } else if (is_int(item)) {
      out.result = out.result.select(dim, int64_arg(item, "index"));
    } else if (is_advanced(item)) {
      const Tensor index = index_tensor(item);
      out.result = advanced(out.result, dim, index);
      dim += index.dtype() == DType::BOOL ? 1 : index.dim();
      out.is_view = false;
    } else {
      throw IndexError(str("index: only ints, slices, None, ..., integer or bool tensors and lists of ints are "
                           "valid indices, not ", type_name(item)));
    }
  }
  return out;
}

void assign(Tensor& t, const py::handle& key, const py::handle& value) {
  // t[mask] = value: where, written back in place.
  if (py::isinstance<Tensor>(key) && key.cast<Tensor>().dtype() == DType::BOOL) {
    Tensor mask = key.cast<Tensor>();
    if (mask.dim() < t.dim()) {  // a mask over the leading dims: align it from the left
      Shape shape = mask.shape();
      shape.resize(static_cast<std::size_t>(t.dim()), 1);
      mask = mask.reshape(shape);
    }
    const Tensor source = py::isinstance<Tensor>(value) ? value.cast<Tensor>() : operand_like(value, t, "index_put");
    t.copy_(where(mask, source.to(t.dtype()), t));
    return;
  }
  const bool value_has_history = py::isinstance<Tensor>(value) && value.cast<Tensor>().requires_grad();
  if (autograd::grad_mode_enabled() && (t.requires_grad() || value_has_history)) {
    // Through autograd, as torch: t takes the history of t with the indexed elements replaced
    // (as_strided_scatter), found by indexing a tensor of t's shape laid out contiguously.
    const Tensor probe = Tensor::empty(t.dtype(), t.shape());
    const Indexed place = subscript(probe, key);
    if (!place.is_view) throw IndexError("index: assignment through a tensor or list index is not supported (use a mask)");
    const std::int64_t offset = (place.result.raw_data() - probe.raw_data()) / static_cast<std::int64_t>(t.element_size());
    const Tensor source = py::isinstance<Tensor>(value) ? value.cast<Tensor>() : operand_like(value, t, "index_put");
    t.copy_(as_strided_scatter(t, source.to(t.dtype()), place.result.shape(), place.result.strides(), offset));
    return;
  }
  Indexed target = subscript(t, key);
  if (!target.is_view) throw IndexError("index: assignment through a tensor or list index is not supported (use a mask)");
  if (auto s = scalar_arg(value, "index_put: value")) {
    target.result.fill_(s->value);
  } else if (py::isinstance<Tensor>(value)) {
    target.result.copy_(value.cast<Tensor>());
  } else {
    target.result.copy_(tensor_from_object(value));
  }
}

Shape sizes(const py::args& args, const char* op) { return shape_from_args(args, op); }

}  // namespace

void init_tensor_index(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("__getitem__", [](const Tensor& t, const py::object& key) { return subscript(t, key).result; })
      .def("__iter__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
             py::list rows;  // views along dim 0, as torch's unbind
             for (std::int64_t i = 0; i < t.size(0); ++i) rows.append(t.select(0, i));
             return py::iter(rows);
           })
      .def("__setitem__", [](Tensor& t, const py::object& key, const py::object& value) { assign(t, key, value); })
      .def("view", [](const Tensor& t, const py::args& shape) { return t.view(sizes(shape, "view")); },
           "A tensor of the given shape (one size may be -1) over the same memory.")
      .def("reshape", [](const Tensor& t, const py::args& shape) { return t.reshape(sizes(shape, "reshape")); },
           "view() when the layout allows, else a copy.")
      .def("view_as", [](const Tensor& t, const Tensor& other) { return t.view(other.shape()); }, "other"_a)
      .def("reshape_as", [](const Tensor& t, const Tensor& other) { return t.reshape(other.shape()); }, "other"_a)
      .def("expand", [](const Tensor& t, const py::args& shape) { return t.expand(sizes(shape, "expand")); },
           "A broadcast view: size-1 dims repeat without copying (-1 keeps a size).")
      .def("expand_as", [](const Tensor& t, const Tensor& other) { return t.expand(other.shape()); }, "other"_a)
      .def("permute",
           [](const Tensor& t, const py::args& dims) {
             std::vector<int> order;
             for (auto d : sizes(dims, "permute")) order.push_back(static_cast<int>(d));
             return t.permute(order);
           })
      .def(
          "flatten",
          [](const Tensor& t, int start_dim, int end_dim) {
            if (t.dim() == 0) return t.reshape({1});
            const int n = t.dim();
            const int first = start_dim < 0 ? start_dim + n : start_dim, last = end_dim < 0 ? end_dim + n : end_dim;
            if (first < 0 || last >= n || first > last)
              throw IndexError(str("flatten: dims ", start_dim, "..", end_dim, " are out of range for ", n, " dims"));
            Shape shape(t.shape().begin(), t.shape().begin() + first);
            shape.push_back(-1);
            shape.insert(shape.end(), t.shape().begin() + last + 1, t.shape().end());
            if (t.numel() == 0) {
              std::int64_t merged = 1;
              for (int d = first; d <= last; ++d) merged *= t.size(d);
              shape[static_cast<std::size_t>(first)] = merged;
            }
            return t.reshape(shape);
          },
          "start_dim"_a = 0, "end_dim"_a = -1)
      .def("transpose", [](const Tensor& t, int dim0, int dim1) { return t.transpose(dim0, dim1); }, "dim0"_a, "dim1"_a)
      .def("t",
           [](const Tensor& t) {
             if (t.dim() > 2) throw ValueError(str("t: expects a tensor of at most 2 dims, got shape ", shape_to_string(t.shape())));
             return t.dim() < 2 ? t : t.transpose(0, 1);
           })
      .def_property_readonly("T", [](const Tensor& t) { return t.T(); }, "The dims reversed.")
      .def("unsqueeze", &Tensor::unsqueeze, "dim"_a)
      .def("squeeze",
           [](const Tensor& t, const py::object& dim) { return dim.is_none() ? t.squeeze() : t.squeeze(int_arg(dim, "squeeze: dim")); },
           "dim"_a = py::none())
      .def("select", &Tensor::select, "dim"_a, "index"_a)
      .def("narrow", &Tensor::narrow, "dim"_a, "start"_a, "length"_a);
  m.def("transpose", [](const Tensor& t, int dim0, int dim1) { return t.transpose(dim0, dim1); }, "input"_a, "dim0"_a,
        "dim1"_a);
  m.def("reshape", [](const Tensor& t, const py::object& shape) { return t.reshape(shape_arg(shape, "reshape")); },
        "input"_a, "shape"_a);
  m.def("permute", [](const Tensor& t, const std::vector<int>& dims) { return t.permute(dims); }, "input"_a, "dims"_a);
  m.def("unsqueeze", &Tensor::unsqueeze, "input"_a, "dim"_a);
  m.def("squeeze", [](const Tensor& t, const py::object& dim) { return dim.is_none() ? t.squeeze() : t.squeeze(int_arg(dim, "squeeze: dim")); },
        "input"_a, "dim"_a = py::none());
  m.def("flatten", [](const py::object& t, int start_dim, int end_dim) { return t.attr("flatten")(start_dim, end_dim); },
        "input"_a, "start_dim"_a = 0, "end_dim"_a = -1);
}

}  // namespace kael::python
