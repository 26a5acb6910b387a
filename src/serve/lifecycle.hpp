// Where a `kael serve` process is in its life, for the gate (gate.hpp) and /health: it listens
// while the model loads (loading: /health is 503, so a load balancer or Kubernetes sends it
// nothing yet), serves (ready), and on SIGTERM or SIGINT stops admitting while running
// requests finish (draining: /health and new requests are 503).
#pragma once

#include <atomic>
#include <string_view>

namespace kael::serve {

enum class Phase { loading, ready, draining };

constexpr std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::loading: return "loading";
    case Phase::ready: return "ok";
    case Phase::draining: return "draining";
  }
  return "unknown";
}

class Lifecycle {
 public:
  // Release/acquire: what was set up before set(Phase::ready) (the routes' context) is seen
  // complete by every worker thread that reads ready afterwards.
  void set(Phase phase) { phase_.store(phase, std::memory_order_release); }
  Phase phase() const { return phase_.load(std::memory_order_acquire); }

 private:
  std::atomic<Phase> phase_{Phase::loading};
};

}  // namespace kael::serve
