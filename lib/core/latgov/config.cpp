// TOML -> Config. toml11 is used here and in calibration.cpp alone: its
// headers are heavy.
#include "latgov/config.hpp"

#include "latgov/parse.hpp"
#include "latgov/toml_where.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <initializer_list>
#include <span>
#include <sstream>
#include <toml.hpp>
#include <utility>

namespace latgov {

namespace {

namespace fs = std::filesystem;

template <typename T>
struct Choice {
    std::string_view name;
    T value;
};

constexpr Choice<Mode> mode_names[] = {
    {"auto", Mode::automatic}, {"fixed", Mode::fixed}, {"off", Mode::off}};
constexpr Choice<Backend> backend_names[] = {
    {"percpu", Backend::percpu}, {"global", Backend::global}, {"dry-run", Backend::dry_run}};
constexpr Choice<bool> linger_names[] = {{"auto", true}};
constexpr Choice<std::string_view> log_levels[] = {
    {"trace", "trace"}, {"debug", "debug"}, {"info", "info"}, {"warn", "warn"}, {"error", "error"}};

constexpr std::string_view daemon_keys[] = {
    "sample_interval_ms", "steady_interval_ms", "idle_interval_ms", "status_interval_ms",
    "runtime_dir",        "calibration_file",   "log_level",        "io_events",
    "calibrate_on_start", "queue_inflight",     "evidence_file",    "metrics_file"};
constexpr std::string_view policy_keys[] = {
    "mode",         "backend",   "limit_us",    "latency_fraction", "min_limit_us",
    "max_limit_us", "linger_ms", "min_samples", "waiter_cpus",      "prearm"};
constexpr std::string_view matcher_keys[] = {"name", "model", "serial", "wwid", "transport"};

// The largest value /dev/cpu_dma_latency accepts: "no limit".
constexpr auto max_limit_us = static_cast<std::uint32_t>(cpu_dma_latency_none);

template <typename T, std::size_t N>
std::string_view name_of(const Choice<T> (&choices)[N], T value) {
    for (const auto& choice : choices)
        if (choice.value == value)
            return choice.name;
    return "?";
}

std::string_view type_name(const toml::value& value) {
    switch (value.type()) {
    case toml::value_t::boolean:
        return "boolean";
    case toml::value_t::integer:
        return "integer";
    case toml::value_t::floating:
        return "float";
    case toml::value_t::string:
        return "string";
    case toml::value_t::array:
        return "array";
    case toml::value_t::table:
        return "table";
    default:
        return "date/time";
    }
}

std::string format_double(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// Whether every '[' of an fnmatch pattern opens a bracket expression that
// closes: fnmatch would take an unclosed one as a literal '[', so a typo such
// as "nvme[0n1" would match nothing, silently. A ']' first in the brackets
// (after an optional '!' or '^') is a member, as are [:class:] names.
bool glob_brackets_close(std::string_view pattern) {
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '\\') {
            ++i;
            continue;
        }
        if (pattern[i] != '[')
            continue;
        size_t j = i + 1;
        if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^'))
            ++j;
        if (j < pattern.size() && pattern[j] == ']')
            ++j;
        for (; j < pattern.size() && pattern[j] != ']'; ++j) {
            if (pattern.substr(j, 2) == "[:") {
                const auto end = pattern.find(":]", j + 2);
                if (end == pattern.npos)
                    return false;
                j = end + 1;
            }
        }
        if (j >= pattern.size())
            return false;
        i = j;
    }
    return true;
}

// Collects the validation errors of one document and keeps the earliest in
// the file, so the user fixes problems top to bottom.
class Diagnostics {
  public:
    explicit Diagnostics(std::string source) : source_(std::move(source)) {}

    std::string where(const toml::value& at) const { return toml_where(source_, at.location()); }

    // "<file:line:column>: <subject>: <what>"
    void report(const toml::value& at, const std::string& subject, std::string_view what) {
        const auto location = at.location();
        const std::pair position{location.line(), location.column()};
        if (first_ && position >= first_position_)
            return;
        first_ = make_error(where(at) + ": " + subject + ": " + std::string(what));
        first_position_ = position;
    }

    const std::optional<Error>& first() const { return first_; }

  private:
    std::string source_;
    std::optional<Error> first_;
    std::pair<std::uint_least32_t, std::uint_least32_t> first_position_;
};

// Typed, range-checked reads of the keys of one table. A missing key, like a
// bad one, reads as nullopt; the bad one is also reported.
class Section {
  public:
    Section(const toml::value& table, std::string name, Diagnostics& diagnostics)
        : table_(table), name_(std::move(name)), diagnostics_(diagnostics) {}

    void reject_unknown(std::initializer_list<std::span<const std::string_view>> known) {
        for (const auto& entry : table_.as_table()) {
            const bool is_known = std::any_of(known.begin(), known.end(), [&](auto keys) {
                return std::find(keys.begin(), keys.end(), entry.first) != keys.end();
            });
            if (!is_known)
                fail_at(entry.second, entry.first, "unknown key");
        }
    }

    bool contains(std::string_view key) const { return table_.contains(std::string(key)); }

    bool is_string(std::string_view key) const {
        const auto* value = find(key);
        return value && value->is_string();
    }

    // An error about the table as a whole, located at its header.
    void fail_table(std::string_view what) { diagnostics_.report(table_, name_, what); }

    void fail(std::string_view key, std::string_view what) {
        fail_at(table_.as_table().at(std::string(key)), key, what);
    }

    // Whole numbers in [min, max]; every such range here fits in 32 bits.
    std::optional<std::uint32_t> integer(std::string_view key, std::uint32_t min,
                                         std::uint32_t max) {
        const auto* value = typed(key, toml::value_t::integer, "an integer");
        if (!value)
            return std::nullopt;
        const auto number = value->as_integer();
        if (number < min || number > max) {
            fail_at(*value, key,
                    "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " +
                        toml_integer_text(number));
            return std::nullopt;
        }
        return static_cast<std::uint32_t>(number);
    }

    std::optional<std::chrono::milliseconds> millis(std::string_view key, std::uint32_t min,
                                                    std::uint32_t max) {
        if (auto number = integer(key, min, max))
            return std::chrono::milliseconds(*number);
        return std::nullopt;
    }

    // A number in (0, 1]; an integer (1) is accepted too.
    std::optional<double> fraction(std::string_view key) {
        const auto* value = find(key);
        if (!value)
            return std::nullopt;
        if (!value->is_floating() && !value->is_integer()) {
            wrong_type(*value, key, "a number");
            return std::nullopt;
        }
        const double number =
            value->is_floating() ? value->as_floating() : static_cast<double>(value->as_integer());
        if (!(number > 0 && number <= 1)) { // also rejects nan
            fail_at(*value, key, "must be > 0 and <= 1, got " + format_double(number));
            return std::nullopt;
        }
        return number;
    }

    // A non-empty string: an empty matcher would read as "not given".
    std::optional<std::string> string(std::string_view key) {
        const auto* value = c_string(key);
        if (!value)
            return std::nullopt;
        if (value->as_string().str.empty()) {
            fail_at(*value, key, "must not be empty");
            return std::nullopt;
        }
        return value->as_string().str;
    }

    // A matcher: a non-empty string that is not blank (a blank one would
    // match nothing), and for a glob one whose brackets close.
    std::optional<std::string> matcher(std::string_view key, bool glob) {
        auto text = string(key);
        if (!text)
            return std::nullopt;
        const auto* value = find(key);
        if (trim(*text).empty()) {
            fail_at(*value, key, "must not be blank, got " + in_quotes(*text));
            return std::nullopt;
        }
        if (glob && !glob_brackets_close(*text)) {
            fail_at(*value, key, "unbalanced '[' in pattern " + in_quotes(*text));
            return std::nullopt;
        }
        return text;
    }

    std::optional<bool> boolean(std::string_view key) {
        const auto* value = typed(key, toml::value_t::boolean, "a boolean");
        if (!value)
            return std::nullopt;
        return value->as_boolean();
    }

    std::optional<fs::path> absolute_path(std::string_view key) {
        auto text = string(key);
        if (text && text->front() != '/') {
            fail(key, "must be an absolute path, got " + in_quotes(*text));
            return std::nullopt;
        }
        return text;
    }

    // An absolute path, or "" for none: the one string key where empty
    // means something.
    std::optional<fs::path> absolute_path_or_none(std::string_view key) {
        const auto* value = c_string(key);
        if (!value)
            return std::nullopt;
        const std::string& text = value->as_string().str;
        if (!text.empty() && text.front() != '/') {
            fail_at(*value, key, "must be an absolute path or \"\" (none), got " + in_quotes(text));
            return std::nullopt;
        }
        return text;
    }

    template <typename T, std::size_t N>
    std::optional<T> choice(std::string_view key, const Choice<T> (&choices)[N]) {
        const auto* value = c_string(key);
        if (!value)
            return std::nullopt;
        const std::string& text = value->as_string().str;
        std::string names;
        for (const auto& choice : choices) {
            if (choice.name == text)
                return choice.value;
            names += (names.empty() ? "" : ", ") + std::string(choice.name);
        }
        fail_at(*value, key, "must be one of " + names + "; got " + in_quotes(text));
        return std::nullopt;
    }

  private:
    // A string `key` (empty or not) with no NUL in it: the text goes on as
    // a C string (a glob, a path), and cut at a NUL it would mean less than
    // the file says.
    const toml::value* c_string(std::string_view key) {
        const auto* value = typed(key, toml::value_t::string, "a string");
        if (value && value->as_string().str.find('\0') != std::string::npos) {
            fail_at(*value, key, "must not contain a NUL character (\\u0000)");
            return nullptr;
        }
        return value;
    }

    const toml::value* find(std::string_view key) const {
        const auto& table = table_.as_table();
        const auto it = table.find(std::string(key));
        return it == table.end() ? nullptr : &it->second;
    }

    const toml::value* typed(std::string_view key, toml::value_t type, std::string_view expected) {
        const auto* value = find(key);
        if (value && value->type() != type) {
            wrong_type(*value, key, expected);
            return nullptr;
        }
        return value;
    }

    void wrong_type(const toml::value& value, std::string_view key, std::string_view expected) {
        fail_at(value, key,
                "must be " + std::string(expected) + ", got " + std::string(type_name(value)));
    }

    void fail_at(const toml::value& value, std::string_view key, std::string_view what) {
        diagnostics_.report(value, name_ + " " + std::string(key), what);
    }

    const toml::value& table_;
    std::string name_;
    Diagnostics& diagnostics_;
};

// The keys [defaults] and [[device]] share, so one overlay() serves both.
PolicyOverrides read_policy(Section& section) {
    PolicyOverrides rule;
    rule.mode = section.choice("mode", mode_names);
    rule.backend = section.choice("backend", backend_names);
    rule.limit_us = section.integer("limit_us", 0, max_limit_us);
    rule.latency_fraction = section.fraction("latency_fraction");
    rule.min_limit_us = section.integer("min_limit_us", 0, max_limit_us);
    rule.max_limit_us = section.integer("max_limit_us", 0, max_limit_us);
    if (section.is_string("linger_ms")) {
        if (section.choice("linger_ms", linger_names))
            rule.linger_auto = true;
    } else if ((rule.linger = section.millis("linger_ms", 0, 60'000))) {
        rule.linger_auto = false;
    }
    rule.waiter_cpus = section.boolean("waiter_cpus");
    rule.prearm = section.boolean("prearm");
    rule.min_samples = section.integer("min_samples", 1, 1'000'000);
    return rule;
}

void overlay(Policy& policy, const PolicyOverrides& rule) {
    policy.mode = rule.mode.value_or(policy.mode);
    policy.backend = rule.backend.value_or(policy.backend);
    policy.limit_us = rule.limit_us.value_or(policy.limit_us);
    policy.latency_fraction = rule.latency_fraction.value_or(policy.latency_fraction);
    policy.min_limit_us = rule.min_limit_us.value_or(policy.min_limit_us);
    if (rule.max_limit_us)
        policy.max_limit_us = rule.max_limit_us;
    policy.linger = rule.linger.value_or(policy.linger);
    policy.linger_auto = rule.linger_auto.value_or(policy.linger_auto);
    policy.waiter_cpus = rule.waiter_cpus.value_or(policy.waiter_cpus);
    policy.prearm = rule.prearm.value_or(policy.prearm);
    policy.min_samples = rule.min_samples.value_or(policy.min_samples);
}

// The clamps `rule` sets, completed from `base`, must not cross. The key this
// table gave is blamed (max_limit_us when it gave both).
void check_limits(Section& section, const PolicyOverrides& rule, const Policy& base) {
    Policy result = base;
    overlay(result, rule);
    if (!result.max_limit_us || *result.max_limit_us >= result.min_limit_us)
        return;
    const auto min = std::to_string(result.min_limit_us);
    const auto max = std::to_string(*result.max_limit_us);
    if (rule.max_limit_us)
        section.fail("max_limit_us", "must be >= min_limit_us (" + min + "), got " + max);
    else if (rule.min_limit_us)
        section.fail("min_limit_us", "must be <= max_limit_us (" + max + "), got " + min);
}

void read_daemon(Section& section, DaemonSettings& daemon) {
    section.reject_unknown({daemon_keys});
    daemon.sample_interval =
        section.millis("sample_interval_ms", 1, 1'000).value_or(daemon.sample_interval);
    daemon.steady_interval =
        section.millis("steady_interval_ms", 1, 1'000).value_or(daemon.steady_interval);
    daemon.idle_interval =
        section.millis("idle_interval_ms", 1, 10'000).value_or(daemon.idle_interval);
    daemon.status_interval =
        section.millis("status_interval_ms", 10, 60'000).value_or(daemon.status_interval);
    daemon.runtime_dir = section.absolute_path("runtime_dir").value_or(daemon.runtime_dir);
    daemon.calibration_file =
        section.absolute_path("calibration_file").value_or(daemon.calibration_file);
    daemon.evidence_file = section.absolute_path("evidence_file").value_or(daemon.evidence_file);
    if (auto level = section.choice("log_level", log_levels))
        daemon.log_level = std::string(*level);
    daemon.io_events = section.boolean("io_events").value_or(daemon.io_events);
    daemon.queue_inflight = section.boolean("queue_inflight").value_or(daemon.queue_inflight);
    daemon.calibrate_on_start =
        section.boolean("calibrate_on_start").value_or(daemon.calibrate_on_start);
    // "" is configured too: no metrics, not even where the default's
    // directory exists.
    if (auto metrics = section.absolute_path_or_none("metrics_file")) {
        daemon.metrics_file = *metrics;
        daemon.metrics_file_configured = true;
    }
}

std::optional<DeviceRule> read_device(Section& section, const Policy& defaults) {
    section.reject_unknown({matcher_keys, policy_keys});
    DeviceRule rule;
    static_cast<PolicyOverrides&>(rule) = read_policy(section);
    DeviceMatch& match = rule.match;
    match.name = section.matcher("name", true).value_or("");
    match.model = section.matcher("model", true).value_or("");
    match.serial = section.matcher("serial", false).value_or("");
    match.wwid = section.matcher("wwid", false).value_or("");
    match.transport = section.matcher("transport", false).value_or("");
    const bool has_matcher = std::any_of(std::begin(matcher_keys), std::end(matcher_keys),
                                         [&](auto key) { return section.contains(key); });
    if (!has_matcher) {
        section.fail_table("needs at least one of name, model, serial, wwid, transport");
        return std::nullopt;
    }
    check_limits(section, rule, defaults);
    return rule;
}

// "[error] toml::parse_table: table ("a") already exists." -> "table ("a") already exists."
std::string syntax_message(std::string_view what) {
    what = what.substr(0, what.find('\n'));
    if (what.starts_with("[error] "))
        what.remove_prefix(8);
    if (const auto colon = what.find(": "); what.starts_with("toml::") && colon != what.npos)
        what.remove_prefix(colon + 2);
    return std::string(what);
}

// Parses one document on top of `config`: the keys it gives override, its
// [[device]] entries are appended.
Result<Config> parse_onto(Config config, std::string_view text, const std::string& source) {
    if (auto utf8 = check_toml_utf8(text, source); !utf8)
        return utf8.error();
    toml::value root;
    try {
        std::istringstream in{std::string(text)};
        root = toml::parse(in, source);
    } catch (const toml::exception& e) {
        return make_error(toml_where(source, e.location()) +
                          ": syntax error: " + syntax_message(e.what()));
    } catch (const std::exception& e) {
        return make_error("Failed to parse " + source + ": " + e.what());
    }

    Diagnostics diagnostics(source);
    auto as_section = [&](const toml::value& value, const std::string& name) {
        if (!value.is_table()) {
            diagnostics.report(value, name,
                               "must be a table, got " + std::string(type_name(value)));
            return std::optional<Section>();
        }
        return std::optional<Section>(std::in_place, value, name, diagnostics);
    };
    for (const auto& [key, value] : root.as_table()) {
        if (key == "daemon") {
            if (auto section = as_section(value, "[daemon]"))
                read_daemon(*section, config.daemon);
        } else if (key != "defaults" && key != "device") {
            diagnostics.report(value, key,
                               "unknown key; expected [daemon], [defaults] or [[device]]");
        }
    }
    // [defaults] before [[device]]: an entry's clamps are checked against them.
    if (root.contains("defaults")) {
        if (auto section = as_section(root.at("defaults"), "[defaults]")) {
            section->reject_unknown({policy_keys});
            const PolicyOverrides defaults = read_policy(*section);
            check_limits(*section, defaults, config.defaults);
            overlay(config.defaults, defaults);
        }
    }
    if (root.contains("device")) {
        const auto& devices = root.at("device");
        if (!devices.is_array()) {
            diagnostics.report(devices, "[[device]]",
                               "must be an array of tables, got " +
                                   std::string(type_name(devices)));
        } else {
            for (const auto& entry : devices.as_array()) {
                auto section = as_section(entry, "[[device]]");
                auto rule = section ? read_device(*section, config.defaults) : std::nullopt;
                if (rule) {
                    rule->origin = diagnostics.where(entry);
                    config.devices.push_back(std::move(*rule));
                }
            }
        }
    }
    if (diagnostics.first())
        return *diagnostics.first();
    config.sources.emplace_back(source);
    return config;
}

// The matchers an entry gives, as written: `name = "nvme9n1", serial = "S1"`.
// A rule whose name matches a disk can still match none by another key.
std::string given_matchers(const DeviceMatch& match) {
    const std::pair<std::string_view, std::string_view> keys[] = {{"name", match.name},
                                                                  {"model", match.model},
                                                                  {"serial", match.serial},
                                                                  {"wwid", match.wwid},
                                                                  {"transport", match.transport}};
    std::string out;
    for (const auto& [key, value] : keys)
        if (!value.empty())
            out += std::string(out.empty() ? "" : ", ") + std::string(key) + " = \"" +
                   std::string(value) + "\"";
    return out;
}

bool glob_matches(const std::string& pattern, std::string_view text) {
    return fnmatch(pattern.c_str(), std::string(text).c_str(), 0) == 0;
}

} // namespace

std::string_view to_string(Mode mode) {
    return name_of(mode_names, mode);
}
std::string_view to_string(Backend backend) {
    return name_of(backend_names, backend);
}

Config default_config() {
    return Config{};
}

Result<Config> parse_config(std::string_view text, const std::string& source_name) {
    return parse_onto(default_config(), text, source_name);
}

Result<Config> parse_config_layers(std::span<const ConfigText> layers) {
    Config config = default_config();
    for (const auto& layer : layers) {
        auto next = parse_onto(std::move(config), layer.text, layer.source.string());
        if (!next)
            return next.error();
        config = std::move(*next);
    }
    return config;
}

bool matches(const DeviceMatch& match, const DeviceIdentity& device) {
    return (match.name.empty() || glob_matches(match.name, device.name) ||
            (!device.head.empty() && glob_matches(match.name, device.head))) &&
           (match.model.empty() ||
            glob_matches(std::string(trim(match.model)), trim(device.model))) &&
           (match.serial.empty() || trim(match.serial) == trim(device.serial)) &&
           (match.wwid.empty() || match.wwid == device.wwid) &&
           (match.transport.empty() || match.transport == device.transport);
}

std::vector<std::string> unmatched_name_rules(const Config& config,
                                              std::span<const DeviceIdentity> devices) {
    std::vector<std::string> warnings;
    for (const auto& rule : config.devices) {
        if (rule.match.name.empty())
            continue;
        const bool any = std::any_of(devices.begin(), devices.end(), [&](const auto& device) {
            return matches(rule.match, device);
        });
        if (!any)
            warnings.push_back(rule.origin + ": [[device]] " + given_matchers(rule.match) +
                               " matches no block device");
    }
    return warnings;
}

Policy resolve_policy(const Config& config, const DeviceIdentity& device) {
    Policy policy = config.defaults;
    for (const auto& rule : config.devices)
        if (matches(rule.match, device))
            overlay(policy, rule);
    // Entries are checked one by one; two of them may still cross: the floor wins.
    if (policy.max_limit_us && *policy.max_limit_us < policy.min_limit_us)
        policy.max_limit_us = policy.min_limit_us;
    return policy;
}

} // namespace latgov
