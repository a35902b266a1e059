//! `check`: everything a run would validate, and the plan, without a single request.

use super::settings::Planned;
use super::{Exit, Failure, shown_urls};
use crate::app::settings::Env;
use crate::cli::CheckArgs;
use promptgauge_report::compare::Detectable;

/// `check`: validates everything a run would and prints the plan; sends nothing.
pub async fn check(args: &CheckArgs, env: &Env) -> Result<Exit, Failure> {
    let Planned {
        plan: mut p, judge, ..
    } = Planned::resolve(&args.plan, env)?;
    let mcp = super::settings::serve_mcp_tools(&mut p).await?;
    say_plan(&p);
    say_endpoints(&p);
    say_served_tools(&p);
    drop(mcp);
    for line in p.bench.programs_said() {
        out!("  {line}");
    }
    say_expressions(&p.bench);
    super::run::check_embedding_endpoints(&p)?;
    // A gate the run would refuse is refused here too (the bench's `gates:` among them).
    let gates = args.gates.or_bench(&p.bench.gates);
    super::run::check_gates(&p, &gates)?;
    let carried = p.bench.gates.said();
    if !carried.is_empty() {
        out!(
            "  gates the bench carries (`gates:`, each unless its flag is given): {}",
            carried.join(", ")
        );
    }
    if let Some(judge) = &judge {
        say_judge(&p, judge);
        for w in &judge.warnings {
            out!("  warning: the judge: {w}");
        }
    }
    if let Some(w) = p.greedy_repeats_warning() {
        out!("  warning: {w}");
    }
    say_cost(&p, judge.as_ref(), args)?;
    say_power(&p);
    super::plan::say_gates(
        &gates.gates(),
        &p.bench,
        promptgauge_suite::plan::largest_family(p.variants.len(), p.grid.len()),
    );
    let limits = &p.bench.limits;
    out!(
        "  limits: concurrency {}, max_attempts {}, timeouts: first token {}, idle {}, total {}",
        limits.concurrency,
        limits.max_attempts,
        humantime::format_duration(limits.first_token_timeout),
        humantime::format_duration(limits.idle_timeout),
        humantime::format_duration(limits.total_timeout)
    );
    if args.probe {
        return probe(&p, judge.as_ref()).await;
    }
    Ok(Exit::Success)
}

/// Each `expr` scorer's expression, once: what scores the answers, in-process.
fn say_expressions(b: &promptgauge_suite::Bench) {
    let mut said: Vec<&str> = Vec::new();
    let grades = std::iter::once(&b.grade).chain(b.cases.iter().filter_map(|c| c.grade.as_ref()));
    for expr in grades.flat_map(|g| g.expressions()) {
        if !said.contains(&expr) {
            said.push(expr);
            out!(
                "  scores with the expression `{expr}` (in-process: no program, no file, no network)"
            );
        }
    }
}

/// Each MCP server's tools, as it listed them (it was started, asked, and stopped).
fn say_served_tools(p: &super::Prepared) {
    for (i, server) in p.bench.mcp.iter().enumerate() {
        let names: Vec<&str> = p
            .bench
            .tools
            .iter()
            .filter(|t| t.served_by == Some(i))
            .map(|t| t.name.as_str())
            .collect();
        out!(
            "  MCP server {} ({}): {} — {}",
            server.label(),
            server.run.join(" "),
            super::count(names.len() as u64, "tool", "tools"),
            names.join(", ")
        );
    }
}

/// The bench, its jobs (cases × variants × endpoints × repeats) and its variants.
fn say_plan(p: &super::Prepared) {
    let b = &p.bench;
    out!("bench {} ({}): ok", b.name, b.path.display());
    let endpoints = if p.grid.is_empty() {
        String::new()
    } else {
        format!(
            " × {}",
            super::count(p.grid.len() as u64, "endpoint", "endpoints")
        )
    };
    out!(
        "  {} × {}{endpoints} × {} = {}",
        super::count(b.cases.len() as u64, "case", "cases"),
        super::count(p.variants.len() as u64, "variant", "variants"),
        super::count(b.repeats, "repeat", "repeats"),
        super::count(p.jobs.len() as u64, "job", "jobs")
    );
    for (i, name) in p.variant_names().iter().enumerate() {
        let v = &b.variants[p.variants[i]];
        out!(
            "  variant {name}{} — {}",
            if i == 0 { " (baseline)" } else { "" },
            v.path.display()
        );
        say_reading(name, v);
        say_format_hint(p, p.variants[i], name);
    }
}

/// A variant whose prompt gives no hint of the format its `extract:` reads (JSON never
/// named, the tag never written): a model not asked for that format may not give it, and
/// the simulator — which answers in the reading's format whatever the prompt asks — cannot
/// show it. Looked for in its templates and in its messages as rendered for its first
/// case (a case's text may carry the instruction).
fn say_format_hint(p: &super::Prepared, variant: usize, name: &str) {
    let b = &p.bench;
    let v = &b.variants[variant];
    let Some(x) = &v.extract else { return };
    let mut prompt: String = v
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(job) = p.jobs.iter().find(|j| j.variant == variant)
        && let Ok(messages) = b.render_job(job)
    {
        for m in messages {
            prompt.push('\n');
            prompt.push_str(&m.content);
        }
    }
    let params = serde_json::Value::Object(b.params_at(variant, &Default::default()));
    let json_mode = params.to_string().to_lowercase().contains("json");
    if let Some(missing) = x.missing_hint(&prompt, json_mode) {
        out!(
            "    warning: {name}'s prompt {missing}, but its extract: {}: a model not asked for that format may not answer in it (the simulator answers in the format extract: reads whatever the prompt asks, so a run on it cannot show this)",
            x.describe()
        );
    }
}

/// How a variant reads its answer (`extract:`), and what that reads in the example answer
/// its own messages give (a few-shot `assistant` message), when they give one.
fn say_reading(name: &str, v: &promptgauge_suite::Variant) {
    let Some(x) = &v.extract else { return };
    out!("    {name}: {} (extract: {})", x.describe(), x.to_yaml());
    let example =
        v.messages.iter().rev().find(|m| {
            m.role == "assistant" && !m.content.contains("{{") && !m.content.contains("{%")
        });
    let Some(example) = example else { return };
    let shown = promptgauge_report::visible(&example.content, 80);
    match promptgauge_grade::read::read(x, &example.content, &Default::default()) {
        Ok(read) => out!("    its example answer \"{shown}\" reads as \"{read}\""),
        Err(nothing) => out!(
            "    warning: {name}'s extract: finds nothing in its own example answer \"{shown}\": {}",
            nothing.0
        ),
    }
}

/// Where the jobs go: each endpoint of a grid (its model, URLs, protocol, price and
/// concurrency), or the one endpoint.
fn say_endpoints(p: &super::Prepared) {
    for (i, g) in p.grid.iter().enumerate() {
        let e = &g.endpoint;
        out!(
            "  endpoint {}{}: model {} at {} ({}), {}, concurrency {}",
            g.name(),
            if i == 0 { " (baseline)" } else { "" },
            e.model,
            if e.base_urls.is_empty() {
                "the built-in SIMULATOR".to_string()
            } else {
                shown_urls(&e.base_urls).join(", ")
            },
            e.protocol,
            g.price.as_ref().map_or_else(
                || "no price".to_string(),
                |p| format!(
                    "${} / ${} per million tokens in / out",
                    p.input_per_mtok, p.output_per_mtok
                )
            ),
            g.limits.concurrency
        );
    }
    match p.endpoint.base_urls.as_slice() {
        _ if !p.grid.is_empty() => {}
        [] => match &p.endpoint.name {
            Some(name) => out!(
                "  endpoint {name}: model {} at the built-in SIMULATOR",
                p.endpoint.model
            ),
            None => out!("  endpoint: the built-in SIMULATOR (no base URL configured)"),
        },
        urls => out!(
            "  endpoint {}{} (from {}), model {}",
            p.endpoint
                .name
                .as_ref()
                .map_or_else(String::new, |n| format!("{n} at ")),
            shown_urls(urls).join(", "),
            p.endpoint.source,
            p.endpoint.model
        ),
    }
}

/// The plan's tokens and cost, estimated (what has no price said), how batched jobs are
/// costed, and `--budget` checked against the estimate.
fn say_cost(
    p: &super::Prepared,
    judge: Option<&super::settings::ResolvedJudge>,
    args: &CheckArgs,
) -> Result<(), Failure> {
    let prices = super::budget::prices(p, judge);
    let estimate = super::budget::estimate(p, &p.jobs, &prices, &|_, _| false)?;
    out!("  estimated prompt tokens: {}", estimate.prompt_tokens);
    if let Some(max) = estimate.completion_tokens {
        out!("  completion tokens at most: {max}");
    }
    let priced = estimate.priced;
    for u in &p.unpriced {
        out!(
            "  unpriced: {}: the estimate leaves it out; price it with {}",
            u.said(),
            u.fix()
        );
    }
    if p.batched() {
        say_batched(p, priced);
    }
    if priced {
        let low = estimate.input;
        let judged = if estimate.judge > 0.0 {
            " (the judge's calls included)"
        } else {
            ""
        };
        match estimate.at_most() {
            Some(high) => {
                out!("  estimated cost: ${low:.4} for input, at most ${high:.4} in all{judged}")
            }
            None => out!(
                "  estimated cost: ${low:.4} for input, plus output (set max_tokens to bound it)"
            ),
        }
    }
    if p.bench.has_tools() {
        out!(
            "  note: each job is an agent loop of up to {} requests (loop.max_turns), each carrying the results so far; the estimate counts the first request alone",
            p.bench.loop_limits.max_turns
        );
    }
    if estimate.judge_unpriced && priced {
        out!("  note: the judge has no price: the estimate leaves its calls out");
    }
    if estimate.by_url {
        out!(
            "  note: {} (--fetch-urls counts what they hold)",
            super::budget::BY_URL
        );
    }
    if let Some(budget) = args.plan.budget {
        super::budget::check_priced(p, &prices, estimate.judge_unpriced)?;
        match super::budget::check_estimate(&estimate, budget, 0.0, args.plan.run_to_budget) {
            Ok(line) => out!("  {line}"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// How batched jobs go and are costed: at the batch price, or (a price without one) at
/// the streaming price, said.
fn say_batched(p: &super::Prepared, priced: bool) {
    let unbatched_price = if p.grid.is_empty() {
        p.endpoint.batch && p.bench.price.as_ref().is_some_and(|p| !p.has_batch_price())
    } else {
        p.grid
            .iter()
            .any(|g| g.endpoint.batch && g.price.as_ref().is_some_and(|p| !p.has_batch_price()))
    };
    if unbatched_price {
        out!(
            "  note: batched jobs are costed at the streaming price: the price gives no batch price (set price.batch_discount: 0.5, or batch_input_per_mtok and batch_output_per_mtok)"
        );
    } else if priced {
        out!("  batched: jobs go through the provider's batch API, costed at its price");
    } else {
        out!("  batched: jobs go through the provider's batch API");
    }
}

/// What the plan can detect: the smallest difference at its cases, what repeats change,
/// and `--until-decided`'s design.
fn say_power(p: &super::Prepared) {
    let b = &p.bench;
    let detectable = Detectable::new(
        b.cases.len() as u64,
        0.5,
        b.confidence,
        promptgauge_suite::plan::largest_family(p.variants.len(), p.grid.len()),
    )
    .in_grid(!p.grid.is_empty());
    out!("  {}", detectable.sentence(b.confidence));
    if b.repeats > 1 {
        out!(
            "  with {} answers per case the test is on case means: answers of a case that vary detect smaller differences, answers that always agree the same ones (the run's reports give the figure at the agreement they measure)",
            b.repeats
        );
    }
    if let Some(best) = p.sequential.as_ref().and_then(|s| s.best) {
        out!(
            "  --best: the best of {} arms (or within {} points of it) at {:.0}% confidence, cases in a seeded random order, an arm shown worse sent no more (docs/guide/best.md)",
            p.variants.len() * p.grid.len().max(1),
            best.epsilon * 100.0,
            b.confidence * 100.0
        );
    } else if let Some(s) = &p.sequential {
        out!(
            "  --until-decided: cases in a seeded random order, each variant stopped when decided (detect {} points, {:.0}% power, at least {} and at most {} cases); the fixed design for the same power needs {}",
            s.detect * 100.0,
            s.power * 100.0,
            s.min_cases,
            s.max_cases,
            s.fixed_design_cases.map_or_else(
                || "more than a million cases".to_string(),
                |n| format!("{n} cases")
            )
        );
    }
}

/// `check --probe`: the run's preflight, said: the endpoint and (when it answers
/// elsewhere) the judge, each asked for its models once.
async fn probe(
    p: &super::Prepared,
    judge: Option<&super::settings::ResolvedJudge>,
) -> Result<Exit, Failure> {
    let (endpoints, judge) = super::preflight::looks(p, judge);
    let names = p.endpoint_names();
    let whats = endpoints.into_iter().enumerate().map(|(i, look)| {
        let what = names
            .get(i)
            .map_or_else(|| "endpoint".to_string(), |n| format!("endpoint {n}"));
        (what, look)
    });
    for (what, look) in whats.chain([("judge".to_string(), judge)]) {
        if look.is_none() {
            continue;
        }
        let found = super::preflight::check_if(look).await;
        for (_, why) in &found.dead {
            out!("  warning: {why}: it did not answer");
        }
        for w in &found.warnings {
            out!("  warning: {w}");
        }
        if let Some(why) = found.stop {
            return Err(Failure::Provider(anyhow::anyhow!(why)));
        }
        if found.warnings.is_empty() && found.dead.is_empty() {
            out!("  probe: nothing wrong found with the {what}");
        }
    }
    Ok(Exit::Success)
}

/// Who judges, how many calls that takes, how they are priced, and a warning when the judge
/// is the model under test.
fn say_judge(p: &super::Prepared, judge: &super::settings::ResolvedJudge) {
    let b = &p.bench;
    let calls: u64 = p
        .jobs
        .iter()
        .map(|j| {
            b.cases[j.case]
                .grade
                .as_ref()
                .unwrap_or(&b.grade)
                .judge_calls()
        })
        .sum();
    let run_simulated = p.endpoint.base_urls.is_empty();
    let same = judge.info.model == p.endpoint.model
        && judge.info.simulated == run_simulated
        && (judge.info.simulated || judge.base_urls == p.endpoint.base_urls);
    out!(
        "  judge: model {} at {}, about {calls} judge calls (one per vote of each judged answer, and per criterion of a judge's `criteria`){}",
        judge.info.model,
        judge.info.base_url,
        match (&b.judge.as_ref().and_then(|j| j.price.clone()), same) {
            (Some(_), _) => ", priced by judge.price",
            (None, true) => ", priced as the model under test",
            (None, false) => "; no judge.price, so its cost is unknown",
        }
    );
    if same {
        out!(
            "  warning: the judge is the model under test: models tend to favour their own answers; set judge.model (and judge.base_url) to another model"
        );
    }
}
