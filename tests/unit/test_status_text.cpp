// `latgov status` text from a status.json document.
#include "latgov/status_text.hpp"

#include <cstdint>
#include <doctest/doctest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

using namespace latgov;

namespace {

nlohmann::json minimal_status() {
    return nlohmann::json::parse(R"({
        "pid": 42, "cpuidle_driver": "haltpoll", "cpuidle_governor": "haltpoll",
        "idle_costs": "declared", "io_events": "sleeping until the first request",
        "cpus": [{"cpu": 1, "limit_us": 0, "held_for": [{"device": "vda", "queue": 0,
                  "why": "completes"}], "held_seconds": 2.5}],
        "devices": [{"name": "vda", "mode": "auto", "backend": "percpu",
                     "observed_latency_us": 50.0, "limit_us": 0, "active_queues": [0]}],
        "global_limit_us": null, "global_held_for": [],
        "onset_delay": {"count": 0}
    })");
}

bool contains(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("status text: each held CPU with why, and the IO events line") {
    const auto text = format_status(minimal_status());
    CHECK(contains(text, "latgovd pid 42, cpuidle haltpoll/haltpoll"));
    CHECK(contains(text, "IO events: sleeping until the first request\n"));
    CHECK(contains(text, "1     0 (poll)   2.5        vda/0 (completes)\n"));
}

TEST_CASE("status text: a field that is not what latgovd writes is an error naming it") {
    struct Bad {
        nlohmann::json::json_pointer at;
        nlohmann::json value;
        std::string says;
    };
    using ptr = nlohmann::json::json_pointer;
    for (const Bad& bad : {
             Bad{ptr("/cpus/0/held_seconds"), "x",
                 "cpus[0].held_seconds: expected a number, got \"x\""},
             Bad{ptr("/cpus/0/cpu"), -1, "cpus[0].cpu: must be in 0..65535, got -1"},
             Bad{ptr("/cpus/0/limit_us"), -5, "cpus[0].limit_us: must be in 0..4294967295"},
             Bad{ptr("/devices/0/name"), 7, "devices[0].name: expected a string, got 7"},
             Bad{ptr("/cpus/0/held_for/0/queue"), "q",
                 "cpus[0].held_for[0].queue: expected a whole number"},
         }) {
        auto status = minimal_status();
        status[bad.at] = bad.value;
        CAPTURE(bad.says);
        CHECK_THROWS_WITH_AS((void)format_status(status), doctest::Contains(bad.says.c_str()),
                             std::invalid_argument);
    }
    auto status = minimal_status();
    status.erase("devices");
    CHECK_THROWS_WITH_AS((void)format_status(status), "devices: missing", std::invalid_argument);
}

TEST_CASE("status text: what a dry-run device would hold, in the CPU table") {
    // What latgovd writes under dry-run: nothing held, the would-be limit
    // beside.
    auto status = minimal_status();
    status["cpus"] = nlohmann::json::parse(R"([
        {"cpu": 0, "limit_us": null, "held_for": []},
        {"cpu": 1, "limit_us": null, "held_for": [], "dry_run_limit_us": 20,
         "dry_run_for": [{"device": "nvme0n1", "queue": 0, "why": "completes"}]}])");
    status["devices"][0]["backend"] = "dry-run";
    auto text = format_status(status);
    INFO(text);
    CHECK(contains(text, "\n\nCPU   LIMIT_US     HELD_S     BECAUSE OF\n"
                         "0     -            -          -\n"
                         "1     20 (dry-run) -          nvme0n1/0 (completes)\n\n"));
    CHECK(contains(text, "vda          auto   dry-run  50.0           0 (poll)  0\n"));

    // Held for one device, and a dry-run device would hold it too.
    status["cpus"][1]["limit_us"] = 0;
    status["cpus"][1]["held_seconds"] = 2.5;
    status["cpus"][1]["held_for"] = {{{"device", "vda"}, {"queue", 0}, {"why", "completes"}}};
    text = format_status(status);
    CHECK(contains(text, "\n\nCPU   LIMIT_US               HELD_S     BECAUSE OF\n"
                         "0     -                      -          -\n"
                         "1     0 (poll), 20 (dry-run) 2.5        vda/0 (completes); dry-run: "
                         "nvme0n1/0 (completes)\n\n"));

    // Without dry-run the table is as it always was.
    status["cpus"][1].erase("dry_run_limit_us");
    status["cpus"][1].erase("dry_run_for");
    CHECK(contains(format_status(status), "\n\nCPU   LIMIT_US   HELD_S     BECAUSE OF\n"
                                          "0     -          -          -\n"
                                          "1     0 (poll)   2.5        vda/0 (completes)\n\n"));
}

TEST_CASE("status text: why nothing is held while the devices cannot be sampled") {
    auto status = minimal_status();
    CHECK_FALSE(contains(format_status(status), "NOT GOVERNING"));
    status["sampling_error"] = nullptr;
    CHECK_FALSE(contains(format_status(status), "NOT GOVERNING"));
    status["sampling_error"] = "Failed to parse /sys/block/vda/stat: bad; rescanning in 800 ms";
    CHECK(contains(format_status(status),
                   "\nNOT GOVERNING, nothing held: Failed to parse /sys/block/vda/stat: bad; "
                   "rescanning in 800 ms\nIO events: "));
}

TEST_CASE("status text: the onset delay and its split once there was one") {
    auto status = minimal_status();
    CHECK_FALSE(contains(format_status(status), "Onset"));

    status["onset_delay"] = {{"count", 12},          {"p50_us", 131.4},     {"p99_us", 390.0},
                             {"max_us", 407.2},      {"wake_p50_us", 87.0}, {"wake_p99_us", 283.0},
                             {"wake_max_us", 300.0}, {"work_p50_us", 42.0}, {"work_p99_us", 216.0},
                             {"work_max_us", 220.0}};
    CHECK(contains(format_status(status),
                   "Onset (first request after idle to limit written), last 12: p50 131 us, p99 "
                   "390 us, max 407 us; latgovd's wake-up p50 87 us, p99 283 us, its own work "
                   "p50 42 us, p99 216 us\n"));
    status["onset_delay"]["on_issuing_cpu"] = 11;
    CHECK(contains(format_status(status),
                   "its own work p50 42 us, p99 216 us; 11 handled on the CPU that issued the "
                   "request\n"));
    status["onset_delay"].erase("on_issuing_cpu");

    // A status without the split (an older latgovd) still shows the delay.
    for (const char* key :
         {"wake_p50_us", "wake_p99_us", "wake_max_us", "work_p50_us", "work_p99_us", "work_max_us"})
        status["onset_delay"].erase(key);
    const auto text = format_status(status);
    CHECK(contains(text, "last 12: p50 131 us, p99 390 us, max 407 us\n"));
    CHECK_FALSE(contains(text, "wake-up"));
}

TEST_CASE("status text: the period held ahead for, and the lateness in its lead") {
    auto status = minimal_status();
    status["prearm"] = {{"hits", 90},        {"misses", 2},      {"period_us", 30004.8},
                        {"spread_us", 21.1}, {"lead_us", 892.2}, {"grace_us", 542.2},
                        {"late_us", 350.0}};
    CHECK(contains(format_status(status),
                   "Periodic requests after idle: every 30005 us (spread 21 us), held from 892 "
                   "us before each (350 us of it for latgovd's own lateness); 90 came in their "
                   "window, 2 did not\n"));
    // Never late, or a status from before the lateness was kept: no part.
    for (auto late : {nlohmann::json(0.0), nlohmann::json()}) {
        if (late.is_null())
            status["prearm"].erase("late_us");
        else
            status["prearm"]["late_us"] = late;
        CHECK(contains(format_status(status), "held from 892 us before each; 90 came in"));
    }
}

TEST_CASE("status text: how many of a learnt gap's pairs gained and lost") {
    auto status = minimal_status();
    status["evidence"] = nlohmann::json::parse(R"([
        {"gap": "< 128 us", "verdict": "hold", "pairs": 16, "pairs_gained": 14, "pairs_lost": 2,
         "wait_gain": 0.06, "service_gain": 0.01, "carried_from": null, "device": "vda",
         "learnt_at": 1000, "measured_again_at": 2201, "confirmations": 0, "expired": null}])");
    CHECK(contains(format_status(status),
                   "  gaps < 128 us       hold       16 pairs (14 gained, 2 lost)  wait +6.0%"));
    // Older status files have neither field, and evidence saved before they
    // were counted has 0 and 0: the pairs alone.
    auto older = status;
    older["evidence"][0].erase("pairs_gained");
    older["evidence"][0].erase("pairs_lost");
    CHECK(contains(format_status(older), "  gaps < 128 us       hold       16 pairs  wait +6.0%"));
    auto uncounted = status;
    uncounted["evidence"][0]["pairs_gained"] = 0;
    uncounted["evidence"][0]["pairs_lost"] = 0;
    CHECK(contains(format_status(uncounted),
                   "  gaps < 128 us       hold       16 pairs  wait +6.0%"));
    // One lost alone is shown.
    auto one = status;
    one["evidence"][0]["pairs_gained"] = 0;
    one["evidence"][0]["pairs_lost"] = 1;
    CHECK(contains(format_status(one), "16 pairs (0 gained, 1 lost)  wait"));
    for (const std::string field : {"pairs_gained", "pairs_lost"}) {
        auto broken = status;
        broken["evidence"][0][field] = "x";
        CAPTURE(field);
        const std::string says = "evidence[0]." + field + ": expected a whole number";
        CHECK_THROWS_WITH_AS((void)format_status(broken), doctest::Contains(says.c_str()),
                             std::invalid_argument);
        // Checked even where the other is missing and the text leaves both out.
        broken["evidence"][0].erase(field == "pairs_gained" ? "pairs_lost" : "pairs_gained");
        CHECK_THROWS_WITH_AS((void)format_status(broken), doctest::Contains(says.c_str()),
                             std::invalid_argument);
    }
}

TEST_CASE("status text: a learnt gap's renewal fields, checked whether or not they are shown") {
    auto status = minimal_status();
    status["evidence"] = nlohmann::json::parse(R"([
        {"gap": "< 128 us", "verdict": "hold", "pairs": 4, "wait_gain": 0.3,
         "service_gain": 0.2, "carried_from": null, "device": "vda", "learnt_at": 1000,
         "measured_again_at": 2201, "confirmations": 1, "expired": null}])");
    CHECK(contains(format_status(status, 1601),
                   "on vda, confirmed 1 time, measured again in 10 min\n"));
    CHECK(contains(format_status(status, 1602), "measured again in 10 min\n"));
    CHECK(contains(format_status(status, 1600), "measured again in 11 min\n"));
    CHECK(contains(format_status(status, 2201), "on vda, confirmed 1 time, measured again now\n"));
    // A time no clock gives is left out, not computed with an overflow.
    status["evidence"][0]["measured_again_at"] = std::numeric_limits<std::int64_t>::min();
    CHECK(contains(format_status(status, 1601), "on vda, confirmed 1 time\n"));

    struct Bad {
        const char* field;
        nlohmann::json value;
        std::string says;
    };
    for (const Bad& bad : {
             Bad{"expired", 1, "evidence[0].expired: expected a string, got 1"},
             Bad{"confirmations", "x", "evidence[0].confirmations: expected a whole number"},
             Bad{"measured_again_at", "x",
                 "evidence[0].measured_again_at: expected a whole number"},
         }) {
        auto broken = status;
        broken["evidence"][0][bad.field] = bad.value;
        CAPTURE(bad.says);
        // Read without the time now too, where the text leaves it out.
        for (const auto now_s : {std::optional<std::int64_t>(1601), std::optional<std::int64_t>()})
            CHECK_THROWS_WITH_AS((void)format_status(broken, now_s),
                                 doctest::Contains(bad.says.c_str()), std::invalid_argument);
    }
}
