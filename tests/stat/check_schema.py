#!/usr/bin/env python3
"""Validates a JSON document (stdin) against docs/hiodsfs-stat.schema.json.

Implements the subset of JSON Schema that schema uses (type, enum, required,
properties, additionalProperties: false, items, minimum, maximum), with the
standard library only. Prints one line per violation; exit 1 if any."""
import json
import sys


def type_ok(value, t):
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    raise ValueError("unsupported type " + t)


def check(value, schema, path, errors):
    known = {"$schema", "title", "type", "enum", "required", "properties", "additionalProperties",
             "items", "minimum", "maximum"}
    unknown = set(schema) - known
    if unknown:
        raise ValueError("schema uses unsupported keywords %s at %s" % (sorted(unknown), path))
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(type_ok(value, t) for t in types):
            errors.append("%s: %r is not of type %s" % (path, value, "/".join(types)))
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %r" % (path, value, schema["enum"]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: %r is below %r" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: %r is above %r" % (path, value, schema["maximum"]))
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                errors.append("%s: missing %s" % (path, k))
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                check(v, props[k], path + "." + k, errors)
            elif schema.get("additionalProperties", True) is False:
                errors.append("%s: unexpected member %s" % (path, k))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            check(v, schema["items"], "%s[%d]" % (path, i), errors)


def main():
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    doc = json.load(sys.stdin)
    errors = []
    check(doc, schema, "$", errors)
    for e in errors:
        print(e)
    sys.exit(1 if errors else 0)


main()
