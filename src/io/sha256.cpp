// SHA-256 as FIPS 180-4 specifies it: 64-byte blocks, big-endian words, 64 rounds. Plain code:
// it hashes the bundled model (about 16 MB) once per load, which takes well under a second.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "io/posix_file.hpp"
#include "io/sha256.hpp"
#include "kael/core/error.hpp"
#include "kael/io/checksums.hpp"

namespace kael::io {
namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::update(std::span<const std::byte> bytes) {
  total_bytes_ += bytes.size();
  for (const std::byte b : bytes) {
    block_[block_size_++] = static_cast<std::uint8_t>(b);
    if (block_size_ == 64) {
      compress();
      block_size_ = 0;
    }
  }
}

std::string Sha256::hex_digest() {
  // Padding: 0x80, zeros up to 56 mod 64, then the message length in bits, big-endian.
  const std::uint64_t bits = total_bytes_ * 8;
  block_[block_size_++] = 0x80;
  if (block_size_ > 56) {
    while (block_size_ < 64) block_[block_size_++] = 0;
    compress();
    block_size_ = 0;
  }
  while (block_size_ < 56) block_[block_size_++] = 0;
  for (int i = 7; i >= 0; --i) block_[block_size_++] = static_cast<std::uint8_t>(bits >> (8 * i));
  compress();
  block_size_ = 0;

  std::string hex(64, '0');
  for (int i = 0; i < 8; ++i) std::snprintf(hex.data() + 8 * i, 9, "%08x", state_[i]);
  hex.resize(64);
  return hex;
}

void Sha256::compress() {
  std::array<std::uint32_t, 64> w;
  for (int i = 0; i < 16; ++i)
    w[i] = std::uint32_t{block_[4 * i]} << 24 | std::uint32_t{block_[4 * i + 1]} << 16 |
           std::uint32_t{block_[4 * i + 2]} << 8 | std::uint32_t{block_[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::array<std::uint32_t, 8> v = state_;  // a b c d e f g h
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
    const std::uint32_t choose = (v[4] & v[5]) ^ (~v[4] & v[6]);
    const std::uint32_t t1 = v[7] + s1 + choose + kRound[i] + w[i];
    const std::uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
    const std::uint32_t majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    const std::uint32_t t2 = s0 + majority;
    v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
  }
  for (int i = 0; i < 8; ++i) state_[i] += v[i];
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256 hash;
  hash.update(bytes);
  return hash.hex_digest();
}

std::string sha256_file_hex(const std::filesystem::path& file) {
  const PosixFile in(file, "file to check");  // a FIFO or device is refused, never waited on
  const std::uint64_t size = in.size();
  Sha256 hash;
  std::vector<std::byte> buffer(1 << 16);
  for (std::uint64_t offset = 0; offset < size; offset += buffer.size()) {
    const std::span<std::byte> chunk(buffer.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), size - offset)));
    in.read_exact(offset, chunk);
    hash.update(chunk);
  }
  return hash.hex_digest();
}

}  // namespace kael::io
