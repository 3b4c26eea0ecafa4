// The perf ring records latgovd reads: block_getrq samples, which wake
// it on the first request after idle. Rings are built here byte by byte,
// wrapping, as the kernel writes them.
#include "latgov/perf_records.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <linux/perf_event.h>
#include <string>
#include <string_view>
#include <utility>
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
    // PERF_SAMPLE_TIME then PERF_SAMPLE_RAW (u32 size, then the raw bytes
    // with dev and rwbs where `format` puts them), padded as the kernel pads
    // them: size and bytes together a multiple of 8, as the whole record.
    void issue_sample(std::uint64_t time, std::uint32_t dev, const TracepointFormat& format,
                      std::string_view rwbs = "") {
        std::vector<unsigned char> raw(
            std::max<std::size_t>(format.dev_offset + 4, format.rwbs_offset + format.rwbs_size), 0);
        raw.resize(raw.size() + (8 - (4 + raw.size()) % 8) % 8, 0);
        const auto type = static_cast<std::uint16_t>(format.id); // common_type
        std::memcpy(raw.data(), &type, sizeof type);
        std::memcpy(raw.data() + format.dev_offset, &dev, sizeof dev);
        std::memcpy(raw.data() + format.rwbs_offset, rwbs.data(),
                    std::min<std::size_t>(rwbs.size(), format.rwbs_size));
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

TEST_CASE("issue samples give each request's CPU, disk and time, other records are skipped") {
    const TracepointFormat format{2096, 8, 0, 0}; // no rwbs: the kind is unknown
    Ring ring(512, 450);
    const std::uint64_t tail = ring.head;
    ring.issue_sample(1000, 0xfd00000, format);
    ring.record(PERF_RECORD_LOST, {1, 3});
    ring.issue_sample(2000, 0x1030000, format);
    std::vector<IssuedRequest> out;
    const auto end = read_issue_samples(ring.data.data(), ring.data.size(), tail, ring.head,
                                        {&format, 1}, 3, out);
    CHECK(end == ring.head);
    REQUIRE(out.size() == 2);
    CHECK(out[0].cpu == 3);
    CHECK(out[0].dev == 0xfd00000);
    CHECK(out[0].time_ns == 1000);
    CHECK(out[1].dev == 0x1030000);
    CHECK(out[1].time_ns == 2000);
}

namespace {

// block_getrq's format as Linux 6.18 gives it (rwbs char[10]).
constexpr std::string_view format_6_18 = R"(name: block_getrq
ID: 2096
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:char rwbs[10];	offset:28;	size:10;	signed:0;
	field:char comm[16];	offset:38;	size:16;	signed:0;
)";

// The same as Debian 12's 6.1 gives it (rwbs char[8]).
constexpr std::string_view format_6_1 = R"(name: block_getrq
ID: 1054
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:char rwbs[8];	offset:28;	size:8;	signed:1;
	field:char comm[16];	offset:36;	size:16;	signed:1;
)";

constexpr std::uint32_t dev_of_nvme = 259u << 20; // 259:0

// block_rq_issue's format as Debian 12's 6.1 gives it: rwbs sits elsewhere.
constexpr std::string_view issue_format_6_1 = R"(name: block_rq_issue
ID: 1061
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:unsigned int bytes;	offset:28;	size:4;	signed:0;
	field:char rwbs[8];	offset:32;	size:8;	signed:1;
	field:char comm[16];	offset:40;	size:16;	signed:1;
	field:__data_loc char[] cmd;	offset:56;	size:4;	signed:1;
)";

} // namespace

TEST_CASE("the tracepoint format gives where dev and rwbs sit, whichever rwbs size") {
    auto format = parse_tracepoint_format("2096\n", format_6_18);
    REQUIRE(format);
    CHECK(format->id == 2096);
    CHECK(format->dev_offset == 8);
    CHECK(format->rwbs_offset == 28);
    CHECK(format->rwbs_size == 10);
    // Older kernels: rwbs[8].
    format = parse_tracepoint_format("1054", format_6_1);
    REQUIRE(format);
    CHECK(format->dev_offset == 8);
    CHECK(format->rwbs_offset == 28);
    CHECK(format->rwbs_size == 8);
    // No rwbs: the request's kind stays unknown, the rest works.
    std::string none(format_6_18);
    const auto rwbs = none.find("\tfield:char rwbs[10]");
    none.erase(rwbs, none.find("\tfield:char comm[16]") - rwbs);
    format = parse_tracepoint_format("2096", none);
    REQUIRE(format);
    CHECK(format->rwbs_size == 0);
    // A bad offset is named.
    std::string bad(format_6_18);
    bad.replace(bad.find("offset:28"), 9, "offset:x");
    format = parse_tracepoint_format("2096", bad);
    REQUIRE_FALSE(format);
    CHECK(format.error().message.find("offset of the rwbs field") != std::string::npos);
    CHECK_FALSE(parse_tracepoint_format("2096", "format:\n"));
    // An id that a record's 16-bit type cannot hold is refused.
    format = parse_tracepoint_format("65536", format_6_18);
    REQUIRE_FALSE(format);
    CHECK(format.error().message.find("65535") != std::string::npos);
    // Without the type that leads every record, records cannot be told apart.
    std::string untyped(format_6_18);
    untyped.replace(untyped.find("offset:0;"), 9, "offset:4;");
    format = parse_tracepoint_format("2096", untyped);
    REQUIRE_FALSE(format);
    CHECK(format.error().message.find("common_type") != std::string::npos);
}

TEST_CASE("one ring holds two tracepoints' records, each read by its own format") {
    auto request = parse_tracepoint_format("1054", format_6_1);
    auto issue = parse_tracepoint_format("1061", issue_format_6_1);
    REQUIRE(request);
    REQUIRE(issue);
    CHECK(issue->rwbs_offset == 32);
    issue->passthrough = true;
    const TracepointFormat formats[] = {*request, *issue};
    Ring ring(1024, 900);
    const std::uint64_t tail = ring.head;
    ring.issue_sample(1, dev_of_nvme, *request, "W"); // writeback: nobody waits
    ring.issue_sample(2, dev_of_nvme, *issue, "N");   // passthrough: its submitter waits
    TracepointFormat other = *issue;                  // a tracepoint latgov did not open
    other.id = 999;
    ring.issue_sample(3, dev_of_nvme, other, "R");
    ring.issue_sample(4, dev_of_nvme + 1, *request, "R");
    std::vector<IssuedRequest> out;
    read_issue_samples(ring.data.data(), ring.data.size(), tail, ring.head, formats, 2, out);
    REQUIRE(out.size() == 3);
    CHECK(out[0].time_ns == 1);
    CHECK(out[0].waited == false);
    CHECK(out[1].time_ns == 2);
    CHECK(out[1].dev == dev_of_nvme);
    CHECK(out[1].waited == true);
    CHECK(out[2].time_ns == 4);
    CHECK(out[2].dev == dev_of_nvme + 1);
    CHECK(out[2].waited == true);
    CHECK(out[2].cpu == 2);
}

TEST_CASE("an issue sample says whether someone waits for its request, from rwbs") {
    const auto format = parse_tracepoint_format("2096", format_6_18);
    REQUIRE(format);
    Ring ring(1024, 1000); // wraps inside the records
    const std::uint64_t tail = ring.head;
    // Reads, synchronous writes and flushes, and a synchronous discard,
    // are waited for; writeback is not, nor a "W" whose field holds an "S"
    // past its end (a byte an earlier record left there).
    using namespace std::string_view_literals;
    const std::vector<std::pair<std::string_view, bool>> kinds = {
        {"R", true},       {"RA", true},  {"WS", true},       {"WSM", true},
        {"FWFS", true},    {"FWS", true}, {"W", false},       {"WM", false},
        {"W\0S"sv, false}, {"DS", true},  {"WF\0S"sv, false}, {"D", false}};
    for (const auto& [rwbs, waited] : kinds)
        ring.issue_sample(1, 0xfd00000, *format, rwbs);
    std::vector<IssuedRequest> out;
    read_issue_samples(ring.data.data(), ring.data.size(), tail, ring.head, {&*format, 1}, 0, out);
    REQUIRE(out.size() == kinds.size());
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        CAPTURE(kinds[i].first);
        CHECK(out[i].dev == 0xfd00000);
        REQUIRE(out[i].waited.has_value());
        CHECK(*out[i].waited == kinds[i].second);
    }
    // A record too short for its rwbs leaves the kind unknown.
    TracepointFormat past = *format;
    past.rwbs_offset = 200;
    out.clear();
    read_issue_samples(ring.data.data(), ring.data.size(), tail, ring.head, {&past, 1}, 0, out);
    REQUIRE(out.size() == kinds.size());
    CHECK_FALSE(out[0].waited.has_value());
}

TEST_CASE("the kernel filter of waited requests takes the kinds rwbs_waited takes") {
    std::string terms;
    for (const auto kind : waited_kinds)
        terms +=
            (terms.empty() ? "" : " || ") + std::string("rwbs ~ \"") + std::string(kind) + "*\"";
    CHECK(waited_only == "(" + terms + ")");
}
