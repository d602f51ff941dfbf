#include "schema_check.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <stdexcept>

namespace hiodsfs::test {

using nlohmann::json;

namespace {

const std::set<std::string> kTypes = {"null", "boolean", "integer", "number", "string", "array", "object"};

std::vector<std::string> types_of(const json& schema) {
    const json& t = schema.at("type");
    return t.is_array() ? t.get<std::vector<std::string>>() : std::vector<std::string>{t.get<std::string>()};
}

// The whole schema up front, not only the parts a document reaches: an
// optional member's schema (history) is checked even when absent.
void check_keywords(const json& schema, const std::string& where) {
    static const std::set<std::string> known = {"$schema", "title", "type", "enum", "required", "properties",
                                                "additionalProperties", "items", "minimum", "maximum"};
    auto unsupported = [&](const std::string& what) {
        throw std::logic_error("schema " + where + ": " + what + " is not implemented by this validator");
    };
    if (!schema.is_object()) unsupported("a schema that is not an object");
    for (const auto& [k, v] : schema.items()) {
        if (known.count(k) == 0) unsupported("keyword " + k);
        if (k == "type")
            for (const auto& t : types_of(schema))
                if (kTypes.count(t) == 0) unsupported("type " + t);
        if (k == "additionalProperties" && !v.is_boolean()) unsupported("additionalProperties as a schema");
        if (k == "items") check_keywords(v, where + "/items");  // an array here (tuples) fails as not an object
        if (k == "properties")
            for (const auto& [name, sub] : v.items()) check_keywords(sub, where + "/properties/" + name);
        if ((k == "required" && !v.is_array()) || (k == "enum" && !v.is_array()) ||
            ((k == "minimum" || k == "maximum") && !v.is_number()))
            unsupported(k + " of that form");
    }
}

bool type_ok(const json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    return v.is_object();
}

std::string show(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

void check(const json& v, const json& schema, const std::string& path, std::vector<std::string>* errors) {
    if (schema.contains("type")) {
        const auto types = types_of(schema);
        if (std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_ok(v, t); })) {
            errors->push_back(path + ": " + show(v) + " is not of type " + show(schema["type"]));
            return;
        }
    }
    if (schema.contains("enum")) {
        const json& e = schema["enum"];
        if (std::find(e.begin(), e.end(), v) == e.end())
            errors->push_back(path + ": " + show(v) + " is not one of " + show(e));
    }
    if (v.is_number()) {
        if (schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>())
            errors->push_back(path + ": " + show(v) + " is below " + show(schema["minimum"]));
        if (schema.contains("maximum") && v.get<double>() > schema["maximum"].get<double>())
            errors->push_back(path + ": " + show(v) + " is above " + show(schema["maximum"]));
    }
    if (v.is_object()) {
        for (const auto& k : schema.value("required", json::array()))
            if (!v.contains(k.get<std::string>())) errors->push_back(path + ": missing " + k.get<std::string>());
        const json props = schema.value("properties", json::object());
        for (const auto& [k, member] : v.items()) {
            if (props.contains(k)) check(member, props[k], path + "." + k, errors);
            else if (!schema.value("additionalProperties", true))
                errors->push_back(path + ": unexpected member " + k);
        }
    }
    if (v.is_array() && schema.contains("items"))
        for (std::size_t i = 0; i < v.size(); ++i)
            check(v[i], schema["items"], path + "[" + std::to_string(i) + "]", errors);
}

}  // namespace

std::vector<std::string> schema_violations(const json& doc, const json& schema) {
    check_keywords(schema, "#");
    std::vector<std::string> errors;
    check(doc, schema, "$", &errors);
    return errors;
}

json read_json_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    return json::parse(in);
}

}  // namespace hiodsfs::test
