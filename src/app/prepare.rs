//! A bench with the flags applied: the jobs to run and where to send them. No network.

use std::path::PathBuf;
use std::sync::Arc;

use super::{DEFAULT_BENCH, Failure};
use crate::cli::{BenchEndpoint, Endpoint, Env, PlanArgs, UsageError, resolve_endpoint};
use crate::suite::plan::{SequentialPlan, case_order};
use crate::suite::{Bench, InputError, Job, Plan};

/// A loaded bench, the selected variants, the planned jobs and the resolved endpoint.
pub(crate) struct Prepared {
    pub bench: Arc<Bench>,
    /// Each case's scorer, in the bench's case order.
    pub scorers: Arc<crate::grade::Scorers>,
    /// Indices into the bench's variants, baseline first.
    pub variants: Vec<usize>,
    pub jobs: Vec<Job>,
    pub endpoint: Endpoint,
    /// `--until-decided`: the case order and when to stop.
    pub sequential: Option<SequentialPlan>,
}

impl Prepared {
    /// Said before anything is sent: repeats at temperature 0 mostly buy the same answer
    /// again. A deterministic server answers a case the same way every time, so the repeats
    /// multiply the spend and measure nothing (the design effect then undoes them).
    pub(crate) fn greedy_repeats_warning(&self) -> Option<String> {
        let k = self.bench.repeats;
        if k < 2 {
            return None;
        }
        let greedy: Vec<String> = self
            .variants
            .iter()
            .filter(|&&v| {
                self.bench
                    .params_for(v)
                    .get("temperature")
                    .and_then(serde_json::Value::as_f64)
                    == Some(0.0)
            })
            .map(|&v| self.bench.variants[v].name.clone())
            .collect();
        if greedy.is_empty() {
            return None;
        }
        let which = if greedy.len() == self.variants.len() {
            "every variant".to_string()
        } else {
            greedy.join(", ")
        };
        Some(format!(
            "{k} repeats at temperature 0 ({which}): a deterministic server gives the same answer {k} times, so this costs {k}× as much and measures little more than one answer per case; repeats measure sampling at temperature > 0 (or how far a server that is not deterministic drifts). Use --repeats 1, or set a temperature above 0"
        ))
    }

    pub(crate) fn variant_names(&self) -> Vec<String> {
        self.variants
            .iter()
            .map(|&v| self.bench.variants[v].name.clone())
            .collect()
    }
}

/// Loads and checks everything; no network. Every error is exit 2.
pub(crate) fn prepare(args: &PlanArgs, env: &Env) -> Result<Prepared, Failure> {
    let path = args
        .bench
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BENCH));
    let mut bench = Bench::load(&path)?;
    // Every case's scorer is checked, also those of cases `--limit` leaves out.
    let mut scorers = crate::grade::scorers_for(&bench)?;
    if let Some(limit) = args.limit {
        let limit = limit as usize;
        bench.cases.truncate(limit);
        scorers.truncate(limit);
    }
    let named = choose_endpoint(&mut bench, args)?;
    if let Some(r) = args.repeats {
        bench.repeats = r;
    }
    if let Some(c) = args.concurrency {
        bench.limits.concurrency = c as usize;
    }
    let variants = pick_variants(&bench, &args.variants)?;
    let endpoint = endpoint_of(&bench, named.as_ref(), args, env)?;
    let sequential = match (&args.sequential, args.until_decided) {
        (Some(recorded), _) => Some(recorded.clone()),
        (None, true) => Some(sequential_plan(&bench, variants.len(), args.max_drop)?),
        (None, false) => None,
    };
    let jobs = plan_jobs(&bench, &variants, sequential.as_ref(), args);
    if let Some(tpm) = bench.limits.tokens_per_minute {
        check_reservations(&bench, &jobs, tpm)?;
    }
    Ok(Prepared {
        bench: Arc::new(bench),
        scorers: Arc::new(scorers),
        variants,
        jobs,
        endpoint,
        sequential,
    })
}

/// `--variants`: the bench's variants it names, in its order without repeats (every
/// variant when it names none).
fn pick_variants(bench: &Bench, names: &[String]) -> Result<Vec<usize>, Failure> {
    if names.is_empty() {
        return Ok((0..bench.variants.len()).collect());
    }
    let mut picked = Vec::new();
    for name in names {
        let Some(i) = bench.variants.iter().position(|v| v.name == name.trim()) else {
            let known: Vec<&str> = bench.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(UsageError::with_fix(
                format!("--variants names `{name}`, which is not a variant of this bench"),
                format!("known variants: {}", known.join(", ")),
            )
            .into());
        };
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    Ok(picked)
}

/// The endpoint this run is on, among the bench's `endpoints:` and those `--endpoint`
/// adds: the one `--endpoints` names, else the one `--endpoint` added, else the first. Its
/// price, parameters (over the bench's) and limits become the run's. `None` when the bench
/// has the single `endpoint:` and no flag names one.
fn choose_endpoint(
    bench: &mut Bench,
    args: &PlanArgs,
) -> Result<Option<crate::suite::endpoints::NamedEndpoint>, UsageError> {
    let mut known = bench.endpoints.clone();
    for added in &args.endpoint {
        let e = crate::suite::endpoints::NamedEndpoint {
            name: added.name.clone(),
            spec: added.spec.clone(),
            price: None,
            params: Default::default(),
            limits: bench.limits.clone(),
            headers: Vec::new(),
        };
        match known.iter_mut().find(|k| k.name == e.name) {
            // The bench's endpoint, moved for this run: what the flag says over what the
            // bench says (its price, parameters, limits and headers stay).
            Some(k) => {
                let given = &added.spec;
                k.spec.base_url = given.base_url.clone().or(k.spec.base_url.take());
                k.spec.model = given.model.clone().or(k.spec.model.take());
                k.spec.api_key_env = given.api_key_env.clone().or(k.spec.api_key_env.take());
                k.spec.protocol = given.protocol.or(k.spec.protocol);
                k.spec.key_header = given.key_header.or(k.spec.key_header);
            }
            None => known.push(e),
        }
    }
    let wanted: Vec<&str> = args.endpoints.iter().map(|n| n.trim()).collect();
    let names = || {
        known
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match wanted.as_slice() {
        [] => args
            .endpoint
            .last()
            .and_then(|a| known.iter().find(|k| k.name == a.name))
            .or_else(|| known.first()),
        [one] => Some(known.iter().find(|k| k.name == *one).ok_or_else(|| {
            UsageError::with_fix(
                format!("--endpoints names `{one}`, which is not an endpoint of this bench"),
                if known.is_empty() {
                    "the bench has no `endpoints:` list: add one, or add an endpoint with --endpoint NAME=URL,model=M".to_string()
                } else {
                    format!("known endpoints: {}", names())
                },
            )
        })?),
        [..] => {
            return Err(UsageError::with_fix(
                format!(
                    "--endpoints names {} endpoints: one run measures one endpoint for now",
                    wanted.len()
                ),
                format!(
                    "run each (--endpoints {}, then the next), and compare the runs: promptgauge compare RUN_A RUN_B",
                    wanted[0]
                ),
            ));
        }
    };
    let Some(chosen) = chosen.cloned() else {
        return Ok(None);
    };
    bench.endpoint = chosen.spec.clone();
    if chosen.price.is_some() {
        bench.price = chosen.price.clone();
    }
    for (k, v) in &chosen.params {
        bench.params.insert(k.clone(), v.clone());
    }
    bench.limits = chosen.limits.clone();
    Ok(Some(chosen))
}

/// Where to send: the flags and the environment over the chosen endpoint (or the bench's
/// `endpoint:`).
fn endpoint_of(
    bench: &Bench,
    named: Option<&crate::suite::endpoints::NamedEndpoint>,
    args: &PlanArgs,
    env: &Env,
) -> Result<Endpoint, UsageError> {
    resolve_endpoint(
        args,
        env,
        BenchEndpoint {
            base_urls: bench
                .endpoint
                .base_url
                .iter()
                .flat_map(|u| u.urls())
                .collect(),
            model: bench.endpoint.model.as_deref(),
            api_key_env: bench.endpoint.api_key_env.as_deref(),
            protocol: bench.endpoint.protocol,
            key_header: bench.endpoint.key_header,
            named,
        },
    )
}

/// The jobs to send: every case × variant × repeat (in the sequential plan's order when
/// there is one), then only `--shard`'s share.
fn plan_jobs(
    bench: &Bench,
    variants: &[usize],
    sequential: Option<&SequentialPlan>,
    args: &PlanArgs,
) -> Vec<Job> {
    let mut plan = match sequential {
        // A seeded random order, cut at max_cases: later cases are never planned.
        Some(s) => {
            let mut order = case_order(bench.cases.len(), s.seed);
            order.truncate(s.max_cases as usize);
            Plan::in_order(&order, variants, bench.repeats)
        }
        None => Plan::new(bench.cases.len(), variants, bench.repeats),
    };
    if let Some(shard) = args.shard {
        plan.jobs.retain(|j| shard.holds(j));
    }
    plan.jobs
}

/// A request larger than the whole `tokens_per_minute` budget would wait forever: refuse
/// it now.
fn check_reservations(bench: &Bench, jobs: &[Job], tpm: u32) -> Result<(), Failure> {
    for job in jobs {
        let case = &bench.cases[job.case];
        let messages = bench
            .templates
            .render(job.variant, case, &bench.variants[job.variant])
            .map_err(|e| Failure::Input(anyhow::anyhow!("template failed: {e}")))?;
        let need = bench.reservation(job.variant, &messages);
        if need > u64::from(tpm) {
            return Err(Failure::Input(
                InputError::new(
                    case.location.clone(),
                    format!(
                        "case `{}` with variant `{}` reserves about {need} tokens (prompt plus max_tokens), more than limits.tokens_per_minute ({tpm}): it could never be sent",
                        case.id, bench.variants[job.variant].name
                    ),
                )
                .fix("raise limits.tokens_per_minute, or lower max_tokens")
                .into(),
            ));
        }
    }
    Ok(())
}

/// The sequential plan of a new `--until-decided` run, from the bench's `sequential:`.
fn sequential_plan(
    bench: &Bench,
    variants: usize,
    max_drop: Option<f64>,
) -> Result<SequentialPlan, Failure> {
    if variants < 2 {
        return Err(UsageError::with_fix(
            "--until-decided stops when each variant's comparison with the baseline is decided, and this run has one variant",
            "select a baseline and at least one variant to compare (--variants a,b)",
        )
        .into());
    }
    let spec = &bench.sequential;
    let comparisons = variants - 1;
    let detect = spec.detect / 100.0;
    // Counted against the fixed design for a baseline at ½, the most demanding.
    let fixed = crate::stats::sequential::fixed_design_cases(
        detect,
        0.5,
        spec.power,
        bench.confidence,
        comparisons,
    );
    // With --max-drop the drop check needs its own fixed design too (at ½, the most).
    let drop_fixed = max_drop.and_then(|m| {
        let mut a = crate::stats::power::Assumptions::new(0.5, 1.0 - bench.confidence);
        a.comparisons = comparisons;
        crate::stats::power::non_inferiority_cases(m, spec.power, &a)
    });
    let cases = bench.cases.len() as u64;
    let max_cases = spec
        .max_cases
        .unwrap_or_else(|| match (fixed, drop_fixed) {
            (Some(f), Some(d)) => 2 * f.max(d),
            (f, d) => f.or(d).map_or(cases, |n| 2 * n),
        })
        .min(cases);
    if max_cases < spec.min_cases {
        return Err(UsageError::with_fix(
            format!(
                "--until-decided can give no verdict before sequential.min_cases ({}) cases, and this run has {max_cases}",
                spec.min_cases
            ),
            "add cases, or lower sequential.min_cases in the bench",
        )
        .into());
    }
    Ok(SequentialPlan {
        seed: spec.seed.unwrap_or_else(rand::random),
        detect,
        power: spec.power,
        min_cases: spec.min_cases,
        max_cases: max_cases.max(1),
        comparisons,
        binary: bench.binary(),
        fixed_design_cases: fixed,
        max_drop,
    })
}
