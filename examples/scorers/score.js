#!/usr/bin/env node
// A promptgauge `command` scorer, the same as score.py in JavaScript: the share of the
// terms a case says its answer must mention (vars.must_mention) that the answer mentions.
//
// The protocol (docs/guide/scorers.md): one JSON request per line on stdin, one JSON reply per
// line on stdout, in order. This process lives for the whole run and scores many answers;
// anything it writes on stderr is kept with the answer it was scoring.
"use strict";
const readline = require("node:readline");

function score(request) {
  const terms = request.case.vars.must_mention;
  if (!Array.isArray(terms) || terms.length === 0) {
    // Not a wrong answer: a case this scorer cannot judge. The job fails with this.
    return { error: "the case has no vars.must_mention list" };
  }
  const answer = request.answer.toLowerCase();
  const missing = terms.filter((t) => !answer.includes(t.toLowerCase()));
  const reply = {
    score: (terms.length - missing.length) / terms.length,
    detail: { missing },
  };
  if (request.finish_reason === "length") reply.detail.truncated = true;
  return reply;
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", (line) => {
  const request = JSON.parse(line);
  const reply = score(request);
  reply.id = request.id;
  process.stdout.write(JSON.stringify(reply) + "\n");
});
