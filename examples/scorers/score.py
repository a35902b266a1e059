#!/usr/bin/env python3
"""A promptgauge `command` scorer: the share of the terms a case says its answer must
mention (vars.must_mention) that the answer mentions.

The protocol (docs/guide/scorers.md): one JSON request per line on stdin, one JSON reply per
line on stdout, in order, flushed. This process lives for the whole run and scores many
answers; anything it prints on stderr is kept with the answer it was scoring.
"""
import json
import sys


def score(request):
    terms = request["case"]["vars"].get("must_mention")
    if not isinstance(terms, list) or not terms:
        # Not a wrong answer: a case this scorer cannot judge. The job fails with this.
        return {"error": "the case has no vars.must_mention list"}
    answer = request["answer"].lower()
    missing = [t for t in terms if t.lower() not in answer]
    reply = {
        "score": (len(terms) - len(missing)) / len(terms),
        "detail": {"missing": missing},
    }
    if request.get("finish_reason") == "length":
        reply["detail"]["truncated"] = True
    return reply


for line in sys.stdin:
    request = json.loads(line)
    reply = score(request)
    reply["id"] = request["id"]
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
