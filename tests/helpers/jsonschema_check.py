#!/usr/bin/env python3
"""jsonschema_check.py SCHEMA DEF FILE... — validate allocctl --json documents against
$defs/DEF of SCHEMA (cli/schema/allocctl-json-1.schema.json), and against the schema as a
whole (a document must match exactly one of its definitions). Strict: every object the
schema describes is closed (additionalProperties false), so a key the CLI prints but the
schema does not describe fails here, while the checked-in file stays open for consumers
(keys are added within a version). One line per error; exit 1 if any."""
import copy
import json
import sys

import jsonschema


def closed(node):
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for v in node.values():
            closed(v)
    elif isinstance(node, list):
        for v in node:
            closed(v)
    return node


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    name = sys.argv[2]
    if name not in schema["$defs"]:
        print(f"no definition {name} in {sys.argv[1]}", file=sys.stderr)
        return 2
    jsonschema.Draft202012Validator.check_schema(schema)
    strict = closed(copy.deepcopy(schema))
    strict.pop("oneOf")
    strict["$ref"] = "#/$defs/" + name
    whole = jsonschema.Draft202012Validator(schema)
    one = jsonschema.Draft202012Validator(strict)
    bad = 0
    for path in sys.argv[3:]:
        with open(path) as f:
            doc = json.load(f)
        for e in sorted(one.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in e.absolute_path) or "(document)"
            print(f"{path}: {name}: {where}: {e.message}")
            bad += 1
        if not bad and not whole.is_valid(doc):
            print(f"{path}: matches not exactly one definition of the schema")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
