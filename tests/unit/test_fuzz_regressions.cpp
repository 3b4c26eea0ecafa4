// Inputs the fuzz targets (tests/fuzz) found crashing, kept as plain tests:
// each must now give an error value.
#include "latgov/calibration.hpp"
#include "latgov/config.hpp"
#include "latgov/status_text.hpp"

#include <doctest/doctest.h>
#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace latgov;

namespace {

std::string corpus_file(const std::string& name) {
    std::ifstream in(std::string(LATGOV_SOURCE_DIR) + "/tests/fuzz/corpus/" + name,
                     std::ios::binary);
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace

TEST_CASE("TOML with invalid UTF-8 in a literal string is an error, not an out-of-bounds read") {
    // toml11 reads past its buffer on this input; the text is checked first.
    const auto text = corpus_file("calibration/regression-toml11-literal-string-utf8");
    auto calibration = parse_calibration(text, "cal.toml");
    REQUIRE_FALSE(calibration);
    CHECK(calibration.error().message.find("cal.toml:1:") != std::string::npos);
    CHECK(calibration.error().message.find("not UTF-8") != std::string::npos);
    auto config = parse_config("[daemon]\nlog_level = 'in\xff\xfe'\n", "latgov.toml");
    REQUIRE_FALSE(config);
    CHECK(config.error().message.find("latgov.toml:2:") != std::string::npos);
}

TEST_CASE("a status file missing a key is an error naming it, not undefined behaviour") {
    const auto text = corpus_file("status/regression-missing-key");
    auto status = nlohmann::json::parse(text, nullptr, false);
    REQUIRE_FALSE(status.is_discarded());
    CHECK_THROWS_WITH_AS((void)format_status(status), doctest::Contains(": missing"),
                         std::invalid_argument);
}

TEST_CASE("a status number out of range is an error, not a float-to-int conversion") {
    // The fuzzer's input (status/regression-pid-1e84) also lacks keys: the
    // same pid in an otherwise whole status.
    auto status = nlohmann::json::parse(corpus_file("status/status.json"));
    REQUIRE_NOTHROW((void)format_status(status));
    status["pid"] = 1e84;
    CHECK_THROWS_AS((void)format_status(status), std::invalid_argument);
    status["pid"] = -1.5;
    CHECK_THROWS_AS((void)format_status(status), std::invalid_argument);
}

TEST_CASE("well-formed UTF-8 passes, each kind of malformed sequence is located") {
    CHECK_FALSE(first_invalid_utf8("plain\nh\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"));
    const char* bad[] = {"\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                         "\xc3", "\xff"};
    for (const char* b : bad) {
        CAPTURE(b);
        auto at = first_invalid_utf8(std::string("ok\nab") + b);
        REQUIRE(at);
        CHECK(at->line == 2);
        CHECK(at->column == 3);
    }
}
