#include "stat/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "hiodsfs/json_quote.h"

namespace hiodsfs::json {

const Value* Value::get(std::string_view key) const {
    if (type != Type::kObject) return nullptr;
    for (const auto& [k, v] : members)
        if (k == key) return &v;
    return nullptr;
}

const Value& Value::at(std::string_view key) const {
    static const Value null;
    const Value* v = get(key);
    return v != nullptr ? *v : null;
}

double Value::num(double def) const {
    if (type != Type::kNumber) return def;
    return std::strtod(text.c_str(), nullptr);
}

std::uint64_t Value::u64(std::uint64_t def) const {
    if (type != Type::kNumber || text.empty() || text[0] == '-') return def;
    if (text.find_first_of(".eE") != std::string::npos) {
        double d = num();
        return d >= 0 && d < 1.8e19 ? static_cast<std::uint64_t>(d) : def;
    }
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    return errno == 0 ? v : def;
}

std::string Value::str(const std::string& def) const { return type == Type::kString ? text : def; }

namespace {

class Parser {
public:
    explicit Parser(std::string_view s) : s_(s) {}

    Status run(Value* out) {
        HIODSFS_TRY(value(out, 0));
        ws();
        if (p_ != s_.size()) return fail("unexpected text after the value");
        return Status::ok();
    }

private:
    Status fail(const std::string& what) {
        return Status::error(EINVAL, "JSON: " + what + " at byte " + std::to_string(p_));
    }
    void ws() {
        while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
    }
    bool lit(std::string_view w) {
        if (s_.substr(p_, w.size()) != w) return false;
        p_ += w.size();
        return true;
    }
    Status value(Value* v, int depth) {
        if (depth > 64) return fail("nesting too deep");
        ws();
        if (p_ >= s_.size()) return fail("unexpected end");
        char c = s_[p_];
        if (c == '{') return object(v, depth);
        if (c == '[') return array(v, depth);
        if (c == '"') {
            v->type = Value::Type::kString;
            return string(&v->text);
        }
        if (lit("true") || lit("false")) {
            v->type = Value::Type::kBool;
            v->boolean = c == 't';
            return Status::ok();
        }
        if (lit("null")) {
            v->type = Value::Type::kNull;
            return Status::ok();
        }
        return number(v);
    }
    Status number(Value* v) {
        std::size_t start = p_;
        if (p_ < s_.size() && s_[p_] == '-') ++p_;
        auto digits = [&] {
            std::size_t d = p_;
            while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
            return p_ > d;
        };
        if (!digits()) return fail("expected a value");
        if (p_ < s_.size() && s_[p_] == '.') {
            ++p_;
            if (!digits()) return fail("bad number");
        }
        if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
            ++p_;
            if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
            if (!digits()) return fail("bad number");
        }
        v->type = Value::Type::kNumber;
        v->text.assign(s_.substr(start, p_ - start));
        return Status::ok();
    }
    Status string(std::string* out) {
        ++p_;  // opening quote
        out->clear();
        while (p_ < s_.size()) {
            char c = s_[p_++];
            if (c == '"') return Status::ok();
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
            if (c != '\\') {
                out->push_back(c);
                continue;
            }
            if (p_ >= s_.size()) break;
            char e = s_[p_++];
            switch (e) {
                case '"': case '\\': case '/': out->push_back(e); break;
                case 'b': out->push_back('\b'); break;
                case 'f': out->push_back('\f'); break;
                case 'n': out->push_back('\n'); break;
                case 'r': out->push_back('\r'); break;
                case 't': out->push_back('\t'); break;
                case 'u': {
                    if (p_ + 4 > s_.size()) return fail("bad \\u escape");
                    unsigned cp = static_cast<unsigned>(std::strtoul(std::string(s_.substr(p_, 4)).c_str(), nullptr, 16));
                    p_ += 4;
                    if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(p_, 2) == "\\u" && p_ + 6 <= s_.size()) {
                        unsigned lo = static_cast<unsigned>(std::strtoul(std::string(s_.substr(p_ + 2, 4)).c_str(), nullptr, 16));
                        if (lo >= 0xDC00 && lo < 0xE000) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            p_ += 6;
                        }
                    }
                    if (cp < 0x80) {
                        out->push_back(static_cast<char>(cp));
                    } else if (cp < 0x800) {
                        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
                        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                    } else if (cp < 0x10000) {
                        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
                        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                    } else {
                        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
                        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
                        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                    }
                    break;
                }
                default: return fail("bad escape");
            }
        }
        return fail("unterminated string");
    }
    Status array(Value* v, int depth) {
        ++p_;
        v->type = Value::Type::kArray;
        ws();
        if (p_ < s_.size() && s_[p_] == ']') {
            ++p_;
            return Status::ok();
        }
        for (;;) {
            v->items.emplace_back();
            HIODSFS_TRY(value(&v->items.back(), depth + 1));
            ws();
            if (p_ < s_.size() && s_[p_] == ',') {
                ++p_;
                continue;
            }
            if (p_ < s_.size() && s_[p_] == ']') {
                ++p_;
                return Status::ok();
            }
            return fail("expected , or ]");
        }
    }
    Status object(Value* v, int depth) {
        ++p_;
        v->type = Value::Type::kObject;
        ws();
        if (p_ < s_.size() && s_[p_] == '}') {
            ++p_;
            return Status::ok();
        }
        for (;;) {
            ws();
            if (p_ >= s_.size() || s_[p_] != '"') return fail("expected a member name");
            std::string key;
            HIODSFS_TRY(string(&key));
            ws();
            if (p_ >= s_.size() || s_[p_] != ':') return fail("expected :");
            ++p_;
            Value member;
            HIODSFS_TRY(value(&member, depth + 1));
            v->members.emplace_back(std::move(key), std::move(member));
            ws();
            if (p_ < s_.size() && s_[p_] == ',') {
                ++p_;
                continue;
            }
            if (p_ < s_.size() && s_[p_] == '}') {
                ++p_;
                return Status::ok();
            }
            return fail("expected , or }");
        }
    }

    std::string_view s_;
    std::size_t p_ = 0;
};

}  // namespace

Status parse(std::string_view text, Value* out) {
    *out = Value{};
    return Parser(text).run(out);
}

std::string quote(std::string_view in) { return json_quote(in); }

std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    // Large values (times, byte counts) keep every integer digit.
    if (std::fabs(v) >= 1e6) std::snprintf(buf, sizeof(buf), "%.3f", v);
    else std::snprintf(buf, sizeof(buf), "%.6g", v);
    return buf;
}

}  // namespace hiodsfs::json
