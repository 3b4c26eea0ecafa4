// The perf ring records latgovd reads: block_rq_issue samples, which wake
// it on the first request after idle. Rings are built here byte by byte,
// wrapping, as the kernel writes them.
#include "latgov/perf_records.hpp"

#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <linux/perf_event.h>
#include <vector>

using namespace latgov;

namespace {

// A ring's data area of `size` bytes whose positions run on past it, as
// the kernel's data_head and data_tail do.
struct Ring {
    std::vector<unsigned char> data;
    std::uint64_t head = 0;

    explicit Ring(std::size_t size, std::uint64_t start) : data(size), head(start) {}

    void put(const void* bytes, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
            data[(head + i) % data.size()] = static_cast<const unsigned char*>(bytes)[i];
        head += n;
    }
    void record(std::uint32_t type, const std::vector<std::uint64_t>& body) {
        perf_event_header header{};
        header.type = type;
        header.size = static_cast<std::uint16_t>(sizeof header + 8 * body.size());
        put(&header, sizeof header);
        for (auto word : body)
            put(&word, sizeof word);
    }
    // PERF_SAMPLE_TIME then PERF_SAMPLE_RAW (u32 size, the raw bytes with
    // dev at `dev_offset`), the raw bytes padded as the kernel pads them:
    // size and bytes together a multiple of 8, as the whole record.
    void issue_sample(std::uint64_t time, std::uint32_t dev, std::uint32_t dev_offset) {
        std::vector<unsigned char> raw(dev_offset + 4, 0);
        raw.resize(raw.size() + (8 - (4 + raw.size()) % 8) % 8, 0);
        std::memcpy(raw.data() + dev_offset, &dev, sizeof dev);
        const auto raw_size = static_cast<std::uint32_t>(raw.size());
        perf_event_header header{};
        header.type = PERF_RECORD_SAMPLE;
        header.size = static_cast<std::uint16_t>(sizeof header + 8 + 4 + raw.size());
        put(&header, sizeof header);
        put(&time, sizeof time);
        put(&raw_size, sizeof raw_size);
        put(raw.data(), raw.size());
        REQUIRE(header.size % 8 == 0);
    }
};

} // namespace

TEST_CASE("issue samples give each request's CPU, disk and time; other records are skipped") {
    constexpr std::uint32_t dev_offset = 8;
    Ring ring(512, 450);
    const std::uint64_t tail = ring.head;
    ring.issue_sample(1000, 0xfd00000, dev_offset);
    ring.record(PERF_RECORD_LOST, {1, 3});
    ring.issue_sample(2000, 0x1030000, dev_offset);
    std::vector<IssuedRequest> out;
    const auto end =
        read_issue_samples(ring.data.data(), ring.data.size(), tail, ring.head, dev_offset, 3, out);
    CHECK(end == ring.head);
    REQUIRE(out.size() == 2);
    CHECK(out[0].cpu == 3);
    CHECK(out[0].dev == 0xfd00000);
    CHECK(out[0].time_ns == 1000);
    CHECK(out[1].dev == 0x1030000);
    CHECK(out[1].time_ns == 2000);
}
