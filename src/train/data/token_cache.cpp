// The token stream of --data, tokenized once and cached.
//
// Cache file: "KAELTOK1", u64 key length, the key text, u64 documents, u64 token count, the
// tokens (int32, little-endian as in memory), u64 Hash64 of the tokens. The key text lists every
// input file (absolute path, size, modification time in ns) and the tokenizer files (size and
// Hash64 of their contents), so any change to them makes a new key. The file is named after the
// key's hash and written atomically; one that fails to match is ignored and rewritten.
#include <sys/stat.h>

#include <cstring>

#include "io/atomic_write.hpp"
#include "io/posix_file.hpp"
#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/text/tokenizer.hpp"
#include "kael/train/data.hpp"
#include "train/data/hash.hpp"
#include "train/data/text_pieces.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'K', 'A', 'E', 'L', 'T', 'O', 'K', '1'};

std::string cache_key(std::span<const fs::path> files, std::span<const fs::path> tokenizer_files) {
  std::string key = "kael token stream v1\n";
  for (const fs::path& file : files) {
    struct stat info {};
    const fs::path absolute = fs::absolute(file).lexically_normal();
    if (::stat(file.c_str(), &info) != 0) throw Error(str("cannot stat data file '", file.string(), "'"));
    const long long mtime_ns = static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL + info.st_mtim.tv_nsec;
    key += str("data ", absolute.string(), " size ", info.st_size, " mtime ", mtime_ns, "\n");
  }
  for (const fs::path& file : tokenizer_files) {
    const std::string bytes = read_regular_file(file, "tokenizer file", text::kMaxTokenizerFileBytes);
    Hash64 hash;
    hash.update(bytes);
    key += str("tokenizer ", file.filename().string(), " size ", bytes.size(), " hash ", hash.digest(), "\n");
  }
  return key;
}

fs::path cache_path(const fs::path& cache_dir, const std::string& key) {
  Hash64 hash;
  hash.update(key);
  char name[40];
  std::snprintf(name, sizeof(name), "tokens-%016llx.bin", static_cast<unsigned long long>(hash.digest()));
  return cache_dir / name;
}

std::uint64_t tokens_hash(std::span<const std::int32_t> tokens) {
  Hash64 hash;
  hash.update(std::as_bytes(tokens));
  return hash.digest();
}

// The cached stream, or false when the file is absent, not a regular file (a FIFO there is
// never waited on), shorter than it says, or does not match `key` exactly.
bool read_cache(const fs::path& path, const std::string& key, TokenStream& out) {
  try {
    const io::PosixFile file(path, "token cache");
    std::uint64_t offset = 0;
    const auto read = [&](void* p, std::uint64_t n) {
      file.read_exact(offset, std::span(static_cast<std::byte*>(p), static_cast<std::size_t>(n)));
      offset += n;
    };
    char magic[8];
    std::uint64_t key_length = 0, documents = 0, count = 0, checksum = 0;
    read(magic, 8);
    if (std::memcmp(magic, kMagic, 8) != 0) return false;
    read(&key_length, 8);
    if (key_length != key.size()) return false;
    std::string stored(key_length, '\0');
    read(stored.data(), key_length);
    if (stored != key) return false;
    read(&documents, 8);
    read(&count, 8);
    const auto expected_size = 8 + 8 + key_length + 8 + 8 + count * 4 + 8;
    if (count > (std::uint64_t{1} << 40) || file.size() != expected_size) return false;
    std::vector<std::int32_t> tokens(count);
    read(tokens.data(), count * 4);
    read(&checksum, 8);
    if (checksum != tokens_hash(tokens)) return false;
    out.tokens = std::move(tokens);
    out.documents = static_cast<std::int64_t>(documents);
    out.from_cache = true;
    return true;
  } catch (const Error&) {
    return false;  // absent, not a regular file, or it ended early: rewritten by the caller
  }
}

void write_cache(const fs::path& path, const std::string& key, const TokenStream& stream) {
  const std::uint64_t key_length = key.size(), documents = static_cast<std::uint64_t>(stream.documents),
                      count = stream.tokens.size(), checksum = tokens_hash(stream.tokens);
  const auto word = [](const std::uint64_t& value) { return std::as_bytes(std::span(&value, 1)); };
  io::write_atomically(path, {std::as_bytes(std::span(kMagic)), word(key_length),
                              std::as_bytes(std::span(key.data(), key.size())), word(documents), word(count),
                              std::as_bytes(std::span(stream.tokens)), word(checksum)});
}

// Every document's ids followed by kEndOfText, tokenized in pieces on all threads.
TokenStream tokenize(std::span<const fs::path> files, const text::Tokenizer& tokenizer) {
  std::vector<std::string> documents;
  for (const fs::path& file : files)
    for (auto& document : read_documents(file)) documents.push_back(std::move(document));

  std::vector<std::string_view> pieces;
  std::vector<std::size_t> document_end;  // one past each document's last piece
  for (const std::string& document : documents) {
    for (const auto piece : cut_text(document, kPieceBytes)) pieces.push_back(piece);
    document_end.push_back(pieces.size());
  }
  const auto ids = encode_pieces(tokenizer, pieces);

  TokenStream stream;
  stream.documents = static_cast<std::int64_t>(documents.size());
  std::size_t piece = 0;
  for (const std::size_t end : document_end) {
    for (; piece < end; ++piece) stream.tokens.insert(stream.tokens.end(), ids[piece].begin(), ids[piece].end());
    stream.tokens.push_back(text::kEndOfText);
  }
  if (stream.tokens.size() == documents.size())
    throw ValueError("the data holds no text: every document is empty");
  return stream;
}

}  // namespace

TokenStream tokenize_files(std::span<const fs::path> files, const text::Tokenizer& tokenizer,
                           std::span<const fs::path> tokenizer_files, const fs::path& cache_dir) {
  if (cache_dir.empty()) return tokenize(files, tokenizer);
  const std::string key = cache_key(files, tokenizer_files);
  const fs::path path = cache_path(cache_dir, key);
  TokenStream stream;
  if (read_cache(path, key, stream)) return stream;
  stream = tokenize(files, tokenizer);
  std::error_code error;
  fs::create_directories(cache_dir, error);
  if (error) throw Error(str("cannot create the token cache directory '", cache_dir.string(), "': ", error.message()));
  write_cache(path, key, stream);
  // Streams of older keys are of no further use.
  for (const auto& entry : fs::directory_iterator(cache_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.path() != path && name.starts_with("tokens-") && name.ends_with(".bin")) fs::remove(entry.path(), error);
  }
  return stream;
}

}  // namespace kael::train
