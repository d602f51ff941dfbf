// A validator for the part of JSON Schema that docs/hiodsfs-stat.schema.json
// uses (Debian has no C++ one): type (one or a list), enum, required,
// properties, additionalProperties (true or false), items (one schema),
// minimum, maximum; $schema and title are ignored. A schema with any other
// keyword throws, so a schema change cannot pass unchecked.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hiodsfs::test {

// One line per violation ("$.space.ratio: ..."); empty when doc is valid.
// "integer" is stricter than the standard: 1.0 is not one, as counters must
// be written as integers. Throws std::logic_error on a keyword it lacks.
std::vector<std::string> schema_violations(const nlohmann::json& doc, const nlohmann::json& schema);

// The file at path, parsed (docs/hiodsfs-stat.schema.json).
nlohmann::json read_json_file(const std::string& path);

}  // namespace hiodsfs::test
