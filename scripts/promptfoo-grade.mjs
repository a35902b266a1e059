// The Node half of scripts/promptfoo-yardstick.sh (see its header): promptfoo grades the
// answers promptgauge's simulator gave, with promptfoo's own assertion code, and the two
// grades are compared per (case, assert).
//
//   node promptfoo-grade.mjs record PORT_FILE LOG_FILE
//       An OpenAI-compatible endpoint on 127.0.0.1 that records every request it is sent
//       and answers `REQ-<n>`: a run of the imported bench against it shows, for each job,
//       the messages promptgauge sent.
//   node promptfoo-grade.mjs compare WORK PROMPTFOO_DIR
//       WORK holds src/ (the promptfoo example, a copy), bench/ (what `import` wrote),
//       sim/ (the simulator's run), rec/ (the recorded run) and rec.log. Writes
//       WORK/replay.json, WORK/replay.cjs, WORK/judge.cjs, src/promptfooconfig.replay.yaml,
//       runs `promptfoo eval` on that config (every provider replaced by the replay of
//       promptgauge's answers, keyed by the messages sent), and prints one JSON line of
//       figures for the table.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';

// Asserts a model grades: no judge here, so counted apart, never compared.
const MODEL_GRADED = new Set([
  'llm-rubric', 'model-graded-closedqa', 'factuality', 'model-graded-factuality', 'g-eval',
  'similar', 'answer-relevance', 'context-faithfulness', 'context-recall',
  'context-relevance', 'conversation-relevance', 'select-best', 'max-score', 'moderation',
  'classifier', 'search-rubric', 'pi', 'guardrails', 'human',
].flatMap((k) => [k, `not-${k}`]));
// Asserts of the whole run in promptgauge (gates), not of one answer.
const GATES = new Set(['cost', 'latency']);

function record(portFile, logFile) {
  let n = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url.endsWith('/embeddings')) {
        // An embedding scorer's calls: any vector, so the job is not failed.
        const input = JSON.parse(body || '{}').input;
        const n = Array.isArray(input) ? input.length : 1;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          object: 'list',
          data: Array.from({ length: n }, (_, index) => ({ object: 'embedding', index, embedding: [1, 0, 0] })),
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }));
        return;
      }
      if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
        res.writeHead(404).end('{}');
        return;
      }
      n += 1;
      const parsed = JSON.parse(body || '{}');
      fs.appendFileSync(logFile, JSON.stringify({ n, url: req.url, body: parsed }) + '\n');
      const text = `REQ-${n}`;
      const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
      if (!parsed.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          id: `r${n}`, object: 'chat.completion', model: parsed.model,
          choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          usage,
        }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta, finish, extra = {}) =>
        `data: ${JSON.stringify({ id: `r${n}`, object: 'chat.completion.chunk', model: parsed.model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
      res.write(chunk({ role: 'assistant', content: text }, null));
      res.write(chunk({}, 'stop'));
      res.write(`data: ${JSON.stringify({ id: `r${n}`, object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  server.listen(0, '127.0.0.1', () => fs.writeFileSync(portFile, String(server.address().port)));
}

/// A message's content as comparable text: text parts joined, images by their URL, JSON
/// text with its keys in one order (promptfoo keeps a file's order, promptgauge sorts).
function contentText(c) {
  const canonical = (v) =>
    Array.isArray(v) ? v.map(canonical)
      : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]))
        : v;
  if (typeof c === 'string') {
    const t = c.trim();
    if (t.startsWith('{') || t.startsWith('[')) {
      try { return JSON.stringify(canonical(JSON.parse(t))); } catch {}
    }
    return t;
  }
  if (Array.isArray(c)) {
    return c
      .map((p) => {
        if (typeof p === 'string') return p.trim();
        if (p.type === 'text' || p.type === 'input_text') return String(p.text ?? '').trim();
        if (p.type === 'image_url' || p.type === 'input_image') {
          const u = p.image_url?.url ?? p.image_url;
          return `[image ${u}]`;
        }
        return JSON.stringify(p);
      })
      .join('\n');
  }
  return JSON.stringify(c ?? '');
}

/// The key of a request: its messages' roles and texts.
function keyOf(messages) {
  return JSON.stringify(messages.map((m) => [m.role, contentText(m.content)]));
}

/// promptfoo's rendered prompt as messages, as its OpenAI provider sends it.
function promptMessages(prompt) {
  try {
    const parsed = JSON.parse(prompt);
    if (Array.isArray(parsed) && parsed.every((m) => m && typeof m === 'object' && 'role' in m)) {
      return parsed;
    }
  } catch {}
  return [{ role: 'user', content: prompt }];
}

function readJsonl(file) {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/// The run folder's jobs, each job's last line (a resend takes the failed line's place).
function jobs(runRoot) {
  if (!fs.existsSync(runRoot)) return [];
  const dirs = fs.readdirSync(runRoot).filter((d) => fs.existsSync(path.join(runRoot, d, 'results.jsonl')));
  if (dirs.length === 0) return [];
  const byJob = new Map();
  for (const r of readJsonl(path.join(runRoot, dirs.sort().at(-1), 'results.jsonl'))) {
    if (r.event !== undefined || r.job === undefined) continue;
    byJob.set(r.job, r);
  }
  return [...byJob.values()];
}

const jobKey = (r) => `${r.case_id}\u0000${r.variant}\u0000${r.endpoint ?? ''}\u0000${r.repeat}`;

/// The replay table: for each job of the simulator's run, the messages promptgauge sent
/// (from the recorded run) and the simulator's answer.
function replayTable(work) {
  const sent = new Map(readJsonl(path.join(work, 'rec.log')).map((e) => [`REQ-${e.n}`, e.body]));
  const requests = new Map();
  for (const r of jobs(path.join(work, 'rec'))) {
    // A job whose scorer failed on `REQ-n` keeps it as its partial output.
    const body = sent.get((r.output || r.partial_output || '').trim());
    if (body) requests.set(jobKey(r), body);
  }
  const cases = new Map(
    readJsonl(path.join(work, 'bench', 'cases.jsonl')).map((c) => [c.id, c]),
  );
  const table = [];
  for (const r of jobs(path.join(work, 'sim'))) {
    if (r.repeat !== 0) continue;
    const body = requests.get(jobKey(r));
    const c = cases.get(r.case_id) ?? {};
    table.push({
      key: body ? keyOf(body.messages ?? []) : null,
      endpoint: r.endpoint ?? null,
      case_id: r.case_id,
      variant: r.variant,
      vars: c.vars ?? {},
      grade: c.grade ?? null,
      status: r.status,
      output: r.output ?? '',
      tool_calls: r.tool_calls ?? [],
      score: r.score,
      parts: r.parts ?? null,
    });
  }
  return table;
}

const REPLAY_PROVIDER = `// Written by scripts/promptfoo-grade.mjs: answers each prompt with the answer
// promptgauge's simulator gave to the same messages.
const fs = require('fs');
const table = JSON.parse(fs.readFileSync(__dirname + '/replay.json', 'utf8'));
const used = new Set();
${contentText.toString()}
${keyOf.toString()}
${promptMessages.toString()}
const same = (a, b) => Object.keys(b).every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));
class Replay {
  constructor(options) {
    this.options = options || {};
    this.config = (options && options.config) || {};
  }
  id() { return 'replay:' + (this.options.label || this.config.endpoint || ''); }
  async callApi(prompt, context) {
    const key = keyOf(promptMessages(prompt));
    const vars = (context && context.vars) || {};
    let found = table.filter((e) => e.key === key);
    const here = found.filter((e) => e.endpoint === this.config.endpoint);
    if (here.length) found = here;
    const sameVars = found.filter((e) => same(vars, e.vars));
    if (sameVars.length) found = sameVars;
    const fresh = found.filter((e) => !used.has(e));
    const e = fresh[0] || found[0];
    if (!e) return { output: '', metadata: { pg: null } };
    used.add(e);
    const config = { ...(this.config.original || {}), ...((context && context.prompt && context.prompt.config) || {}) };
    let output = e.output;
    if (e.tool_calls.length && !output) {
      output = config.functions
        ? { name: e.tool_calls[0].name, arguments: e.tool_calls[0].arguments }
        : e.tool_calls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
    }
    if (config.response_format && config.response_format.type === 'json_schema' && typeof output === 'string') {
      try { output = JSON.parse(output); } catch (_) {}
    }
    // A cost next to nothing: promptfoo's cost assert errs on a provider that reports none.
    return { output, cost: 1e-12, metadata: { pg: e } };
  }
}
module.exports = Replay;
`;

// A grader for model-graded asserts, so they neither fail the row nor reach the network:
// their results are counted apart, never compared.
const JUDGE_PROVIDER = `class Judge {
  id() { return 'yardstick-judge'; }
  async callApi() { return { output: JSON.stringify({ pass: true, score: 1, reason: 'not judged: yardstick' }) }; }
  async callEmbeddingApi() { return { embedding: [1, 0, 0] }; }
}
module.exports = Judge;
`;

/// promptgauge's endpoint names, in order, for the providers it knows.
function knownProvider(p) {
  const id = typeof p === 'string' ? p : p?.id ?? p?.provider ?? '';
  return /^(openai|ollama):/.test(id) || /^anthropic:(messages|chat):/.test(id);
}

function yamlLib(promptfooDir) {
  const require = createRequire(path.join(promptfooDir, 'package.json'));
  return require('js-yaml');
}

/// The example's config with every provider replaced by the replay, model-graded asserts
/// pointed at the stand-in judge, and nothing written elsewhere.
function replayConfig(work, yaml, table) {
  const src = path.join(work, 'src');
  const config = yaml.load(fs.readFileSync(path.join(src, 'promptfooconfig.yaml'), 'utf8'));
  const bench = yaml.load(fs.readFileSync(path.join(work, 'bench', 'promptgauge.yaml'), 'utf8'));
  const endpoints = (bench.endpoints ?? []).map((e) => e.name);
  let providers = config.providers ?? ['openai:gpt-4.1-mini'];
  if (typeof providers === 'string' && providers.startsWith('file://')) {
    providers = yaml.load(fs.readFileSync(path.join(src, providers.slice(7)), 'utf8'));
  }
  if (!Array.isArray(providers)) providers = [providers];
  let known = 0;
  config.providers = providers.map((p) => {
    const o = typeof p === 'string' ? { id: p } : { ...p };
    let endpoint = null;
    if (endpoints.length && knownProvider(p)) endpoint = endpoints[known++] ?? null;
    const original = { ...(o.config ?? {}) };
    delete original.apiKey;
    return {
      id: 'file://../replay.cjs',
      label: o.label ?? o.id,
      ...(o.prompts ? { prompts: o.prompts } : {}),
      config: { endpoint, original },
    };
  });
  let defaultTest = config.defaultTest ?? {};
  if (typeof defaultTest === 'string' && defaultTest.startsWith('file://')) {
    defaultTest = yaml.load(fs.readFileSync(path.join(src, defaultTest.slice(7)), 'utf8'));
  }
  defaultTest.options = { ...(defaultTest.options ?? {}), provider: 'file://../judge.cjs' };
  config.defaultTest = defaultTest;
  delete config.outputPath;
  // Managed prompts (pf://) live in promptfoo's cloud: promptfoo cannot load them here.
  if (Array.isArray(config.prompts)) {
    config.prompts = config.prompts.filter((p) => !(typeof p === 'string' && p.startsWith('pf://')));
  }
  fs.writeFileSync(path.join(work, 'replay.json'), JSON.stringify(table));
  fs.writeFileSync(path.join(work, 'replay.cjs'), REPLAY_PROVIDER);
  fs.writeFileSync(path.join(work, 'judge.cjs'), JUDGE_PROVIDER);
  fs.writeFileSync(path.join(src, 'promptfooconfig.replay.yaml'), yaml.dump(config, { lineWidth: -1 }));
}

// The promptgauge scorer kinds an assert of each promptfoo type may become.
const KINDS = {
  equals: ['exact', 'expr'], contains: ['contains', 'expr'], icontains: ['contains', 'expr'],
  'contains-any': ['contains', 'expr'], 'icontains-any': ['contains', 'expr'],
  'starts-with': ['regex', 'expr'], regex: ['regex', 'expr'],
  'is-json': ['json_schema', 'expr', 'all'], 'contains-json': ['json_schema'],
  javascript: ['expr', 'command'], python: ['command'], similar: ['embedding'],
  'llm-rubric': ['judge'], 'model-graded-closedqa': ['judge'], factuality: ['judge'],
  'model-graded-factuality': ['judge'], 'g-eval': ['judge'],
};
const kindsOf = (t) => KINDS[t] ?? (t.startsWith('not-') || t.endsWith('-all') ? ['expr'] : []);

/// A grade's scorers, one per assert it carries: the parts of an `all` or `mean` (an
/// `all` named `asserts` in a `mean` is the deciding asserts, weight-0 metrics after it),
/// or the one scorer.
function leaves(grade) {
  if (!grade) return [];
  if (grade.kind === 'mean' || (grade.kind === 'all' && !grade.name) || grade.name === 'asserts') {
    return (grade.of ?? []).flatMap((g) => (g.name === 'asserts' ? leaves(g) : [g]));
  }
  return [grade];
}

/// promptgauge's score for each of a promptfoo row's asserts (by its place in the test):
/// the asserts matched in order to the case's scorers (weight-0 metrics apart, as the
/// import puts them after the others), an assert whose `metric` names a part to that part,
/// else to the next scorer of a kind its type becomes; an assert the import left out
/// matches none. The score is the job's part of that scorer's name, or the job's score
/// when the case has one scorer.
function pgScores(e, asserts) {
  const parts = leaves(e.grade);
  const one = parts.length === 1 && !(e.grade?.kind === 'all' || e.grade?.kind === 'mean');
  const scores = new Map();
  for (const metric of [false, true]) {
    let j = 0;
    const pool = parts.filter((p) => (e.grade?.kind === 'mean' ? (p === e.grade.of[0] || leaves(e.grade.of[0]).includes(p)) !== metric : !metric));
    asserts.forEach((a, i) => {
      if (!a || (a.weight === 0) !== metric || GATES.has(a.type)) return;
      let k = a.metric ? pool.findIndex((p, x) => x >= j && p.name === a.metric) : -1;
      if (k < 0) {
        const kinds = kindsOf(a.type);
        k = pool.findIndex((p, x) => x >= j && kinds.includes(p.kind));
      }
      if (k < 0) return;
      j = k + 1;
      const leaf = pool[k];
      const part = (e.parts ?? []).find((p) => p.name === leaf.name);
      const score = one ? e.score : part?.score;
      if (score !== undefined) scores.set(i, score);
    });
  }
  return scores;
}

function compare(work, promptfooDir) {
  const yaml = yamlLib(promptfooDir);
  const table = replayTable(work);
  replayConfig(work, yaml, table);
  const out = path.join(work, 'promptfoo-out.json');
  fs.rmSync(out, { force: true });
  const home = path.join(work, 'home');
  const run = spawnSync(
    process.execPath,
    [path.join(promptfooDir, 'dist/src/entrypoint.js'), 'eval', '-c', 'promptfooconfig.replay.yaml',
      '-o', out, '--no-cache', '--no-write', '--no-table', '--no-progress-bar', '-j', '1'],
    {
      cwd: path.join(work, 'src'),
      encoding: 'utf8',
      timeout: 300_000,
      env: {
        PATH: process.env.PATH, HOME: home, PROMPTFOO_DISABLE_TELEMETRY: '1',
        PROMPTFOO_DISABLE_UPDATE: '1', PROMPTFOO_DISABLE_SHARING: '1', PROMPTFOO_CONFIG_DIR: home,
      },
    },
  );
  fs.writeFileSync(path.join(work, 'promptfoo.log'), `${run.stdout}\n${run.stderr}`);
  const figures = {
    pf_ran: fs.existsSync(out), pf_rows: 0, unmatched: 0, unmatched_prompts: {}, read_only: 0,
    case_not_in_bench: 0, pf_errors: {}, pf_errors_unmatched: 0, agree_pass: 0,
    compared: 0, agree: 0, disagree: [], model_graded: 0, gates: 0, dropped: {},
    pg_failed: 0, pg_jobs: table.length, pg_jobs_unused: 0,
  };
  if (!figures.pf_ran) {
    figures.pf_error = (run.stderr || run.stdout || '').split('\n').filter((l) => l.trim()).slice(-3).join(' | ');
    return figures;
  }
  const results = JSON.parse(fs.readFileSync(out, 'utf8')).results.results;
  const usedJobs = new Set();
  for (const r of results) {
    figures.pf_rows += 1;
    const e = r.response?.metadata?.pg;
    const components = r.gradingResult?.componentResults ?? [];
    const asserts = r.testCase?.assert ?? [];
    if (r.error && components.length === 0) {
      // promptfoo could not grade the answer at all (a `transform` that throws on it).
      const why = String(r.error).split('\n')[0].slice(0, 100);
      figures.pf_errors[why] = (figures.pf_errors[why] ?? 0) + 1;
      if (e) usedJobs.add(`${e.case_id}|${e.variant}|${e.endpoint}`);
      else figures.pf_errors_unmatched += 1;
      continue;
    }
    if (!e) {
      const vars = r.vars ?? r.testCase?.vars ?? {};
      const sameVars = (a, b) => Object.keys(b).every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));
      if (asserts.length === 0) figures.read_only += 1;
      else if (!table.some((t) => sameVars(vars, t.vars))) figures.case_not_in_bench += 1;
      else {
        // The case is in the bench, but no job of it sent these messages: a prompt the
        // import left out (named in the notes) or rendered otherwise.
        figures.unmatched += 1;
        const label = r.prompt?.label ?? '?';
        figures.unmatched_prompts[label] = (figures.unmatched_prompts[label] ?? 0) + 1;
      }
      continue;
    }
    usedJobs.add(`${e.case_id}|${e.variant}|${e.endpoint}`);
    if (e.status !== 'graded') {
      figures.pg_failed += 1;
      continue;
    }
    // Each component's assert, by its place in the test (a component whose assert was
    // seen already is one of its nested results: promptfoo lists them after it).
    const taken = new Set();
    const named = components.flatMap((c) => {
      const kind = c.assertion?.type ?? '?';
      let i = asserts.findIndex((a, x) => !taken.has(x) && JSON.stringify(a) === JSON.stringify(c.assertion));
      if (i < 0) i = asserts.findIndex((a, x) => !taken.has(x) && a.type === kind);
      if (i < 0) return [];
      taken.add(i);
      const k = asserts.slice(0, i + 1).filter((a) => a.type === kind).length;
      return [{ c, kind, i, name: k === 1 ? kind : `${kind} ${k}` }];
    });
    const compared = named.filter((x) => !MODEL_GRADED.has(x.kind) && !GATES.has(x.kind));
    const scores = pgScores(e, asserts);
    figures.model_graded += named.filter((x) => MODEL_GRADED.has(x.kind)).length;
    figures.gates += named.filter((x) => GATES.has(x.kind)).length;
    for (const { c, kind, i, name } of compared) {
      const score = scores.get(i);
      if (score === undefined) { figures.dropped[kind] = (figures.dropped[kind] ?? 0) + 1; continue; }
      figures.compared += 1;
      // An assert of weight 0 is a metric: promptfoo passes it whatever it scores, and the
      // bench never decides on it; their scores are what is compared.
      const metric = c.assertion?.weight === 0;
      const pgPass = metric ? score > 0 : score >= 0.999;
      const pfPass = metric ? Number(c.score) > 0 : Boolean(c.pass);
      if (pgPass === pfPass) {
        figures.agree += 1;
        if (pgPass) figures.agree_pass += 1;
      }
      else {
        figures.disagree.push({
          kind: name, case: e.case_id, variant: e.variant, promptfoo: pfPass, promptgauge: score,
          reason: String(c.reason ?? '').slice(0, 160), output: String(e.output).slice(0, 120),
        });
      }
    }
  }
  figures.pg_jobs_unused = table.filter((e) => !usedJobs.has(`${e.case_id}|${e.variant}|${e.endpoint}`)).length;
  return figures;
}

/// The `run` flags that send every endpoint of the bench to URL over chat completions,
/// one a line: `--base-url URL` for a bench with one endpoint (or none), else an
/// `--endpoint NAME=URL,…` for each.
function endpointFlags(benchDir, url, promptfooDir) {
  const bench = yamlLib(promptfooDir).load(fs.readFileSync(path.join(benchDir, 'promptgauge.yaml'), 'utf8'));
  const endpoints = bench.endpoints ?? [];
  if (endpoints.length === 0) {
    const model = bench.endpoint?.model ? [] : ['--model', 'yardstick'];
    return ['--base-url', url, '--protocol', 'openai-chat', ...model];
  }
  return endpoints.flatMap((e) => [
    '--endpoint',
    `${e.name}=${url},model=${e.model ?? 'm'},key_env=YARDSTICK_KEY,protocol=openai-chat`,
  ]);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'record') record(args[0], args[1]);
else if (cmd === 'endpoints') console.log(endpointFlags(args[0], args[1], args[2]).join('\n'));
else if (cmd === 'compare') console.log(JSON.stringify(compare(args[0], args[1])));
else {
  console.error('usage: promptfoo-grade.mjs record PORT_FILE LOG | compare WORK PROMPTFOO_DIR');
  process.exit(2);
}
