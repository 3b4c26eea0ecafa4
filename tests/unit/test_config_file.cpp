// The configuration files on disk: the main file, its drop-ins in name
// order, and errors that name the file.
#include "latgov/config_file.hpp"
#include "scratch.hpp"

#include <chrono>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string_view>

using namespace latgov;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A directory for latgov.toml and its latgov.d.
class ConfigDir {
  public:
    fs::path main() const { return tmp_.path() / "latgov.toml"; }
    fs::path write(const fs::path& relative, std::string_view text) const {
        const auto file = tmp_.path() / relative;
        fs::create_directories(file.parent_path());
        std::ofstream(file) << text;
        return file;
    }

  private:
    test::TempDir tmp_{"latgov-config"};
};

} // namespace

TEST_CASE("load_config without a main file") {
    const ConfigDir dir;
    SUBCASE("gives the defaults") {
        auto config = load_config(dir.main());
        REQUIRE(config.ok());
        CHECK(config->daemon.log_level == "info");
        CHECK(config->sources.empty());
    }
    SUBCASE("is an error when required") {
        auto config = load_config(dir.main(), true);
        REQUIRE_FALSE(config.ok());
        CHECK(config.error().message ==
              "Failed to read " + dir.main().string() + ": No such file or directory");
    }
    SUBCASE("still applies the drop-ins") {
        const auto drop_in =
            dir.write("latgov.d/10-debug.toml", "[daemon]\nlog_level = \"debug\"\n");
        auto config = load_config(dir.main());
        REQUIRE(config.ok());
        CHECK(config->daemon.log_level == "debug");
        CHECK(config->sources == std::vector<fs::path>{drop_in});
    }
}

TEST_CASE("load_config overlays drop-ins in name order") {
    const ConfigDir dir;
    dir.write("latgov.toml", "[defaults]\nmode = \"fixed\"\nlimit_us = 10\n"
                             "[[device]]\nname = \"a\"\n");
    const auto second = dir.write("latgov.d/20-b.toml", "[defaults]\nlimit_us = 30\n"
                                                        "[[device]]\nname = \"c\"\n");
    const auto first = dir.write("latgov.d/10-a.toml", "[defaults]\nlimit_us = 20\nlinger_ms = 9\n"
                                                       "[[device]]\nname = \"b\"\n");
    dir.write("latgov.d/30-c.toml.disabled", "this is not TOML");

    auto config = load_config(dir.main(), true);
    INFO((config.ok() ? std::string() : config.error().message));
    REQUIRE(config.ok());
    CHECK(config->defaults.mode == Mode::fixed); // kept from the main file
    CHECK(config->defaults.limit_us == 30);      // the last drop-in wins
    CHECK(config->defaults.linger == 9ms);
    REQUIRE(config->devices.size() == 3);
    CHECK(config->devices[0].match.name == "a");
    CHECK(config->devices[1].match.name == "b");
    CHECK(config->devices[2].match.name == "c");
    CHECK(config->devices[2].origin == second.string() + ":3:1");
    CHECK(config->sources == std::vector<fs::path>{dir.main(), first, second});
}

TEST_CASE("load_config names the drop-in that is wrong") {
    const ConfigDir dir;
    dir.write("latgov.toml", "[defaults]\nmin_limit_us = 100\n");
    const auto drop_in = dir.write("latgov.d/50-cap.toml", "[defaults]\nmax_limit_us = 50\n");
    auto config = load_config(dir.main());
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().message ==
          drop_in.string() +
              ":2:16: [defaults] max_limit_us: must be >= min_limit_us (100), got 50");
}
