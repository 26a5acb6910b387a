// The JSON header: metadata, one entry per tensor, and the tiling of the data section.
#include "io/header.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "io/header_json.hpp"
#include "kael/core/error.hpp"

namespace kael::io {

namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

// A JSON number that is an exact non-negative integer fitting int64, written without a sign.
// nlohmann stores non-negative literals as unsigned, negative ones (and "-0") as signed, and
// anything with a fraction, an exponent or too many digits as a double, which is refused
// rather than rounded.
std::uint64_t to_count(const json& value, std::string_view source, std::string_view what) {
  if (value.is_number_unsigned()) {
    const auto n = value.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(INT64_MAX))
      throw ValueError(str(source, ": ", what, " is ", n, ", larger than the int64 maximum"));
    return n;
  }
  // Signed storage means a minus sign, even on "-0", which the reference reader refuses too.
  if (value.is_number_integer())
    throw ValueError(str(source, ": ", what, " is ", value.get<std::int64_t>() == 0 ? "-0" : value.dump(),
                         ", expected a non-negative integer"));
  if (value.is_number_float())
    throw ValueError(str(source, ": ", what, " is ", value.dump(), ", expected an integer"));
  throw ValueError(str(source, ": ", what, " is a JSON ", value.type_name(), ", expected a non-negative integer"));
}

// null is no metadata, as the reference reader (an optional map) reads it.
std::map<std::string, std::string> parse_metadata(const json& value, std::string_view source) {
  if (value.is_null()) return {};
  if (!value.is_object())
    throw ValueError(str(source, ": __metadata__ is a JSON ", value.type_name(), ", expected an object of strings"));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      throw ValueError(str(source, ": __metadata__ value of \"", key, "\" is a JSON ", item.type_name(),
                           ", expected a string"));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

const json& field(const json& entry, const char* name, std::string_view where) {
  auto it = entry.find(name);
  if (it == entry.end()) throw ValueError(str(where, " has no \"", name, "\" field"));
  return *it;
}

TensorInfo parse_entry(const std::string& name, const json& entry, std::string_view source) {
  const std::string where = str(source, ": tensor '", name, "'");
  if (!entry.is_object())
    throw ValueError(str(where, " is a JSON ", entry.type_name(), ", expected an object with dtype, shape, data_offsets"));
  for (const auto& item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      throw ValueError(str(where, " has an unknown field \"", item.key(), "\" (expected dtype, shape, data_offsets)"));

  TensorInfo info{name, DType::F32, {}, 0, 0};
  const json& dtype = field(entry, "dtype", where);
  if (!dtype.is_string()) throw ValueError(str(where, ": dtype is a JSON ", dtype.type_name(), ", expected a string"));
  const auto parsed = dtype_from_name(dtype.get_ref<const std::string&>());
  if (!parsed)
    throw TypeError(str(where, " has unsupported dtype \"", dtype.get_ref<const std::string&>(),
                        "\" (supported: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64)"));
  info.dtype = *parsed;

  const json& shape = field(entry, "shape", where);
  if (!shape.is_array()) throw ValueError(str(where, ": shape is a JSON ", shape.type_name(), ", expected an array"));
  for (std::size_t i = 0; i < shape.size(); ++i)
    info.shape.push_back(static_cast<std::int64_t>(to_count(shape[i], where, str("shape[", i, "]"))));

  const json& offsets = field(entry, "data_offsets", where);
  if (!offsets.is_array() || offsets.size() != 2)
    throw ValueError(str(where, ": data_offsets is ", offsets.dump(), ", expected [begin, end]"));
  info.begin = to_count(offsets[0], where, "data_offsets[0]");
  info.end = to_count(offsets[1], where, "data_offsets[1]");
  if (info.begin > info.end)
    throw ValueError(str(where, ": data_offsets [", info.begin, ", ", info.end, "] are reversed"));

  // numel * element size must equal the byte range exactly, computed without wrapping: a shape
  // whose true product overflows but wraps to the range size would otherwise pass.
  std::uint64_t numel = 1;
  for (std::int64_t dim : info.shape)
    if (!checked_mul(numel, static_cast<std::uint64_t>(dim), numel) || numel > static_cast<std::uint64_t>(INT64_MAX))
      throw ValueError(str(where, ": shape ", shape_to_string(info.shape), " has more than 2^63 elements"));
  std::uint64_t nbytes = 0;
  if (!checked_mul(numel, dtype_size(info.dtype), nbytes))
    throw ValueError(str(where, ": shape ", shape_to_string(info.shape), " of ", dtype_name(info.dtype),
                         " needs more than 2^64 bytes"));
  if (info.end - info.begin != nbytes)
    throw ValueError(str(where, ": shape ", shape_to_string(info.shape), " of ", dtype_name(info.dtype), " needs ",
                         nbytes, " bytes, but data_offsets [", info.begin, ", ", info.end, "] hold ",
                         info.end - info.begin));
  return info;
}

// Sorted by offset, the tensors must cover [0, data_size) with no gap and no overlap, so every
// byte of the file belongs to exactly one tensor and no two tensors share (alias) bytes.
void check_tiling(const std::vector<TensorInfo>& tensors, std::uint64_t data_size, std::string_view source) {
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors) {
    if (t.end > data_size)
      throw ValueError(str(source, ": tensor '", t.name, "' data_offsets [", t.begin, ", ", t.end,
                           "] extend past the data section (", data_size, " bytes)"));
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin > covered)
      throw ValueError(str(source, ": bytes [", covered, ", ", t->begin, ") of the data section, before tensor '",
                           t->name, "', belong to no tensor"));
    if (t->begin < covered) {
      const bool alias = previous->begin == t->begin && previous->end == t->end;
      throw ValueError(str(source, ": tensor '", t->name, "' [", t->begin, ", ", t->end, ") ",
                           alias ? "aliases" : "overlaps", " tensor '", previous->name, "' [", previous->begin,
                           ", ", previous->end, ")"));
    }
    covered = t->end;
    previous = t;
  }
  if (covered != data_size)
    throw ValueError(str(source, ": ", data_size - covered, " trailing bytes after the last tensor (tensors end at ",
                         covered, ", the data section has ", data_size, " bytes)"));
}

}  // namespace

Header validate_header(std::string_view text, std::uint64_t file_size, std::string_view source) {
  const json document = parse_header_json(text, source);
  if (!document.is_object())
    throw ValueError(str(source, ": header is a JSON ", document.type_name(), ", expected an object"));
  Header header;
  header.header_length = text.size();
  header.file_size = file_size;
  for (const auto& [key, value] : document.items()) {  // std::map order: sorted by name
    if (key == kMetadataKey) header.metadata = parse_metadata(value, source);
    else header.tensors.push_back(parse_entry(key, value, source));
  }
  check_tiling(header.tensors, file_size - data_start(header), source);
  return header;
}

}  // namespace kael::io
