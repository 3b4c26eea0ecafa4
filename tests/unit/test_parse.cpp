#include "latgov/parse.hpp"

#include <cstring>
#include <doctest/doctest.h>
#include <string>
#include <vector>

using namespace latgov;

TEST_CASE("cpu lists in sysfs and blk-mq spellings") {
    CHECK(*parse_cpu_list("0-3,8,10-11\n") == CpuSet{0, 1, 2, 3, 8, 10, 11});
    CHECK(*parse_cpu_list("0, 1, 2\n") == CpuSet{0, 1, 2});
    CHECK(*parse_cpu_list("5") == CpuSet{5});
    CHECK(parse_cpu_list("\n")->empty());
    CHECK(*parse_cpu_list("3,1,1") == CpuSet{1, 3});
}

TEST_CASE("a cpu list that repeats wide ranges gives each CPU once, however long") {
    CHECK(*parse_cpu_list("4-7,0-5,6,2-3") == CpuSet{0, 1, 2, 3, 4, 5, 6, 7});
    std::string repeated;
    for (int i = 0; i < 8000; ++i)
        repeated += "0-65535,";
    repeated += "7";
    auto cpus = parse_cpu_list(repeated);
    REQUIRE(cpus);
    CHECK(cpus->size() == 65536);
    CHECK(cpus->back() == 65535);
    CHECK_FALSE(parse_cpu_list("0-65536"));
}

TEST_CASE("32-bit values: a larger one is an error, not a truncation") {
    CHECK(*parse_u32("4294967295\n") == 4294967295u);
    auto big = parse_u32("4294967297\n");
    REQUIRE_FALSE(big);
    CHECK(big.error().message.find("\"4294967297\"") != std::string::npos);
    CHECK_FALSE(parse_u32("-1"));
    CHECK_FALSE(parse_u32("n/a"));
}

TEST_CASE("malformed cpu lists are rejected with the offending item") {
    auto bad = parse_cpu_list("0-x");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("\"0-x\"") != std::string::npos);
    CHECK_FALSE(parse_cpu_list("3-1"));
    CHECK_FALSE(parse_cpu_list("1,,2"));
    CHECK_FALSE(parse_cpu_list("-1"));
    CHECK_FALSE(parse_cpu_list("1 2"));
}

TEST_CASE("cpu lists format as ranges") {
    CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
    CHECK(format_cpu_list({}) == "");
    CHECK(format_cpu_list({4}) == "4");
}

TEST_CASE("pm_qos_resume_latency_us: 0 is no limit, n/a is 0 us") {
    CHECK(*parse_resume_latency("0\n") == LatencyLimit{});
    CHECK(*parse_resume_latency("n/a\n") == LatencyLimit{0});
    CHECK(*parse_resume_latency("20\n") == LatencyLimit{20});
    CHECK_FALSE(parse_resume_latency("-5"));
    CHECK_FALSE(parse_resume_latency("abc"));
    CHECK(format_resume_latency(LatencyLimit{}) == "0");
    CHECK(format_resume_latency(LatencyLimit{0}) == "n/a");
    CHECK(format_resume_latency(LatencyLimit{20}) == "20");
}

TEST_CASE("parse_whole takes the whole field as a number, or nothing") {
    std::uint64_t u = 0;
    CHECK((parse_whole("42", u) && u == 42));
    CHECK_FALSE(parse_whole("", u));
    CHECK_FALSE(parse_whole(" 42", u));
    CHECK_FALSE(parse_whole("42 ", u));
    CHECK_FALSE(parse_whole("+42", u));
    CHECK_FALSE(parse_whole("-1", u));
    CHECK_FALSE(parse_whole("18446744073709551616", u)); // 2^64
    int i = 0;
    CHECK((parse_whole("-7", i) && i == -7));
    double d = 0;
    CHECK((parse_whole("1e-05", d) && d == 1e-05));
    CHECK((parse_whole("0.25", d) && d == 0.25));
    CHECK_FALSE(parse_whole("inf", d));
    CHECK_FALSE(parse_whole("nan", d));
    CHECK_FALSE(parse_whole("1.5x", d));
}

TEST_CASE("a limit in words: the file's 0 and n/a are not what a reader sees") {
    CHECK(describe_limit(LatencyLimit{}) == "no limit");
    CHECK(describe_limit(LatencyLimit{0}) == "0 us (poll only)");
    CHECK(describe_limit(LatencyLimit{20}) == "20 us");
}

TEST_CASE("cpu_dma_latency reads back a 4-byte s32") {
    auto bytes = [](std::int32_t v) {
        std::string s(4, '\0');
        std::memcpy(s.data(), &v, 4);
        return s;
    };
    CHECK(*parse_cpu_dma_latency(bytes(cpu_dma_latency_none)) == LatencyLimit{});
    CHECK(*parse_cpu_dma_latency(bytes(0)) == LatencyLimit{0});
    CHECK(*parse_cpu_dma_latency(bytes(55)) == LatencyLimit{55});
    auto wrong = parse_cpu_dma_latency("1000\n");
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().message == "expected 4 bytes, got 5");
}

TEST_CASE("a disk's dev_t from /proc/diskstats, hidden multipath paths included") {
    // As a 6.1 guest with a multipath head over two paths prints it.
    const std::string diskstats = " 259       0 nvme0c0n1 11 0 88 4 0 0 0 0 0 0 4 0 0 0 0 0 0\n"
                                  " 259       1 nvme0n1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                                  " 259       2 nvme0c1n1 8 0 64 2 0 0 0 0 0 4 2 0 0 0 0 0 0\n"
                                  " 254       0 nullb0 3 0 24 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    CHECK(parse_diskstats_dev(diskstats, "nvme0c1n1")->value() == "259:2");
    CHECK(parse_diskstats_dev(diskstats, "nullb0")->value() == "254:0");
    CHECK_FALSE(parse_diskstats_dev(diskstats, "nvme0c1")->has_value()); // whole names only
    CHECK_FALSE(parse_diskstats_dev("", "nvme0c0n1")->has_value());
    // A line for the disk that does not read as major and minor is an error
    // naming it; other lines are not looked at.
    const auto bad = parse_diskstats_dev("   8 0 sda 1 2\n 259 x nvme0c0n1 1 2\n", "nvme0c0n1");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "line 2: expected MAJOR:MINOR, got \"259:x\"");
    CHECK(parse_diskstats_dev(" 259 x nvme0c0n1\n   8 0 sda 1 2\n", "sda")->value() == "8:0");
    // A kernel that gave a hidden disk no dev_t prints 0 0: said as it is.
    CHECK(parse_diskstats_dev("   0       0 nvme0c0n1 1 0 8\n", "nvme0c0n1")->value() == "0:0");
}

TEST_CASE("words are what runs of a separator separate") {
    CHECK(words("  259       0 nvme0c0n1 11 ") ==
          std::vector<std::string_view>{"259", "0", "nvme0c0n1", "11"});
    CHECK(words("   ").empty());
    CHECK(words("").empty());
    CHECK(words("//sys//block/", '/') == std::vector<std::string_view>{"sys", "block"});
}

TEST_CASE("block stat fields") {
    auto s = parse_block_stat("    4925      122   385986     2378     2136     1722    95680     "
                              "1817        3     3952     4196        0        0        0        "
                              "0      470      114\n");
    REQUIRE(s);
    CHECK(s->read_ios == 4925);
    CHECK(s->read_ticks_ms == 2378);
    CHECK(s->write_ios == 2136);
    CHECK(s->write_ticks_ms == 1817);
    CHECK(s->in_flight == 3);
    CHECK(s->io_ticks_ms == 3952);
    CHECK(s->flush_ios == 470);
    CHECK(s->flush_ticks_ms == 114);
    CHECK(parse_block_stat("1 2 3 4 5 6 7 8 9 10 11\n")->in_flight == 9);
    CHECK_FALSE(parse_block_stat("1 2 3"));
    CHECK_FALSE(parse_block_stat("1 2 3 4 5 6 7 8 9 10 x"));
}

TEST_CASE("the intr line of /proc/stat gives per-IRQ totals") {
    std::vector<std::uint64_t> counts{4, 4, 4, 4, 4};
    REQUIRE(parse_stat_intr("cpu  1 2 3\nintr 100 0 7 93\nctxt 5\n", counts));
    CHECK(counts == std::vector<std::uint64_t>{0, 7, 93});
    CHECK_FALSE(parse_stat_intr("cpu 1 2\n", counts));
    CHECK_FALSE(parse_stat_intr("intr 1 x\n", counts));
    CHECK_FALSE(parse_stat_intr("intr 1  2\n", counts));
}

TEST_CASE("split keeps empty pieces") {
    CHECK(split("a,,b", ',') == std::vector<std::string_view>{"a", "", "b"});
    CHECK(split("", ',') == std::vector<std::string_view>{""});
}

TEST_CASE("an IRQ's per_cpu_count sums to the 32 bits of its /proc/stat count") {
    CHECK(*parse_irq_per_cpu_count("0,17\n") == 17);
    CHECK(*parse_irq_per_cpu_count("5\n") == 5);
    // kstat_irqs_usr() sums in an unsigned int: past 2^32 it wraps.
    CHECK(*parse_irq_per_cpu_count("4294967295,2\n") == 1);
    CHECK_FALSE(parse_irq_per_cpu_count(""));
    CHECK_FALSE(parse_irq_per_cpu_count("1,,2\n"));
    CHECK_FALSE(parse_irq_per_cpu_count("1,x\n"));
    CHECK_FALSE(parse_irq_per_cpu_count("4294967296\n"));
}

TEST_CASE("debugfs tags busy=") {
    CHECK(*parse_tags_busy("nr_tags=1023\nbitmap_tags:\ndepth=1023\nbusy=4\ncleared=0\n") == 4);
    CHECK_FALSE(parse_tags_busy("nr_tags=1023\n"));
    CHECK_FALSE(parse_tags_busy("busy=x\n"));
    // A queue no CPU maps to (more queues than CPUs) has no tags to show.
    CHECK(*parse_tags_busy("") == 0);
    CHECK(*parse_tags_busy("\n") == 0);
}

TEST_CASE("block-stat tick deltas are taken modulo 2^32 across a wrap") {
    BlockStat before;
    before.read_ios = 1000;
    before.read_ticks_ms = 4294967290u; // 2^32 - 6
    before.write_ticks_ms = 100;
    BlockStat after = before;
    after.read_ios = 1010;
    after.read_ticks_ms = 4; // wrapped: 10 ms later
    after.write_ticks_ms = 103;
    const auto delta = block_stat_delta(before, after);
    CHECK(delta.ios == 10);
    CHECK(delta.ticks_ms == 13);

    // A replaced device (counters went back) gives no sample at all.
    BlockStat fresh;
    fresh.read_ios = 3;
    fresh.read_ticks_ms = 1;
    const auto reset = block_stat_delta(after, fresh);
    CHECK(reset.ios == 0);
    CHECK(reset.ticks_ms == 0);
}

TEST_CASE("control bytes in text for a terminal become question marks") {
    // Lines, tabs and UTF-8 stay.
    CHECK(terminal_safe("SAMSUNG MZQL2 \xc3\xa9t\xc3\xa9\n\tcpu 1\n") ==
          "SAMSUNG MZQL2 \xc3\xa9t\xc3\xa9\n\tcpu 1\n");
    // An escape sequence that would clear the screen, a carriage return
    // that would overwrite the line, a bell, DEL.
    CHECK(terminal_safe("model\x1b[2J\rx\a\x7f") == "model?[2J?x??");
    // C1 controls in UTF-8 (CSI is U+009B); the code points around them stay
    // (a lead byte before DEL is no sequence).
    CHECK(terminal_safe("a\xc2\x9b"
                        "2Jb\xc2\x80\xc2\x9f\xc2\xa0\xc2\x7f") == "a?2Jb??\xc2\xa0??");
    CHECK(terminal_safe(std::string_view("nul\0end", 7)) == "nul?end");
    CHECK(terminal_safe("") == "");
}

TEST_CASE("a field for one line or one cell has no line break or tab either") {
    CHECK(terminal_safe_field("QEMU\nNVMe\tCtrl\x1b[2J \xc3\xa9") == "QEMU?NVMe?Ctrl?[2J \xc3\xa9");
    CHECK(terminal_safe_field("a\x9b") == "a?");
    CHECK(terminal_safe_field("") == "");
}

TEST_CASE("bytes that are not UTF-8 become question marks in text for a terminal") {
    // A lone 0x9b is CSI to a terminal not in UTF-8 mode.
    CHECK(terminal_safe("a\x9b"
                        "2Jb") == "a?2Jb");
    // Cut short, a stray continuation byte, an overlong '/', a surrogate.
    CHECK(terminal_safe("x\xc2") == "x?");
    CHECK(terminal_safe("\x80z") == "?z");
    CHECK(terminal_safe("\xc0\xaf") == "??");
    CHECK(terminal_safe("\xed\xa0\x80") == "???");
    // Three- and four-byte characters stay whole.
    CHECK(terminal_safe("\xe2\x82\xac \xf0\x9f\x92\xbe") == "\xe2\x82\xac \xf0\x9f\x92\xbe");
}
