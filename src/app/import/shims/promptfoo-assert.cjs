#!/usr/bin/env node
// Written by `promptgauge import promptfoo`: runs one promptfoo `javascript` assert as a
// promptgauge `command` scorer (docs/guide/scorers.md; docs/guide/import-promptfoo.md).
//   node promptfoo-assert.cjs inline:CODE [--threshold=T]
//   node promptfoo-assert.cjs file:PATH[:FUNCTION] [--threshold=T]
// promptfoo's calling convention: the assert gets `output` and `context` ({vars, prompt,
// test}); one line of code is an expression (`return` is added), several lines a function
// body; a file exports the function (or names it after `:`). It returns a boolean, a
// number (a pass above 0, or at the threshold), or {pass, score, reason}. The reply is the
// pass as 1 or 0, with promptfoo's score and reason as detail.
"use strict";
const path = require("node:path");
const readline = require("node:readline");

const target = process.argv[2] || "";
const thresholdArg = process.argv.find((a) => a.startsWith("--threshold="));
const threshold = thresholdArg ? Number(thresholdArg.slice("--threshold=".length)) : undefined;

function load() {
  if (target.startsWith("inline:")) {
    const code = target.slice("inline:".length);
    const body = code.includes("\n") ? code : `return ${code}`;
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
  let reply;
  try {
    assertFn = assertFn || load();
    const vars = request.case.vars || {};
    const users = (request.messages || []).filter((m) => m.role === "user");
    const prompt = users.length ? users[users.length - 1].content : "";
    const context = { vars, prompt, test: { vars } };
    const v = verdict(await assertFn(request.answer || "", context));
    reply = { score: v.pass ? 1 : 0, detail: { score: v.score, reason: v.reason } };
  } catch (e) {
    reply = { error: String(e && e.message ? e.message : e) };
  }
  reply.id = request.id;
  process.stdout.write(JSON.stringify(reply) + "\n");
});
