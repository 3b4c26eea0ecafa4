#include "latgov/perf_ring.hpp"

#include "latgov/sysroot.hpp"

#include <cerrno>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

namespace latgov {

namespace {

const perf_event_mmap_page* meta(const void* map) {
    return static_cast<const perf_event_mmap_page*>(map);
}

} // namespace

Result<PerfRing> PerfRing::map(Fd fd, std::size_t data_pages) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t size = page * (data_pages + 1);
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED)
        return make_error("Failed to map the perf ring buffer: " + errno_message(errno));
    return PerfRing(std::move(fd), map, size);
}

const unsigned char* PerfRing::data() const {
    return static_cast<const unsigned char*>(map_) + meta(map_)->data_offset;
}

std::uint64_t PerfRing::data_size() const {
    return meta(map_)->data_size;
}

std::uint64_t PerfRing::head() const {
    return __atomic_load_n(&meta(map_)->data_head, __ATOMIC_ACQUIRE);
}

std::uint64_t PerfRing::tail() const {
    return meta(map_)->data_tail;
}

void PerfRing::set_tail(std::uint64_t tail) {
    __atomic_store_n(&static_cast<perf_event_mmap_page*>(map_)->data_tail, tail, __ATOMIC_RELEASE);
}

PerfRing::PerfRing(PerfRing&& other) noexcept
    : fd_(std::move(other.fd_)), map_(std::exchange(other.map_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PerfRing& PerfRing::operator=(PerfRing&& other) noexcept {
    if (this != &other) {
        unmap();
        fd_ = std::move(other.fd_);
        map_ = std::exchange(other.map_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

PerfRing::~PerfRing() {
    unmap();
}

void PerfRing::unmap() {
    if (map_)
        ::munmap(map_, size_);
    map_ = nullptr;
}

} // namespace latgov
