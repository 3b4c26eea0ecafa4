// How latgov's JSON documents (topology, status) spell shared values, and
// how they are read back.
#pragma once

#include "latgov/parse.hpp"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace latgov {

// A document as text. Its strings may come from outside latgov (a drive's
// model and serial are firmware bytes) and need not be UTF-8: invalid bytes
// are replaced, never thrown on.
template <typename Json>
std::string dump_text(const Json& value, int indent = -1) {
    return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// dump_text for a terminal: JSON leaves DEL and the C1 controls
// (U+0080..U+009F) unescaped, and a terminal acts on them; here they are
// written \u007f.., as JSON allows (outside strings a document has neither).
template <typename Json>
std::string dump_for_terminal(const Json& value, int indent = -1) {
    const std::string text = dump_text(value, indent);
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
        if (byte == 0x7f) {
            out += "\\u007f";
        } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {
            constexpr char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[next >> 4];
            out += hex[next & 0xf];
            ++i;
        } else {
            out += text[i];
        }
    }
    return out;
}

// A latency limit: the number of microseconds, or null for no limit.
inline nlohmann::ordered_json limit_json(LatencyLimit limit) {
    return limit ? nlohmann::ordered_json(*limit) : nlohmann::ordered_json(nullptr);
}

// One value of a document read back, and the path that names it in errors
// ("devices[0].limit_us"). A file need not be what latgovd wrote: what is
// missing or of another type throws std::invalid_argument naming the path,
// never nlohmann's errors (which name no field) and never a conversion out
// of range (a float like 1e84 into an int is undefined behaviour).
class JsonField {
  public:
    explicit JsonField(const nlohmann::json& value, std::string path = {})
        : value_(value), path_(std::move(path)) {}

    bool is_null() const { return value_.is_null(); }

    // The member `key`, which must be there (null is a value).
    JsonField at(std::string_view key) const {
        if (!value_.is_object())
            expected("an object");
        const auto it = value_.find(std::string(key));
        if (it == value_.end())
            throw std::invalid_argument(child_path(key) + ": missing");
        return JsonField(*it, child_path(key));
    }

    // The member `key`, or nullopt when it is missing or null (a field older
    // files lack, or one latgovd leaves empty).
    std::optional<JsonField> find(std::string_view key) const {
        if (!value_.is_object())
            expected("an object");
        const auto it = value_.find(std::string(key));
        if (it == value_.end() || it->is_null())
            return std::nullopt;
        return JsonField(*it, child_path(key));
    }

    std::vector<JsonField> items() const {
        if (!value_.is_array())
            expected("an array");
        std::vector<JsonField> out;
        for (std::size_t i = 0; i < value_.size(); ++i)
            out.emplace_back(value_[i], path_ + "[" + std::to_string(i) + "]");
        return out;
    }

    // A whole number in T's range.
    template <typename T>
    T whole() const {
        if (value_.is_number_unsigned()) {
            if (const auto n = value_.get<std::uint64_t>(); std::in_range<T>(n))
                return static_cast<T>(n);
        } else if (value_.is_number_integer()) {
            if (const auto n = value_.get<std::int64_t>(); std::in_range<T>(n))
                return static_cast<T>(n);
        } else {
            expected("a whole number");
        }
        fail("must be in " + std::to_string(std::numeric_limits<T>::min()) + ".." +
             std::to_string(std::numeric_limits<T>::max()) + ", got " + text_of(value_));
    }

    double number() const {
        if (!value_.is_number())
            expected("a number");
        return value_.get<double>();
    }

    const std::string& text() const {
        if (!value_.is_string())
            expected("a string");
        return value_.get_ref<const std::string&>();
    }

  private:
    std::string child_path(std::string_view key) const {
        return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    }

    static std::string text_of(const nlohmann::json& value) { return dump_text(value); }

    [[noreturn]] void expected(std::string_view what) const {
        fail("expected " + std::string(what) + ", got " + text_of(value_));
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw std::invalid_argument(path_.empty() ? what : path_ + ": " + what);
    }

    const nlohmann::json& value_;
    std::string path_;
};

// A whole number in T's range, where no path is needed in the error.
template <typename T>
T whole(const nlohmann::json& value) {
    return JsonField(value).whole<T>();
}

} // namespace latgov
