// A program of your own that serves a model over HTTP with kael's server library: OpenAI's
// completions API on a port, until a line (or end of input) arrives on stdin, then a drain.
//   serve MODEL_DIR [PORT]      (PORT 0, the default: a free one, printed)
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "kael/core/error.hpp"
#include "kael/serve/server.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PORT]\n", argv[0]);
    return 2;
  }
  try {
    kael::serve::ServerOptions options;
    options.model_dir = argv[1];
    options.port = argc == 3 ? std::stoi(argv[2]) : 0;
    options.log = [](const std::string& line) { std::fprintf(stderr, "server: %s\n", line.c_str()); };
    kael::serve::Server server(options);  // listening; /health is 503 until load() returns
    server.load();
    std::printf("http://127.0.0.1:%d\n", server.port());
    std::fflush(stdout);

    std::string line;
    std::getline(std::cin, line);
    server.begin_drain();  // new requests get 503; running ones finish (up to 10 s)
    for (int i = 0; i < 200 && server.requests_in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
