#include "text/byte_symbols.hpp"

#include <array>

#include "kael/core/utf8.hpp"

namespace kael::text {
namespace {

constexpr bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> kByteToSymbol = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) table[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
  return table;
}();

// Symbols are below U+0100 + 68, so a flat inverse table covers them all.
constexpr std::size_t kSymbolLimit = 0x100 + 68;
constexpr std::array<std::int16_t, kSymbolLimit> kSymbolToByte = [] {
  std::array<std::int16_t, kSymbolLimit> table{};
  for (auto& entry : table) entry = -1;
  for (unsigned b = 0; b < 256; ++b) table[kByteToSymbol[b]] = static_cast<std::int16_t>(b);
  return table;
}();

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // symbols are all below U+0800
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

char32_t byte_to_symbol(std::uint8_t byte) { return kByteToSymbol[byte]; }

std::optional<std::uint8_t> symbol_to_byte(char32_t symbol) {
  if (symbol >= kSymbolLimit || kSymbolToByte[symbol] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kSymbolToByte[symbol]);
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  std::string bytes;
  bytes.reserve(symbols.size());
  const auto* data = reinterpret_cast<const unsigned char*>(symbols.data());
  for (std::size_t pos = 0; pos < symbols.size();) {
    const utf8::Decoded d = utf8::decode(data + pos, symbols.size() - pos);
    if (d.cp == utf8::kInvalid) return std::nullopt;
    const auto byte = symbol_to_byte(d.cp);
    if (!byte) return std::nullopt;
    bytes += static_cast<char>(*byte);
    pos += d.length;
  }
  return bytes;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, kByteToSymbol[static_cast<unsigned char>(c)]);
  return out;
}

}  // namespace kael::text
