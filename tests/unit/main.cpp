// doctest's main, which also fails when the filters leave no test case to
// run. ctest runs each case alone, by name (--test-case=NAME), and a name
// that matches none would pass having run nothing: a ';' in a case's name,
// for one, splits it in two for CMake, and neither half matches.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cstdio>
#include <doctest/doctest.h>

namespace {

bool run_started = false; // not a query (--list-test-cases, --count, --no-run...)
int cases_run = 0;

// Counts the test cases that start; reports nothing.
struct CaseCounter : doctest::IReporter {
    explicit CaseCounter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override { run_started = true; }
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override { ++cases_run; }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("case_counter", 1, CaseCounter);

} // namespace

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (result == 0 && run_started && cases_run == 0) {
        std::fputs("no test case matches the filters given: nothing was tested\n", stderr);
        return 1;
    }
    return result;
}
