#!/usr/bin/python3
"""An independent check of structured answers: each stdin line is {"schema": S, "text": T}; each
stdout line says whether T parses as JSON and validates against S (Debian's python3-jsonschema,
Draft 2020-12), with the reason when it does not."""
import json
import sys

import jsonschema


def check(schema, text):
    try:
        instance = json.loads(text)
    except ValueError as e:
        return {"ok": False, "why": "not JSON: %s" % e}
    try:
        jsonschema.Draft202012Validator(schema).validate(instance)
    except jsonschema.ValidationError as e:
        return {"ok": False, "why": e.message}
    return {"ok": True}


for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        print(json.dumps(check(item["schema"], item["text"])), flush=True)
