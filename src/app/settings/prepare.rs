//! A bench with the flags applied: the jobs to run and where to send them. No network.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::endpoint::{BenchEndpoint, Endpoint, resolve_endpoint};
use super::env::Env;
use crate::app::{DEFAULT_BENCH, Failure};
use crate::cli::PlanArgs;
use crate::error::UsageError;
use promptgauge_suite::endpoints::NamedEndpoint;
use promptgauge_suite::plan::{SequentialPlan, case_order};
use promptgauge_suite::{Bench, InputError, Job, Plan};

/// A loaded bench, the selected variants, the planned jobs and the resolved endpoint.
pub(crate) struct Prepared {
    pub bench: Arc<Bench>,
    /// Each case's scorer, in the bench's case order.
    pub scorers: Arc<promptgauge_grade::Scorers>,
    /// Indices into the bench's variants, baseline first.
    pub variants: Vec<usize>,
    pub jobs: Vec<Job>,
    /// The run's endpoint; in a run of several, the baseline endpoint (`grid[0]`'s).
    pub endpoint: Endpoint,
    /// A run of several endpoints: each, the baseline first, with what it brings (empty
    /// when the run has one endpoint, whose price, parameters and limits are the bench's).
    pub grid: Vec<GridEndpoint>,
    /// `--until-decided`: the case order and when to stop.
    pub sequential: Option<SequentialPlan>,
    /// A run that may stop early (`--budget`): the seed of its cases' random order.
    pub order_seed: Option<u64>,
    /// A `--best` shard run `--after` a merge: the arms it showed out (none planned).
    pub arms_out: Vec<String>,
    /// The endpoints the run has no price for, each with why and the flag that prices it.
    pub unpriced: Vec<Unpriced>,
}

/// An endpoint of the run without a price: its answers have no cost, and `--budget` and
/// `--max-cost` refuse the run (docs/guide/endpoints.md, "Price follows the endpoint").
#[derive(Debug, Clone)]
pub(crate) struct Unpriced {
    /// `the run's endpoint`, or `endpoint NAME` in a run of several.
    pub who: String,
    /// Why it has none: the bench gives none, or gives it for another endpoint.
    pub why: String,
    /// The flag that prices it: `--price IN,OUT`, or `--price NAME=IN,OUT`.
    pub flag: String,
}

impl Unpriced {
    /// `who has no price (why)`.
    pub(crate) fn said(&self) -> String {
        format!("{} has no price ({})", self.who, self.why)
    }

    /// How to price it.
    pub(crate) fn fix(&self) -> String {
        format!(
            "{} (USD per million prompt and answer tokens; {} for a server that costs nothing), or a `price:` on the endpoint in the bench",
            self.flag,
            self.flag.replace("IN,OUT", "0")
        )
    }
}

/// One endpoint of a run of several: where it is and what it costs, adds to each request
/// and may be sent.
#[derive(Clone)]
pub(crate) struct GridEndpoint {
    pub endpoint: Endpoint,
    /// Its own, or the bench's.
    pub price: Option<promptgauge_suite::Price>,
    /// Over the bench's request parameters, under each variant's.
    pub params: serde_json::Map<String, serde_json::Value>,
    pub limits: promptgauge_client::Limits,
    /// `endpoint NAME`: how messages about it begin.
    role: String,
}

impl GridEndpoint {
    /// Its name (every endpoint of a grid has one).
    pub(crate) fn name(&self) -> &str {
        self.endpoint.name.as_deref().unwrap_or_default()
    }

    /// How messages about it begin: `endpoint NAME`.
    pub(crate) fn role(&self) -> &str {
        &self.role
    }

    /// Its gates: `concurrency` for each of its base URLs.
    pub(crate) fn gates(&self) -> usize {
        self.limits.concurrency * self.endpoint.base_urls.len().max(1)
    }
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

    /// Whether any endpoint's jobs go through its batch API.
    pub(crate) fn batched(&self) -> bool {
        if self.grid.is_empty() {
            self.endpoint.batch
        } else {
            self.grid.iter().any(|g| g.endpoint.batch)
        }
    }

    /// `--until-decided` and `--best`: the cases the workers may send ahead of the tests —
    /// a batch wave, or a little more than the requests in flight cover — unless the run's
    /// first start recorded it (`--best`: a resume and a replay must use the same number).
    pub(crate) fn ahead(&self) -> Option<usize> {
        let plan = self.sequential.as_ref()?;
        if let Some(recorded) = plan.best.and_then(|b| b.ahead) {
            return Some(recorded);
        }
        let per_case = self.variants.len() * self.grid.len().max(1) * self.bench.repeats as usize;
        Some(if self.batched() {
            plan.wave_cases()
        } else {
            self.gates().div_ceil(per_case.max(1)) + 1
        })
    }

    /// The sequential plan as a new run records it: `--best` with its [`Prepared::ahead`].
    pub(crate) fn recorded_sequential(&self) -> Option<promptgauge_suite::plan::SequentialPlan> {
        let mut plan = self.sequential.clone()?;
        let ahead = self.ahead();
        if let Some(best) = &mut plan.best {
            best.ahead = ahead;
        }
        Some(plan)
    }

    /// Requests the run may have in flight at once: every endpoint's gates.
    pub(crate) fn gates(&self) -> usize {
        if self.grid.is_empty() {
            self.bench.limits.concurrency * self.endpoint.base_urls.len().max(1)
        } else {
            self.grid.iter().map(GridEndpoint::gates).sum()
        }
    }

    /// What the run's endpoints without a price are, and how to price them, in one line.
    pub(crate) fn unpriced_said(&self) -> Option<(String, String)> {
        let fixes: Vec<String> = self.unpriced.iter().map(Unpriced::fix).collect();
        (!self.unpriced.is_empty()).then(|| {
            (
                self.unpriced
                    .iter()
                    .map(Unpriced::said)
                    .collect::<Vec<_>>()
                    .join("; "),
                fixes.join("; "),
            )
        })
    }

    /// The endpoints' names in a run of several, the baseline first; empty with one.
    pub(crate) fn endpoint_names(&self) -> Vec<String> {
        self.grid.iter().map(|g| g.name().to_string()).collect()
    }

    /// The name of the arm a job belongs to: its variant's, or `ENDPOINT/VARIANT` in a run
    /// of several endpoints.
    pub(crate) fn arm_name(&self, job: &Job) -> String {
        promptgauge_suite::plan::arm_name(
            &self.bench.variants[job.variant].name,
            self.grid
                .get(usize::from(job.endpoint))
                .map(GridEndpoint::name),
        )
    }
}

/// The bench file a command reads: the one named, the `promptgauge.yaml` of a folder named
/// (what `init` and `import` write), else `./promptgauge.yaml`. None there is said with how
/// to start one (docs/guide/commands.md).
pub(crate) fn bench_file(given: Option<&Path>) -> Result<PathBuf, UsageError> {
    let path = match given {
        Some(dir) if dir.is_dir() => {
            let inside = dir.join(DEFAULT_BENCH);
            if inside.is_file() {
                return Ok(inside);
            }
            let dir_said = promptgauge_report::shell_path(dir);
            return Err(UsageError::with_fix(
                format!(
                    "{} is a folder with no {DEFAULT_BENCH} in it",
                    dir.display()
                ),
                format!(
                    "name the bench file inside it, or write a working bench there with: promptgauge init {dir_said}"
                ),
            ));
        }
        Some(file) => return Ok(file.to_path_buf()),
        None => PathBuf::from(DEFAULT_BENCH),
    };
    if path.exists() {
        return Ok(path);
    }
    Err(UsageError::with_fix(
        format!("no bench here: this folder has no {DEFAULT_BENCH}"),
        "start with `promptgauge init` (a small bench that runs at once on the built-in simulator), or name a bench file or its folder: promptgauge run path/to/bench.yaml",
    ))
}

/// Loads and checks everything; no network. Every error is exit 2.
pub(crate) fn prepare(args: &PlanArgs, env: &Env) -> Result<Prepared, Failure> {
    let path = bench_file(args.bench.as_deref())?;
    let mut bench = Bench::load(&path)?;
    if args.fetch_urls {
        crate::app::fetch::fetch_urls(&mut bench)?;
    }
    // Every case's scorer is checked, also those of cases `--limit` leaves out.
    let mut scorers = promptgauge_grade::scorers_for(&bench)?;
    if let Some(limit) = args.limit {
        let limit = limit as usize;
        bench.cases.truncate(limit);
        scorers.truncate(limit);
    }
    let mut chosen = choose_endpoints(&mut bench, args)?;
    if let Some(r) = args.repeats {
        bench.repeats = r;
    }
    super::client::apply_limit_flags(&mut bench, &mut chosen, &args.limits);
    let variants = pick_variants(&bench, &args.variants)?;
    let mut grid = grid_of(&bench, &chosen, args, env)?;
    let endpoint = match grid.first() {
        Some(g) => g.endpoint.clone(),
        None => endpoint_of(&bench, chosen.first(), args, env)?,
    };
    let unpriced = price_endpoints(&mut bench, &chosen, &endpoint, &mut grid, args)?;
    let pages_read = grid
        .iter()
        .map(|g| g.limits.max_pdf_pages)
        .max()
        .unwrap_or(bench.limits.max_pdf_pages);
    crate::app::attachments::count_url_documents_at(&mut bench, pages_read);
    // The shards of one search draw one order (see `shared_seed`).
    let seed = args
        .seed
        .or_else(|| args.shard.map(|_| shared_seed(&bench, &variants)));
    let sequential = sequential_of(args, &bench, variants.len(), grid.len().max(1), seed)?;
    let order_seed = order_seed_of(args, &bench, &variants, sequential.is_some());
    let mut jobs = plan_jobs(
        &bench,
        &variants,
        grid.len(),
        sequential.as_ref(),
        order_seed,
        args,
    );
    let arms_out = match (&args.after, &sequential) {
        (Some(after), Some(plan)) => {
            crate::app::after::arms_out_after(after, args.shard, &bench, &variants, plan)?
        }
        // Without a search, `sequential_of` refused --after.
        _ => args.arms_out.clone(),
    };
    without_arms(&mut jobs, &arms_out, &bench, &variants, &grid);
    if let Some(tpm) = bench.limits.tokens_per_minute {
        check_reservations(&bench, &jobs, tpm)?;
    }
    check_files(&bench, &variants, &endpoint, &grid)?;
    check_loop_not_batched(&bench, &endpoint, &grid)?;
    check_tool_programs(&bench)?;
    if bench.mcp.is_empty() {
        bench.check_trajectory_tools()?;
    }
    Ok(Prepared {
        bench: Arc::new(bench),
        scorers: Arc::new(scorers),
        variants,
        jobs,
        endpoint,
        grid,
        sequential,
        order_seed,
        arms_out,
        unpriced,
    })
}

/// The seed of the order the cases are sent in, when it is not the file's: a run that may
/// stop early sends its cases in a seeded random order — stopped by its budget, it has
/// measured a random sample, not the first cases of the file. A sequential test draws its
/// own (`sequential_of`).
fn order_seed_of(
    args: &PlanArgs,
    bench: &Bench,
    variants: &[usize],
    sequential: bool,
) -> Option<u64> {
    if args.order_kept {
        return args.seed.filter(|_| !sequential);
    }
    (!sequential && (args.budget.is_some() || args.seed.is_some())).then(|| {
        args.seed.unwrap_or_else(|| match args.shard {
            Some(_) => shared_seed(bench, variants),
            None => rand::random(),
        })
    })
}

/// Leaves out the jobs of `arms_out` (a `--best` shard run `--after` a merge).
fn without_arms(
    jobs: &mut Vec<Job>,
    arms_out: &[String],
    bench: &Bench,
    variants: &[usize],
    grid: &[GridEndpoint],
) {
    if arms_out.is_empty() {
        return;
    }
    let names = promptgauge_suite::plan::arm_names(
        &variants
            .iter()
            .map(|&v| bench.variants[v].name.clone())
            .collect::<Vec<_>>(),
        &grid
            .iter()
            .map(|g| g.name().to_string())
            .collect::<Vec<_>>(),
    );
    let position: HashMap<usize, usize> =
        variants.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    jobs.retain(|j| !arms_out.contains(&names[j.arm(position[&j.variant], variants.len())]));
}

/// Starts the bench's MCP servers (`mcp:`) and adds the tools they list to the plan's
/// bench, offered to the model beside its own; `None` when it has none. A server that does
/// not start, or lists what the bench cannot offer, is an input error: nothing is sent.
pub(crate) async fn serve_mcp_tools(
    p: &mut Prepared,
) -> Result<Option<Arc<promptgauge_runner::mcp::McpServers>>, Failure> {
    if p.bench.mcp.is_empty() {
        return Ok(None);
    }
    let Some(bench) = Arc::get_mut(&mut p.bench) else {
        return Err(UsageError("the bench is shared before its MCP servers started".into()).into());
    };
    let dir = bench
        .path
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    let (servers, served) = promptgauge_runner::mcp::McpServers::start(&bench.mcp, &dir)
        .await
        .map_err(|e| UsageError::with_fix(e.message, e.fix))?;
    bench.serve_tools(served).map_err(|e| {
        UsageError::with_fix(
            format!("the tools the MCP servers list: {e}"),
            "leave a tool out with its server's `tools: [names]`, or rename the one `tools:` declares",
        )
    })?;
    bench.check_trajectory_tools()?;
    Ok(Some(Arc::new(servers)))
}

/// Every tool a program answers can start, sees only variables by name, and has a
/// deadline that reads: said before anything is sent, not at the first call.
fn check_tool_programs(bench: &Bench) -> Result<(), promptgauge_suite::InputErrors> {
    let dir = bench.path.parent().unwrap_or(std::path::Path::new("."));
    let here = promptgauge_suite::FilePos::file(&bench.path);
    let errors: Vec<InputError> = bench
        .tools
        .iter()
        .filter(|t| !t.run.is_empty())
        .filter_map(|t| {
            let started = promptgauge_grade::command::program_environment(&t.run[0], &t.env, dir)
                .map(drop)
                .map_err(|e| e.to_string());
            let timed = match &t.timeout {
                Some(x) => promptgauge_suite::parse_duration(x).map(drop).map_err(|e| e.to_string()),
                None => Ok(()),
            };
            started.and(timed).err().map(|e| {
                InputError::new(here.clone(), format!("the tool `{}`: {e}", t.name))
                    .fix("run: [python3, tool.py] names a program the bench's folder or PATH has; env: lists variable names; timeout: 10s")
            })
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(promptgauge_suite::InputErrors(errors))
    }
}

/// An agent loop (the bench's `tools:`) is refused by batch: each step waits on the one
/// before, and a batch may take a day a step.
fn check_loop_not_batched(
    bench: &Bench,
    endpoint: &Endpoint,
    grid: &[GridEndpoint],
) -> Result<(), UsageError> {
    let batched = if grid.is_empty() {
        endpoint.batch
    } else {
        grid.iter().any(|g| g.endpoint.batch)
    };
    if batched && bench.has_tools() {
        return Err(UsageError::with_fix(
            "an agent loop (the bench's `tools:` or `mcp:`) cannot go by batch: each step waits on the one before, and a batch may take a day a step",
            "run it without --batch (and without `batch: true` on its endpoint)",
        ));
    }
    Ok(())
}

/// Every file the chosen variants place, checked at each endpoint: its protocol has a part
/// for it there, and it is within the endpoint's limits.
fn check_files(
    bench: &Bench,
    variants: &[usize],
    endpoint: &Endpoint,
    grid: &[GridEndpoint],
) -> Result<(), promptgauge_suite::InputErrors> {
    use crate::app::attachments::{Recipient, check};
    let targets: Vec<Recipient<'_>> = match grid {
        [] => vec![Recipient {
            said: "the endpoint".into(),
            protocol: endpoint.protocol,
            limits: &bench.limits,
        }],
        grid => grid
            .iter()
            .map(|g| Recipient {
                said: g.role().to_string(),
                protocol: g.endpoint.protocol,
                limits: &g.limits,
            })
            .collect(),
    };
    check(bench, variants, &targets)
}

/// The most endpoints one run measures side by side.
const MAX_ENDPOINTS: usize = 64;

/// A run of several endpoints: each resolved (its key read, its headers' variables, its
/// base URL checked), with its price, parameters and limits. Empty for one endpoint. The
/// flags that override one endpoint's server (`--base-url`, `--model`, `--protocol`) are
/// refused: which of the endpoints would they move? — except `--base-url mock`, which puts
/// every one on the simulator.
fn grid_of(
    bench: &Bench,
    chosen: &[promptgauge_suite::endpoints::NamedEndpoint],
    args: &PlanArgs,
    env: &Env,
) -> Result<Vec<GridEndpoint>, UsageError> {
    if chosen.len() < 2 {
        return Ok(Vec::new());
    }
    if chosen.len() > MAX_ENDPOINTS {
        return Err(UsageError::with_fix(
            format!(
                "this run would measure {} endpoints; one run measures at most {MAX_ENDPOINTS}",
                chosen.len()
            ),
            "pick some with --endpoints a,b,…",
        ));
    }
    // `--base-url mock` puts every endpoint on the simulator (each keeps its model).
    let simulated = args.base_url.iter().all(|u| u == "mock");
    let overriding = [
        (!args.base_url.is_empty() && !simulated, "--base-url"),
        (args.model.is_some(), "--model"),
        (args.protocol.is_some(), "--protocol"),
    ];
    if let Some((_, flag)) = overriding.iter().find(|(given, _)| *given) {
        return Err(UsageError::with_fix(
            format!(
                "{flag} moves the run's one endpoint, and this run has {} ({})",
                chosen.len(),
                chosen
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "move one endpoint with --endpoint NAME=URL,model=M (its name as in the bench), or run one endpoint (--endpoints NAME)",
        ));
    }
    chosen
        .iter()
        .map(|e| {
            let endpoint = resolve_endpoint(
                args,
                env,
                BenchEndpoint {
                    base_urls: e.spec.base_url.iter().flat_map(|u| u.urls()).collect(),
                    model: e.spec.model.as_deref(),
                    api_key_env: e.spec.api_key_env.as_deref(),
                    protocol: e.spec.protocol,
                    key_header: e.spec.key_header,
                    named: Some(e),
                    batch: e.spec.batch.unwrap_or(false),
                },
            )
            // Said with the bench it is written in.
            .map_err(|err| UsageError(format!("{}: {}", bench.path.display(), err.0)))?;
            Ok(GridEndpoint {
                role: format!("endpoint {}", e.name),
                endpoint,
                // `price_endpoints` says which price is its.
                price: None,
                params: e.params.clone(),
                limits: e.limits.clone(),
            })
        })
        .collect()
}

/// The simulator's model when nothing names one.
const SIMULATED_MODEL: &str = "mock-model";

/// Each endpoint's price (docs/guide/endpoints.md, "Price follows the endpoint"): the one
/// `--price` gives it, else the one the bench gives it — an endpoint's own `price:`, or the
/// bench's `price:` for its `endpoint:` and the endpoints it lists without one — as long
/// as the run sends to the model the bench names there, at the server it names (where it
/// names one). An endpoint that `--base-url`, `--model`, `$PROMPTGAUGE_BASE_URL` or
/// `--endpoint` moves to another server or model, or that `--endpoint` adds, is another
/// endpoint: the bench's price is not its. The simulator (`mock`) stands in for any
/// endpoint and keeps its price. With one endpoint the price
/// becomes the bench's (`bench.price`); with several each grid endpoint holds its own.
/// Returns the endpoints left without one.
fn price_endpoints(
    bench: &mut Bench,
    chosen: &[NamedEndpoint],
    endpoint: &Endpoint,
    grid: &mut [GridEndpoint],
    args: &PlanArgs,
) -> Result<Vec<Unpriced>, UsageError> {
    let names: Vec<&str> = chosen.iter().map(|e| e.name.as_str()).collect();
    let flag_for = check_price_flags(&args.prices, &names, grid.len())?;
    let mut unpriced = Vec::new();
    if grid.is_empty() {
        let name = chosen.first().map(|e| e.name.as_str());
        let written = match chosen.first() {
            // The bench's `endpoint:`, priced by its `price:`.
            None => Some(Written {
                urls: bench
                    .endpoint
                    .base_url
                    .iter()
                    .flat_map(|u| u.urls())
                    .collect(),
                model: bench.endpoint.model.clone(),
                price: bench.price.clone(),
            }),
            Some(e) => written_endpoint(bench, e),
        };
        let now = Sent {
            urls: &endpoint.base_urls,
            model: &endpoint.model,
        };
        let (price, why) = price_of(flag_for(name), written.as_ref(), &now, name.is_some());
        bench.price = price;
        if let Some(why) = why {
            unpriced.push(Unpriced {
                who: name.map_or_else(
                    || "the run's endpoint".to_string(),
                    |n| format!("endpoint {n}"),
                ),
                why,
                flag: "--price IN,OUT".to_string(),
            });
        }
        return Ok(unpriced);
    }
    for (g, e) in grid.iter_mut().zip(chosen) {
        let written = written_endpoint(bench, e);
        let now = Sent {
            urls: &g.endpoint.base_urls,
            model: &g.endpoint.model,
        };
        let (price, why) = price_of(flag_for(Some(&e.name)), written.as_ref(), &now, true);
        g.price = price;
        if let Some(why) = why {
            unpriced.push(Unpriced {
                who: format!("endpoint {}", e.name),
                why,
                flag: format!("--price {}=IN,OUT", e.name),
            });
        }
    }
    Ok(unpriced)
}

/// An endpoint as the bench writes it, with the price the bench gives it.
struct Written {
    /// Its base URLs as written (`mock` left out); empty when it names none.
    urls: Vec<String>,
    model: Option<String>,
    price: Option<promptgauge_suite::Price>,
}

/// Where the run sends to an endpoint.
struct Sent<'a> {
    /// Empty: the simulator.
    urls: &'a [String],
    model: &'a str,
}

/// One of the run's named endpoints as the bench lists it (its own price, else the bench's
/// `price:`); `None` for one `--endpoint` adds.
fn written_endpoint(bench: &Bench, chosen: &NamedEndpoint) -> Option<Written> {
    bench
        .endpoints
        .iter()
        .find(|e| e.name == chosen.name)
        .map(|e| Written {
            urls: e.spec.base_url.iter().flat_map(|u| u.urls()).collect(),
            model: e.spec.model.clone(),
            price: e.price.clone().or_else(|| bench.price.clone()),
        })
}

/// The price of an endpoint the run sends to as `now` says, and why it has none when it
/// has none.
fn price_of(
    flag: Option<&promptgauge_suite::Price>,
    written: Option<&Written>,
    now: &Sent<'_>,
    named: bool,
) -> (Option<promptgauge_suite::Price>, Option<String>) {
    if let Some(p) = flag {
        return (Some(p.clone()), None);
    }
    let Some(w) = written else {
        return (
            None,
            Some("--endpoint adds it, and the bench's price is for the endpoints it writes".into()),
        );
    };
    let Some(price) = &w.price else {
        return (
            None,
            Some(if named {
                "the bench gives it no price".into()
            } else {
                "the bench has no `price`".into()
            }),
        );
    };
    let written_urls: Vec<&String> = w.urls.iter().filter(|u| *u != "mock").collect();
    // The simulator stands in for any endpoint; a server other than the one the bench
    // writes is another endpoint. Where it writes none, the price is its model's wherever
    // that is served.
    let url_moved = !now.urls.is_empty()
        && !written_urls.is_empty()
        && !now.urls.iter().eq(written_urls.iter().copied());
    let model_moved = match &w.model {
        Some(m) => m != now.model,
        None => now.model != SIMULATED_MODEL,
    };
    if !url_moved && !model_moved {
        return (Some(price.clone()), None);
    }
    let shown = |urls: &[&String], model: Option<&str>| {
        let at = match urls {
            [] => "the simulator".to_string(),
            urls => crate::app::shown_urls(&urls.iter().map(|u| (*u).clone()).collect::<Vec<_>>())
                .join(", "),
        };
        match model {
            Some(m) => format!("model {m} at {at}"),
            None => format!("no model in particular at {at}"),
        }
    };
    let bench_side = if written_urls.is_empty() {
        match &w.model {
            Some(m) => format!("model {m}"),
            None => "the simulator".to_string(),
        }
    } else {
        shown(&written_urls, w.model.as_deref())
    };
    let now_urls: Vec<&String> = now.urls.iter().collect();
    (
        None,
        Some(format!(
            "the bench's price is for {bench_side}, and this run sends to {}",
            shown(&now_urls, Some(now.model))
        )),
    )
}

/// `--price` flags checked against the run's endpoints: one without a name prices the
/// run's one endpoint; a name must be one of the run's endpoints, each priced once. Returns
/// the price each endpoint (by name, `None` for the bench's unnamed `endpoint:`) is given.
fn check_price_flags<'a>(
    flags: &'a [promptgauge_suite::endpoints::PriceFlag],
    names: &[&str],
    several: usize,
) -> Result<impl Fn(Option<&str>) -> Option<&'a promptgauge_suite::Price> + use<'a>, UsageError> {
    for (i, f) in flags.iter().enumerate() {
        if flags[..i].iter().any(|o| o.endpoint == f.endpoint) {
            return Err(UsageError::with_fix(
                format!(
                    "--price is given twice for {}",
                    f.endpoint.as_deref().map_or_else(
                        || "the run's endpoint".to_string(),
                        |n| format!("endpoint {n}")
                    )
                ),
                "give each endpoint one --price",
            ));
        }
        match &f.endpoint {
            None if several > 1 => {
                return Err(UsageError::with_fix(
                    format!(
                        "--price without a name prices the run's one endpoint, and this run has {several} ({})",
                        names.join(", ")
                    ),
                    format!(
                        "name the endpoint it prices: --price {}=IN,OUT",
                        names.last().copied().unwrap_or("NAME")
                    ),
                ));
            }
            Some(n) if !names.contains(&n.as_str()) => {
                return Err(UsageError::with_fix(
                    format!("--price names `{n}`, which is not an endpoint of this run"),
                    if names.is_empty() {
                        "the run's one endpoint has no name: write --price IN,OUT".to_string()
                    } else {
                        format!("the run's endpoints: {}", names.join(", "))
                    },
                ));
            }
            _ => {}
        }
    }
    Ok(move |name: Option<&str>| {
        flags
            .iter()
            .find(|f| f.endpoint.as_deref() == name)
            .or_else(|| flags.iter().find(|f| f.endpoint.is_none()))
            .map(|f| &f.price)
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

/// The endpoints this run is on, among the bench's `endpoints:` and those `--endpoint`
/// adds (or moves): the ones `--endpoints` names, in its order; else every one (the
/// bench's in its order, then those `--endpoint` adds; moving one keeps its place). The first is the baseline endpoint; its spec
/// becomes the bench's `endpoint`, its price and limits the bench's, and — when it runs
/// alone — its parameters join the bench's (in a run of several each endpoint keeps its own
/// parameters). Empty when the bench has the single `endpoint:` and no flag names one.
fn choose_endpoints(bench: &mut Bench, args: &PlanArgs) -> Result<Vec<NamedEndpoint>, UsageError> {
    let known = known_endpoints(bench, args);
    let chosen = pick_endpoints(known, &args.endpoints)?;
    // A cell is `ENDPOINT/VARIANT` and a gate may name either: one name, one meaning (the
    // bench's own endpoints are checked where they are written).
    if let Some(clash) = chosen
        .iter()
        .find(|e| bench.variants.iter().any(|v| v.name == e.name))
    {
        return Err(UsageError::with_fix(
            format!(
                "--endpoint names `{}`, which is the name of a variant: a gate or a report naming it would mean both",
                clash.name
            ),
            "give the endpoint another name (e.g. after its model or server)",
        ));
    }
    let Some(first) = chosen.first() else {
        return Ok(chosen);
    };
    bench.endpoint = first.spec.clone();
    // One endpoint: its parameters become the bench's (its price: `price_endpoints`).
    // Several: each keeps its own.
    if chosen.len() == 1 {
        for (k, v) in &first.params {
            bench.params.insert(k.clone(), v.clone());
        }
    }
    bench.limits = first.limits.clone();
    Ok(chosen)
}

/// The bench's `endpoints:` with what `--endpoint` adds (at the bench's price, parameters
/// and limits) or moves (where the flag says, its price, parameters, limits and headers
/// staying the bench's).
fn known_endpoints(bench: &Bench, args: &PlanArgs) -> Vec<NamedEndpoint> {
    let mut known = bench.endpoints.clone();
    for added in &args.endpoint {
        match known.iter_mut().find(|k| k.name == added.name) {
            Some(k) => {
                let given = &added.spec;
                k.spec.base_url = given.base_url.clone().or(k.spec.base_url.take());
                k.spec.model = given.model.clone().or(k.spec.model.take());
                k.spec.api_key_env = given.api_key_env.clone().or(k.spec.api_key_env.take());
                k.spec.protocol = given.protocol.or(k.spec.protocol);
                k.spec.key_header = given.key_header.or(k.spec.key_header);
            }
            None => known.push(NamedEndpoint {
                name: added.name.clone(),
                spec: added.spec.clone(),
                price: None,
                params: Default::default(),
                limits: bench.limits.clone(),
                headers: Vec::new(),
            }),
        }
    }
    known
}

/// `--endpoints`: the known endpoints it names, in its order without repeats (every one
/// when it names none).
fn pick_endpoints(
    known: Vec<NamedEndpoint>,
    names: &[String],
) -> Result<Vec<NamedEndpoint>, UsageError> {
    let mut wanted: Vec<&str> = Vec::new();
    for name in names.iter().map(|n| n.trim()) {
        if !wanted.contains(&name) {
            wanted.push(name);
        }
    }
    if wanted.is_empty() {
        return Ok(known);
    }
    wanted
        .iter()
        .map(|one| {
            known.iter().find(|k| k.name == *one).cloned().ok_or_else(|| {
                UsageError::with_fix(
                    format!("--endpoints names `{one}`, which is not an endpoint of this bench"),
                    if known.is_empty() {
                        "the bench has no `endpoints:` list: add one, or add an endpoint with --endpoint NAME=URL,model=M".to_string()
                    } else {
                        let names: Vec<&str> = known.iter().map(|k| k.name.as_str()).collect();
                        format!("known endpoints: {}", names.join(", "))
                    },
                )
            })
        })
        .collect()
}

/// Where to send: the flags and the environment over the chosen endpoint (or the bench's
/// `endpoint:`).
fn endpoint_of(
    bench: &Bench,
    named: Option<&promptgauge_suite::endpoints::NamedEndpoint>,
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
            batch: named
                .map_or(bench.endpoint.batch, |n| n.spec.batch)
                .unwrap_or(false),
            named,
        },
    )
    // A named endpoint's mistake is said with the bench it is written in.
    .map_err(|err| match named {
        Some(_) => UsageError(format!("{}: {}", bench.path.display(), err.0)),
        None => err,
    })
}

/// The order seed of a sharded run not given `--seed`: the shards of one run are started
/// each on its own (one per CI job), yet must draw one order (`merge` takes only shards of
/// one plan), so it comes from what they share: the bench and its selected variants. Every
/// sharded run of an unchanged bench then draws the same sample, as one `--seed` would.
fn shared_seed(bench: &Bench, variants: &[usize]) -> u64 {
    let f = promptgauge_suite::Fingerprint::of(bench, variants);
    let mut h = promptgauge_base::hash::StableHasher::default();
    let _ = std::io::Write::write_all(
        &mut h,
        format!("order\0{}\0{}\0{}", f.cases, f.variants, f.settings).as_bytes(),
    );
    h.finish()
}

/// The jobs to send: every case × variant × endpoint × repeat (in the sequential plan's order when
/// there is one), then only `--shard`'s share.
fn plan_jobs(
    bench: &Bench,
    variants: &[usize],
    endpoints: usize,
    sequential: Option<&SequentialPlan>,
    order_seed: Option<u64>,
    args: &PlanArgs,
) -> Vec<Job> {
    let order: Vec<usize> = match (sequential, order_seed) {
        // A seeded random order, cut at max_cases: later cases are never planned.
        (Some(s), _) => s.sent(bench.cases.len(), args.shard),
        (None, Some(seed)) => case_order(bench.cases.len(), seed),
        (None, None) => (0..bench.cases.len()).collect(),
    };
    // At most MAX_ENDPOINTS (`grid_of` refuses more).
    let endpoints = u16::try_from(endpoints).unwrap_or(u16::MAX);
    let mut plan = Plan::grid(&order, variants, endpoints, bench.repeats);
    if let Some(shard) = args
        .shard
        .filter(|_| !sequential.is_some_and(|s| s.shards_in_blocks()))
    {
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
            .render_job(job)
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

/// The plan's sequential part: recorded (a resume), `--best`'s search, `--until-decided`'s
/// tests, or none.
fn sequential_of(
    args: &PlanArgs,
    bench: &Bench,
    variants: usize,
    endpoints: usize,
    seed: Option<u64>,
) -> Result<Option<SequentialPlan>, Failure> {
    let searching = args.best || bench.best_epsilon.is_some();
    if args.sequential.is_none() {
        let refused = match (searching, args.until_decided, args.shard.is_some()) {
            (true, true, _) => Some((
                "the bench decides the best (`decide: best`), and --until-decided tests each variant against the baseline",
                "drop --until-decided, or `decide: best` from the bench",
            )),
            (false, _, true) if args.after.is_some() => Some((
                "--after names a merge of a --best search's shards, and this run does not search for the best",
                "add --best (or `decide: best` in the bench), or drop --after",
            )),
            (false, _, _) if args.epsilon.is_some() => Some((
                "--epsilon says how close to the best counts as the best, and this run does not search for the best",
                "add --best (or `decide: best` in the bench), or drop --epsilon",
            )),
            _ => None,
        };
        if let Some((what, fix)) = refused {
            return Err(UsageError::with_fix(what, fix).into());
        }
    }
    Ok(match (&args.sequential, args.until_decided) {
        (Some(recorded), _) => Some(recorded.clone()),
        (None, false) if searching => Some(best_plan(
            bench,
            variants * endpoints,
            args.epsilon.or(bench.best_epsilon).unwrap_or(2.0),
            seed,
        )?),
        (None, true) => Some(sequential_plan(
            bench,
            variants,
            endpoints,
            args.max_drop,
            seed,
        )?),
        (None, false) => None,
    })
}

/// The plan of a new `--best` run: its `arms` in a seeded order over every case.
fn best_plan(
    bench: &Bench,
    arms: usize,
    epsilon: f64,
    seed: Option<u64>,
) -> Result<SequentialPlan, Failure> {
    if arms < 2 {
        return Err(UsageError::with_fix(
            "--best finds the best of several variants (or endpoints), and this run has one",
            "run two or more variants (--variants a,b,c), or endpoints",
        )
        .into());
    }
    if !(0.0..50.0).contains(&epsilon) || !epsilon.is_finite() {
        return Err(UsageError::with_fix(
            format!(
                "--epsilon {epsilon} is not a number of points from 0 up to (not including) 50"
            ),
            "--epsilon 2 (two points: an arm within 2 points of the best counts as the best)",
        )
        .into());
    }
    let cases = bench.cases.len() as u64;
    Ok(SequentialPlan {
        seed: seed.or(bench.sequential.seed).unwrap_or_else(rand::random),
        detect: epsilon / 100.0,
        power: bench.sequential.power,
        min_cases: 0,
        max_cases: cases.max(1),
        comparisons: arms - 1,
        binary: bench.binary(),
        fixed_design_cases: None,
        max_drop: None,
        best: Some(promptgauge_suite::plan::BestPlan {
            epsilon: epsilon / 100.0,
            ahead: None,
        }),
        units: promptgauge_suite::plan::units_of(bench.cases.iter().map(|c| c.group.as_deref())),
    })
}

/// The sequential plan of a new `--until-decided` run, from the bench's `sequential:`.
fn sequential_plan(
    bench: &Bench,
    variants: usize,
    endpoints: usize,
    max_drop: Option<f64>,
    seed: Option<u64>,
) -> Result<SequentialPlan, Failure> {
    if variants * endpoints < 2 {
        return Err(UsageError::with_fix(
            "--until-decided stops when each variant's comparison with the baseline is decided, and this run has one variant",
            "select a baseline and at least one variant to compare (--variants a,b)",
        )
        .into());
    }
    let spec = &bench.sequential;
    let comparisons = promptgauge_suite::plan::largest_family(variants, endpoints).max(1);
    let detect = spec.detect / 100.0;
    // Counted against the fixed design for a baseline at ½, the most demanding.
    let fixed = promptgauge_stats::sequential::fixed_design_cases(
        detect,
        0.5,
        spec.power,
        bench.confidence,
        comparisons,
    );
    // With --max-drop the drop check needs its own fixed design too (at ½, the most).
    let drop_fixed = max_drop.and_then(|m| {
        let mut a = promptgauge_stats::power::Assumptions::new(0.5, 1.0 - bench.confidence);
        a.comparisons = comparisons;
        promptgauge_stats::power::non_inferiority_cases(m, spec.power, &a)
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
        seed: seed.or(spec.seed).unwrap_or_else(rand::random),
        detect,
        power: spec.power,
        min_cases: spec.min_cases,
        max_cases: max_cases.max(1),
        comparisons,
        binary: bench.binary(),
        fixed_design_cases: fixed,
        max_drop,
        best: None,
        units: Vec::new(),
    })
}
