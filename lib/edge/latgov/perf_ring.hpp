// A perf event with its ring buffer mapped: the fd, the metadata page and
// the data pages, unmapped and closed together. Records are read straight
// from the mapping; reading them costs no system call and interrupts no CPU.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/result.hpp"

#include <cstddef>
#include <cstdint>

namespace latgov {

class PerfRing {
  public:
    // Maps `data_pages` (a power of two) of ring for the event `fd`.
    static Result<PerfRing> map(Fd fd, std::size_t data_pages);

    int fd() const { return fd_.get(); }
    const unsigned char* data() const;
    std::uint64_t data_size() const;
    std::uint64_t head() const; // acquire: records before it are complete
    std::uint64_t tail() const;
    void set_tail(std::uint64_t tail); // release: the kernel may reuse the space

    PerfRing(PerfRing&& other) noexcept;
    PerfRing& operator=(PerfRing&& other) noexcept;
    PerfRing(const PerfRing&) = delete;
    PerfRing& operator=(const PerfRing&) = delete;
    ~PerfRing();

  private:
    PerfRing(Fd fd, void* map, std::size_t size) : fd_(std::move(fd)), map_(map), size_(size) {}
    void unmap();
    Fd fd_;
    void* map_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace latgov
