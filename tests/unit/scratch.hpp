// Throw-away directories for the unit tests that need real files: a
// temporary directory removed with its contents, and a tree of per-CPU PM QoS
// slots with a run directory for the journal.
#pragma once

#include "latgov/parse.hpp"
#include "latgov/sysroot.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdlib.h>
#include <string>

namespace latgov::test {

class TempDir {
  public:
    // A new directory /tmp/<prefix>.XXXXXX.
    explicit TempDir(const std::string& prefix) {
        std::string pattern = "/tmp/" + prefix + ".XXXXXX";
        path_ = ::mkdtemp(pattern.data());
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
};

inline std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// A root with `cpus` CPUs, each slot holding `initial` as the kernel shows it
// ("0\n" = no limit), and the run directory `run` for the journal.
class QosTree {
  public:
    explicit QosTree(int cpus = 4, const std::string& initial = "0\n",
                     const std::string& run = "run/latgov")
        : dir_("latgov-qos"), run_(run) {
        for (int cpu = 0; cpu < cpus; ++cpu)
            set(cpu, initial);
        std::filesystem::create_directories(root() / run_);
    }

    std::filesystem::path slot(int cpu) const {
        return root() / ("sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                         "/power/pm_qos_resume_latency_us");
    }
    // What someone else (or the kernel) puts in the slot; the trailing
    // newline tells it apart from latgov's writes, which have none.
    void set(int cpu, const std::string& text) const {
        std::filesystem::create_directories(slot(cpu).parent_path());
        std::ofstream(slot(cpu), std::ios::trunc) << text;
    }
    std::string get(int cpu) const { return slurp(slot(cpu)); }
    LatencyLimit value(int cpu) const {
        auto parsed = parse_resume_latency(get(cpu));
        REQUIRE(parsed);
        return *parsed;
    }

    const std::filesystem::path& root() const { return dir_.path(); }
    std::filesystem::path journal() const { return root() / run_ / "journal"; }
    SysRoot sysroot() const { return SysRoot(root()); }

  private:
    TempDir dir_;
    std::string run_;
};

} // namespace latgov::test
