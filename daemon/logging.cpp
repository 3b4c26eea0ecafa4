#include "logging.hpp"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

namespace latgov {

namespace {

// A sink that only counts: warnings and errors since the start.
class CountingSink : public spdlog::sinks::base_sink<std::mutex> {
  public:
    LogCounts counts() {
        std::lock_guard lock(mutex_);
        return counts_;
    }

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (msg.level == spdlog::level::warn)
            ++counts_.warnings;
        else if (msg.level >= spdlog::level::err && msg.level != spdlog::level::off)
            ++counts_.errors;
    }
    void flush_() override {}

  private:
    LogCounts counts_;
};

const auto counting_sink = std::make_shared<CountingSink>();

} // namespace

LogCounts logged_counts() {
    return counting_sink->counts();
}

void setup_logging(const std::string& level) {
    std::shared_ptr<spdlog::logger> logger;
    // Under systemd stderr already goes to the journal: one sink, or lines
    // appear twice.
    if (std::getenv("JOURNAL_STREAM"))
        logger = std::make_shared<spdlog::logger>(
            "latgovd", std::make_shared<spdlog::sinks::systemd_sink_mt>("latgovd", false));
    else
        logger = spdlog::stderr_color_mt("latgovd");
    logger->sinks().push_back(counting_sink);
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
}

void log_warning(const std::string& line) {
    spdlog::warn("{}", line);
}

std::string describe_limit(LatencyLimit limit) {
    if (!limit)
        return "none";
    return *limit == 0 ? "0 us (poll only)" : std::to_string(*limit) + " us";
}

} // namespace latgov
