#include "logging.hpp"

#include <cstdlib>
#include <memory>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

namespace latgov {

void setup_logging(const std::string& level) {
    std::shared_ptr<spdlog::logger> logger;
    // Under systemd stderr already goes to the journal: one sink, or lines
    // appear twice.
    if (std::getenv("JOURNAL_STREAM"))
        logger = std::make_shared<spdlog::logger>(
            "latgovd", std::make_shared<spdlog::sinks::systemd_sink_mt>("latgovd", false));
    else
        logger = spdlog::stderr_color_mt("latgovd");
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
