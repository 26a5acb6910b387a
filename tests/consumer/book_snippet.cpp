// book_snippet PATH: the book's first tensor snippet, verbatim, against the installed kael.
// tests/python/test_install.py compares the file it writes with the 160 bytes the book shows.
#include <iostream>
#include <string>

#include "kael/kael.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: book_snippet PATH\n";
    return 2;
  }
  const std::string path = argv[1];
  kael::io::save_safetensors(path, {{"b", kael::ones({2, 2})}, {"a", kael::arange(0, 3, 1, kael::DType::I64)}});
  return 0;
}
