#!/usr/bin/env python3
# Written by `promptgauge import promptfoo`: runs one promptfoo `python` assert as a
# promptgauge `command` scorer (docs/guide/scorers.md; docs/guide/import-promptfoo.md).
#   python3 promptfoo-assert.py inline:CODE [--threshold=T] [--parse-json]
#   python3 promptfoo-assert.py file:PATH[:FUNCTION] [--threshold=T] [--parse-json]
# promptfoo's calling convention: the assert gets `output` and `context` ({vars, prompt,
# test}); one line of code is an expression, several lines a function body; a file
# defines get_assert(output, context) (or the function named after `:`). It returns a
# bool, a number (a pass above 0, or at the threshold), or {pass, score, reason}; an
# assert that raises fails, as in promptfoo (a file that cannot be loaded fails the job).
# The reply is the pass as 1 or 0, with promptfoo's score and reason as detail.
import importlib.util
import json
import sys
import textwrap

TARGET = sys.argv[1] if len(sys.argv) > 1 else ""
THRESHOLD = next((float(a.split("=", 1)[1]) for a in sys.argv[2:] if a.startswith("--threshold=")), None)
# The prompts ask for a JSON schema's answer, which promptfoo parses before its asserts.
PARSE_JSON = "--parse-json" in sys.argv[2:]


def output(request):
    """The answer as promptfoo's OpenAI provider hands it to asserts: its tool calls when
    it made some and said nothing, the parsed JSON for a schema's answer, else the text."""
    text = request.get("answer") or ""
    calls = request.get("tool_calls") or []
    if not text and calls:
        return [{"id": c.get("id"), "type": "function",
                 "function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in calls]
    if PARSE_JSON:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def load():
    if TARGET.startswith("inline:"):
        code = TARGET[len("inline:"):]
        body = code if "\n" in code.strip() else "return " + code.strip()
        scope = {}
        exec("def main(output, context):\n" + textwrap.indent(body, "    "), scope)
        return scope["main"]
    spec = TARGET[len("file:"):]
    path, name = spec, ""
    head, sep, tail = spec.rpartition(":")
    if sep and head and "/" not in tail and "." not in tail:
        path, name = head, tail
    module_spec = importlib.util.spec_from_file_location("promptfoo_assert", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name or "get_assert")


def verdict(result):
    if isinstance(result, bool):
        return result, float(result), None
    if isinstance(result, (int, float)):
        passed = result > 0 if THRESHOLD is None else result >= THRESHOLD
        return passed, result, None
    if isinstance(result, dict) and "pass" in result:
        return bool(result["pass"]), result.get("score"), result.get("reason")
    raise ValueError("the assert returned %r, not a bool, a number or {pass, score, reason}" % (result,))


def main():
    # Standard output carries the replies alone: what an assert prints (promptfoo's
    # examples print the prompt and the vars) goes to standard error.
    replies = sys.stdout
    sys.stdout = sys.stderr
    assert_fn = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            assert_fn = assert_fn or load()
            variables = request["case"].get("vars") or {}
            users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
            context = {"vars": variables, "prompt": users[-1]["content"] if users else "", "test": {"vars": variables}}
            try:
                passed, score, reason = verdict(assert_fn(output(request), context))
            except Exception as e:  # promptfoo fails an assert that raises
                passed, score, reason = False, 0, "the assert raised: %s" % e
            reply = {"score": 1 if passed else 0, "detail": {"score": score, "reason": reason}}
        except Exception as e:  # a file that cannot be loaded: the job fails with the cause
            reply = {"error": str(e)}
        reply["id"] = request["id"]
        print(json.dumps(reply), file=replies, flush=True)


main()
