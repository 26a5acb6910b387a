// `kael inspect FILE.safetensors [--json] [--stats]`: validates the whole file (header, tiling,
// BOOL bytes) and lists its metadata and tensors, optionally with min/max/mean per tensor.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "kael/io/safetensors.hpp"

namespace kael::cli {
namespace {

struct Options {
  std::string file;
  bool json = false;
  bool stats = false;
};

struct Stats {
  double min, max, mean;
};

template <class T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Every element decoded exactly to float64 (F16/BF16 through their exact float32 decode,
// BOOL as 0/1). NaN propagates to all three results, as in numpy.
template <class Decode>
Stats summarize(const std::byte* data, std::int64_t count, std::size_t element, Decode decode) {
  double lo = INFINITY, hi = -INFINITY;
  long double sum = 0;  // wider accumulator keeps the mean of large tensors accurate
  bool nan = false;
  for (std::int64_t i = 0; i < count; ++i) {
    const double v = decode(data + static_cast<std::size_t>(i) * element);
    if (std::isnan(v)) nan = true;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (nan) return {NAN, NAN, NAN};
  return {lo, hi, static_cast<double>(sum / static_cast<long double>(count))};
}

std::optional<Stats> tensor_stats(const Tensor& tensor) {
  if (tensor.numel() == 0) return std::nullopt;
  const Tensor t = tensor.contiguous();
  const std::byte* p = t.raw_data();
  const std::int64_t n = t.numel();
  const std::size_t size = t.element_size();
  switch (t.dtype()) {
    case DType::BOOL: return summarize(p, n, size, [](const std::byte* q) { return load<std::uint8_t>(q) ? 1.0 : 0.0; });
    case DType::U8: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::uint8_t>(q)); });
    case DType::I8: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::int8_t>(q)); });
    case DType::I16: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::int16_t>(q)); });
    case DType::U16: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::uint16_t>(q)); });
    case DType::I32: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::int32_t>(q)); });
    case DType::U32: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::uint32_t>(q)); });
    case DType::I64: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::int64_t>(q)); });
    case DType::U64: return summarize(p, n, size, [](const std::byte* q) { return double(load<std::uint64_t>(q)); });
    case DType::F16:
      return summarize(p, n, size, [](const std::byte* q) { return double(f16_to_f32(load<std::uint16_t>(q))); });
    case DType::BF16:
      return summarize(p, n, size, [](const std::byte* q) { return double(bf16_to_f32(load<std::uint16_t>(q))); });
    case DType::F32: return summarize(p, n, size, [](const std::byte* q) { return double(load<float>(q)); });
    case DType::F64: return summarize(p, n, size, [](const std::byte* q) { return load<double>(q); });
  }
  return std::nullopt;
}

// JSON has no NaN or infinity: they are written as the strings Python's float() accepts.
nlohmann::ordered_json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

nlohmann::ordered_json to_json(const io::Header& header, const io::SafetensorsFile& file, bool stats) {
  nlohmann::ordered_json out;
  out["metadata"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : header.metadata) out["metadata"][key] = value;
  out["tensors"] = nlohmann::ordered_json::object();
  for (const io::TensorInfo& info : header.tensors) {
    nlohmann::ordered_json entry;
    entry["dtype"] = dtype_name(info.dtype);
    entry["shape"] = info.shape;
    entry["data_offsets"] = {info.begin, info.end};
    if (stats) {
      const auto s = tensor_stats(file.tensors.at(info.name));
      entry["stats"] = s ? nlohmann::ordered_json{{"min", number(s->min)}, {"max", number(s->max)}, {"mean", number(s->mean)}}
                         : nlohmann::ordered_json{{"min", nullptr}, {"max", nullptr}, {"mean", nullptr}};
    }
    out["tensors"][info.name] = std::move(entry);
  }
  return out;
}

std::string format_value(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

void print_table(std::ostream& out, const std::string& path, const io::Header& header, const io::SafetensorsFile& file, bool stats) {
  out << path << ": " << header.tensors.size() << " tensors, " << header.file_size << " bytes, header "
            << header.header_length << " bytes\n";
  out << "metadata:" << (header.metadata.empty() ? " (none)" : "") << "\n";
  for (const auto& [key, value] : header.metadata) out << "  " << key << " = " << value << "\n";
  // Columns: name, dtype, shape, byte range in the data section, and optionally the stats.
  std::vector<std::array<std::string, 4>> rows;
  std::array<std::size_t, 4> widths{};
  for (const io::TensorInfo& info : header.tensors) {
    rows.push_back({info.name, std::string(dtype_name(info.dtype)), shape_to_string(info.shape),
                    str("[", info.begin, ", ", info.end, ")")});
    for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], rows.back()[c].size());
  }
  out << "tensors:" << (rows.empty() ? " (none)" : "") << "\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::string line = " ";
    for (std::size_t c = 0; c < widths.size(); ++c) line += " " + pad(rows[r][c], widths[c]);
    if (stats) {
      const auto s = tensor_stats(file.tensors.at(header.tensors[r].name));
      line += s ? str("  min ", format_value(s->min), "  max ", format_value(s->max), "  mean ", format_value(s->mean))
                : std::string("  (empty)");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

RunFn setup(CLI::App& app) {
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("inspect", "Validate a safetensors file and list its metadata and tensors");
  sub->add_option("file", options->file, "The .safetensors file")->required();
  sub->add_flag("--json", options->json,
                "Print {\"metadata\": {...}, \"tensors\": {name: {\"dtype\", \"shape\", \"data_offsets\"}}}");
  sub->add_flag("--stats", options->stats,
                "Add min, max and mean per tensor (float64; null when empty; NaN/Infinity as strings in JSON)");
  return [options] {
    // The header gives the offsets as written; the full load validates every byte (BOOL values).
    const io::Header header = io::read_safetensors_header(options->file);
    const io::SafetensorsFile file = io::read_safetensors(options->file, io::LoadMode::Mapped);
    // Composed whole before anything is printed: if the file shrank while its mapping was
    // being read, the error replaces the output.
    std::ostringstream out;
    if (options->json)
      out << to_json(header, file, options->stats).dump() << "\n";
    else
      print_table(out, options->file, header, file, options->stats);
    io::check_mappings_intact(str("'", options->file, "'"));
    std::cout << out.str();
    return 0;
  };
}

const Registration kRegistration("inspect", setup);

}  // namespace
}  // namespace kael::cli
