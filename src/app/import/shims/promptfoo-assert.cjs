#!/usr/bin/env node
// Written by `promptgauge import promptfoo`: runs one promptfoo `javascript` assert as a
// promptgauge `command` scorer (docs/guide/scorers.md; docs/guide/import-promptfoo.md).
//   node promptfoo-assert.cjs inline:CODE [--threshold=T] [--parse-json]
//   node promptfoo-assert.cjs file:PATH[:FUNCTION] [--threshold=T] [--parse-json]
// promptfoo's calling convention: the assert gets `output` and `context` ({vars, prompt,
// test}); one line of code is an expression (`return` is added), several lines a function
// body; a file exports the function (or names it after `:`). It returns a boolean, a
// number (a pass above 0, or at the threshold), or {pass, score, reason}; an assert that
// throws fails, as in promptfoo (a file that cannot be loaded fails the job). The reply is
// the pass as 1 or 0, with promptfoo's score and reason as detail.
"use strict";
const path = require("node:path");
const readline = require("node:readline");
const util = require("node:util");

// Standard output carries the replies alone: what an assert prints (promptfoo's examples
// log the prompt and the vars) goes to standard error, as promptfoo only shows it.
const reply = process.stdout.write.bind(process.stdout);
const toErr = (...a) => process.stderr.write(util.format(...a) + "\n");
console.log = console.info = console.debug = console.warn = console.trace = toErr;
process.stdout.write = process.stderr.write.bind(process.stderr);

const target = process.argv[2] || "";
const thresholdArg = process.argv.find((a) => a.startsWith("--threshold="));
const threshold = thresholdArg ? Number(thresholdArg.slice("--threshold=".length)) : undefined;
// The prompts ask for a JSON schema's answer, which promptfoo parses before its asserts.
const parseJson = process.argv.includes("--parse-json");

// The answer as promptfoo's OpenAI provider hands it to asserts: its tool calls when it
// made some and said nothing, the parsed JSON for a schema's answer, else the text.
function output(request) {
  const text = request.answer || "";
  const calls = request.tool_calls || [];
  if (!text && calls.length) {
    return calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
  }
  if (parseJson) {
    try {
      return JSON.parse(text);
    } catch (_) {}
  }
  return text;
}

// The last `;` outside a string, or -1.
function lastStatementEnd(code) {
  let quote = null;
  let last = -1;
  for (let i = 0; i < code.length; i++) {
    const c = code[i];
    if (c === "\\") {
      i++;
      continue;
    }
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"' || c === "`") quote = c;
    else if (c === ";") last = i;
  }
  return last;
}

// One line of code as promptfoo runs it: `return` before the expression, trailing `;`s
// dropped; a line declaring variables returns its last statement.
function functionBody(code) {
  const trimmed = code.trim().replace(/;+\s*$/, "");
  if (/^(const|let|var)\s/.test(trimmed)) {
    const end = lastStatementEnd(trimmed);
    const last = end === -1 ? "" : trimmed.slice(end + 1).trim();
    return last ? `${trimmed.slice(0, end + 1)} return ${last}` : trimmed;
  }
  return `return ${trimmed}`;
}

function load() {
  if (target.startsWith("inline:")) {
    const code = target.slice("inline:".length).trimEnd();
    const body = code.includes("\n") ? code : functionBody(code);
    return new Function("output", "context", body);
  }
  const spec = target.slice("file:".length);
  const at = spec.lastIndexOf(":");
  const [file, name] = at > 0 && !spec.slice(at).includes("/") ? [spec.slice(0, at), spec.slice(at + 1)] : [spec, undefined];
  const mod = require(path.resolve(file));
  const fn = name ? mod[name] : typeof mod === "function" ? mod : mod.default;
  if (typeof fn !== "function") throw new Error(`${file} exports no function${name ? ` ${name}` : ""}`);
  return fn;
}

function verdict(result) {
  if (typeof result === "boolean") return { pass: result, score: result ? 1 : 0 };
  if (typeof result === "number") {
    return { pass: threshold === undefined ? result > 0 : result >= threshold, score: result };
  }
  if (result && typeof result === "object" && "pass" in result) {
    return { pass: Boolean(result.pass), score: result.score, reason: result.reason };
  }
  throw new Error(`the assert returned ${JSON.stringify(result)}, not a boolean, a number or {pass, score, reason}`);
}

let assertFn;
const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", async (line) => {
  const request = JSON.parse(line);
  let answer;
  try {
    assertFn = assertFn || load();
    const vars = request.case.vars || {};
    const users = (request.messages || []).filter((m) => m.role === "user");
    const prompt = users.length ? users[users.length - 1].content : "";
    const context = { vars, prompt, test: { vars } };
    let v;
    try {
      v = verdict(await assertFn(output(request), context));
    } catch (e) {
      // promptfoo fails an assert that throws (or returns what it cannot read).
      v = { pass: false, score: 0, reason: `the assert threw: ${e && e.message ? e.message : e}` };
    }
    answer = { score: v.pass ? 1 : 0, detail: { score: v.score, reason: v.reason } };
  } catch (e) {
    answer = { error: String(e && e.message ? e.message : e) };
  }
  answer.id = request.id;
  reply(JSON.stringify(answer) + "\n");
});
