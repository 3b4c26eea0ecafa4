// Onset delays: from the first request that activates a queue to the
// constraint written for it, as `latgov status` reports them.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace latgov {

struct OnsetSummary {
    std::size_t count = 0;
    // Meaningful only when count > 0.
    double p50_us = 0;
    double p99_us = 0;
    double max_us = 0;
    // Of `count`, those latgovd handled on the CPU that issued the request.
    std::size_t on_issuing_cpu = 0;
};

class OnsetDelays {
  public:
    // Keeps the newest `capacity` delays.
    explicit OnsetDelays(std::size_t capacity = 1000) : capacity_(capacity) {}
    void record(std::chrono::nanoseconds delay, bool on_issuing_cpu = false);
    OnsetSummary summary() const;

  private:
    struct Delay {
        double us;
        bool on_issuing_cpu;
    };
    std::size_t capacity_;
    std::vector<Delay> delays_; // newest last
};

} // namespace latgov
