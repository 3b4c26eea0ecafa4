// The status document latgovd writes, built from a governor and holders on a
// temp tree, and its text: what it says of the evidence learnt from live IO.
#include "latgov/status.hpp"
#include "machines.hpp"
#include "scratch.hpp"

#include <cstdint>
#include <doctest/doctest.h>
#include <string>

using namespace latgov;

namespace {

bool contains(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("status: each learnt gap says when it was learnt, how often confirmed, and when it is "
          "measured again") {
    const Topology topology = virtio_machine("haltpoll", "haltpoll");
    EvidenceBook book;
    // Back-to-back IO held and was confirmed once (20 minutes); a think-time
    // workload took its verdict (as long); a class measured again after its
    // no-hold expired, and a shorter gap that took that no-hold; an
    // experiment not begun, which is not listed.
    const auto decided = [](Verdict verdict, int pairs, std::int64_t learnt_at) {
        GapEvidence e;
        e.verdict = verdict;
        e.gains.pairs = pairs;
        e.device = "vda";
        e.learnt_at = learnt_at;
        return e;
    };
    book.gaps[0] = decided(Verdict::hold, 4, 1000);
    book.gaps[0].confirmations = 1;
    book.gaps[4] = decided(Verdict::hold, 4, 1100);
    book.gaps[4].inferred_from = 0;
    // Past its 10 minutes (a no-hold confirmed twice): refresh_verdicts
    // expires it.
    book.gaps[6] = decided(Verdict::no_hold, 16, 1100 - 601);
    book.gaps[6].confirmations = 2;
    book.gaps[7].device = "vda";
    REQUIRE(refresh_verdicts(book, 1100, verdict_max_age));
    REQUIRE(book.gaps.at(0).verdict == Verdict::hold);
    REQUIRE(book.gaps.at(4).verdict == Verdict::hold);
    // Carried over from the class measured again: it waits for it.
    book.gaps[5] = decided(Verdict::no_hold, 4, 0);
    book.gaps[5].inferred_from = 6;
    REQUIRE(refresh_verdicts(book, 1100, verdict_max_age));
    Governor governor(topology, default_config(), declared_costs(topology), book);

    test::QosTree tree(2);
    const LogSink quiet = [](const std::string&) {};
    PerCpuHolder percpu(tree.sysroot(), tree.journal(), quiet);
    GlobalHolder global(tree.sysroot(), quiet);
    const Holds holds;
    const StatusInput input{governor,   holds, percpu, global, topology,   "declared",
                            "sleeping", {},    {},     {},     TimePoint{}};
    const auto status = build_status(input);
    const auto& evidence = status.at("evidence");
    REQUIRE(evidence.size() == 4);
    CHECK(evidence[0].at("gap") == "< 128 us");
    CHECK(evidence[0].at("learnt_at") == 1000);
    CHECK(evidence[0].at("confirmations") == 1);
    // The first second refresh_verdicts finds it past its 20 minutes.
    CHECK(evidence[0].at("measured_again_at") == 1000 + 1200 + 1);
    CHECK(evidence[0].at("expired").is_null());
    CHECK(evidence[1].at("carried_from") == "< 128 us");
    CHECK(evidence[1].at("confirmations") == 0);
    CHECK(evidence[1].at("measured_again_at") == 1100 + 1200 + 1);
    CHECK(evidence[1].at("waits_for").is_null());
    // At the latest: 20 minutes while it waits (a no-hold's longest life).
    CHECK(evidence[2].at("waits_for") == "4096-8192 us");
    CHECK(evidence[2].at("measured_again_at") == 1100 + 1200 + 1);
    CHECK(evidence[3].at("verdict") == "uncertain");
    CHECK(evidence[3].at("pairs") == 0);
    CHECK(evidence[3].at("expired") == "no-hold");
    CHECK(evidence[3].at("confirmations") == 2);
    CHECK(evidence[3].at("learnt_at").is_null());
    CHECK(evidence[3].at("measured_again_at").is_null());

    const nlohmann::json document = status;
    const auto text = format_status(document, 1000 + 601);
    INFO(text);
    CHECK(contains(text, "on vda, confirmed 1 time, measured again in 10 min\n"));
    CHECK(contains(text, "on vda (as at gaps < 128 us), measured again in 12 min\n"));
    CHECK(contains(text, "on vda, measuring again (was no-hold)\n"));
    CHECK(contains(text, "on vda (as at gaps 4096-8192 us), waits while gaps 4096-8192 us are "
                         "measured again (at most 12 min)\n"));
    CHECK(contains(format_status(document, 1000 + 1200), "measured again in 1 min\n"));
    CHECK(contains(format_status(document, 1000 + 1201), "measured again now\n"));
    // Without the time now, the text leaves the time out.
    CHECK_FALSE(contains(format_status(document), "measured again in"));
}
