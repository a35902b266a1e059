//! The bench: its YAML file, its cases, its variants and templates, and the job plan.
//!
//! Invariant: the bench as written, checked before anything is sent; it builds no scorer
//! and sends no request (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod attachments;
pub mod cases;
pub mod endpoint;
pub mod endpoints;
pub mod error;
pub mod extract;
pub mod gates;
pub mod grading;
pub mod jinja;
mod json;
pub mod plan;
pub mod prompts;
pub mod schema;
mod schema_cost;
pub mod template;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod tools;
pub mod yaml;

use promptgauge_client::attachment::FileTokens;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use cases::Case;
pub use endpoint::Price;
pub use endpoint::check_base_url;
pub use endpoint::{EndpointSpec, UrlList};
use endpoint::{check_price, resolve_limits};
pub use error::FilePos;
pub use error::{InputError, InputErrors};
pub use grading::Scale;
pub use grading::{CallOrder, GradeSpec};
pub use plan::{Fingerprint, Plan};
pub use plan::{Job, Shard};
pub use prompts::Variant;
pub use template::{ChatMessage, Templates};

use promptgauge_client::ProtocolKind;
use promptgauge_client::limits::RawLimits;
pub use promptgauge_client::limits::parse_duration;
pub use promptgauge_client::limits::{Limits, MAX_DURATION};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// A bench: every prompt variant runs over every case, and the variants are compared case
/// by case (docs/guide/files.md). Paths are relative to the bench file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Bench")]
#[schemars(extend("dependencies" = { "epsilon": { "required": ["decide"] } }))]
struct RawBench {
    /// Used in report folder names.
    #[schemars(length(min = 1))]
    name: String,
    /// Case files (.jsonl, .yaml or .csv): a path or a list of paths.
    cases: OneOrMany,
    /// Prompt files (.yaml, .txt or .md), one variant each; the first is the baseline the
    /// others are compared with.
    #[schemars(length(min = 1))]
    variants: Vec<String>,
    /// How answers are scored (docs/guide/scorers.md); a case may override it [default:
    /// exact].
    #[serde(default)]
    grade: Option<GradeSpec>,
    /// How every variant without an `extract:` of its own reads its answer before it is
    /// scored (docs/guide/scorers.md, "A variant reads its own answer").
    #[serde(default)]
    #[schemars(schema_with = "prompts::extract_schema")]
    extract: Option<Value>,
    /// The one endpoint the bench runs on (docs/guide/real-model.md).
    #[serde(default)]
    endpoint: EndpointSpec,
    /// Several models, each named, instead of `endpoint:` (docs/guide/endpoints.md).
    #[serde(default)]
    endpoints: Option<Vec<endpoints::RawNamedEndpoint>>,
    /// Request parameters passed through in every request (`temperature`, `max_tokens`,
    /// …); a variant's go over them.
    #[serde(default)]
    params: Map<String, Value>,
    /// The client's gate, attempts, deadlines and rate limits (docs/guide/client.md).
    #[serde(default)]
    limits: RawLimits,
    /// What tokens cost, in USD per million: enables cost and $/correct ($/point on a scored bench).
    #[serde(default)]
    price: Option<Price>,
    /// Answers per case and variant (more only with temperature > 0) [default: 1].
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_REPEATS))]
    repeats: Option<i64>,
    /// The confidence of every interval and verdict [default: 0.95].
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0.5, "exclusiveMaximum" = 1))]
    confidence: Option<f64>,
    /// Who judges, when a scorer asks a model (docs/guide/judge.md) [default: the model
    /// under test].
    #[serde(default)]
    judge: Option<RawJudge>,
    /// How `run --until-decided` stops (docs/guide/statistics.md).
    #[serde(default)]
    sequential: Option<SequentialSpec>,
    /// Tools the model is offered in an agent loop (docs/guide/tools.md).
    #[serde(default)]
    tools: Vec<tools::ToolSpec>,
    /// How far one job's agent loop may go.
    #[serde(default, rename = "loop")]
    agent_loop: Option<tools::LoopLimits>,
    /// MCP servers whose tools are offered to the model (docs/guide/tools.md).
    #[serde(default)]
    mcp: Vec<tools::McpServerSpec>,
    /// `decide: best`: every run is `run --best` (docs/guide/best.md).
    #[serde(default)]
    decide: Option<Decide>,
    /// With `decide: best`: how close to the best counts as the best, in points (0 up to,
    /// not including, 50) [default: 2].
    #[serde(default)]
    #[schemars(range(min = 0), extend("exclusiveMaximum" = 50))]
    epsilon: Option<f64>,
    /// Run gates the bench carries: `run` applies each as if its flag were given; a flag
    /// given overrides the bench's value (docs/guide/ci.md).
    #[serde(default)]
    gates: gates::BenchGates,
}

/// `decide:` — what a run of the bench decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decide {
    /// Each variant against the baseline (the default).
    Pairwise,
    /// The best of the variants (`run --best`).
    Best,
}

/// `sequential:` — how `run --until-decided` stops (every field optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Sequential")]
pub struct SequentialSpec {
    /// The smallest difference worth detecting, in points.
    #[serde(default = "default_detect")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 100))]
    pub detect: f64,
    /// The chance of calling a real difference of `detect` points.
    #[serde(default = "default_power")]
    #[schemars(extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub power: f64,
    /// No verdict before this many cases.
    #[serde(default = "default_min_cases")]
    pub min_cases: u64,
    /// Stop undecided at this many cases [default: twice the fixed design's cases].
    #[serde(default)]
    pub max_cases: Option<u64>,
    /// Seeds the case order [default: a new seed per run, kept in run.json].
    #[serde(default)]
    pub seed: Option<u64>,
}

fn default_detect() -> f64 {
    10.0
}

fn default_power() -> f64 {
    0.8
}

fn default_min_cases() -> u64 {
    promptgauge_stats::sequential::DEFAULT_MIN_CASES
}

impl Default for SequentialSpec {
    fn default() -> Self {
        SequentialSpec {
            detect: default_detect(),
            power: default_power(),
            min_cases: default_min_cases(),
            max_cases: None,
            seed: None,
        }
    }
}

/// The bench's `judge:` block as written: who judges; fields left unset come from the
/// run's endpoint.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Judge")]
struct RawJudge {
    /// One of `endpoints:`, by name: its server, model, key, protocol, price, parameters,
    /// limits and headers, under the fields given here.
    endpoint: Option<String>,
    /// The judge's server, ending in `/v1`.
    base_url: Option<String>,
    /// The judge's model.
    model: Option<String>,
    /// The NAME of the variable holding the judge's API key.
    api_key_env: Option<String>,
    /// The judge endpoint's wire protocol.
    protocol: Option<ProtocolKind>,
    /// Request parameters for judge calls, over `temperature: 0` and a JSON reply.
    #[serde(default)]
    params: Map<String, Value>,
    /// The judge's own gate, timeouts and attempts [default: the bench's `limits`].
    #[serde(default)]
    limits: RawLimits,
    /// What the judge's tokens cost.
    #[serde(default)]
    price: Option<Price>,
}

/// Who judges (`judge:`): fields left unset come from the run's endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeSettings {
    /// The endpoint (of `endpoints:`) it judges at, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    /// The judge endpoint's protocol: the run's when it judges at the run's endpoint, else
    /// `openai-chat` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolKind>,
    /// Request parameters for judge calls, over `temperature: 0` and a JSON reply.
    pub params: Map<String, Value>,
    /// The judge's own gate, timeouts and attempts (the bench's `limits` where unset).
    pub limits: Limits,
    /// What the judge's tokens cost; without it, the bench's `price` when the judge is the
    /// model under test, else unknown.
    pub price: Option<Price>,
    /// Extra request headers, from the endpoint it names (`${VAR}` read at the start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// A loaded and fully checked bench. Holding one means no input error remains.
#[derive(Debug)]
pub struct Bench {
    pub path: PathBuf,
    /// The bench file as written, recorded in `run.json`.
    pub text: String,
    pub name: String,
    pub cases: Vec<Case>,
    pub variants: Vec<Variant>,
    /// One scorer per case, in case order (cases without their own share the bench's).
    pub grade: GradeSpec,
    pub endpoint: EndpointSpec,
    /// `endpoints:`, each named (empty when the bench has the single `endpoint:`).
    pub endpoints: Vec<endpoints::NamedEndpoint>,
    pub params: Map<String, Value>,
    pub limits: Limits,
    pub price: Option<Price>,
    pub repeats: u32,
    pub confidence: f64,
    pub templates: Templates,
    /// The `judge:` block, when the bench has one.
    pub judge: Option<JudgeSettings>,
    /// How `run --until-decided` stops.
    pub sequential: SequentialSpec,
    /// The tools an agent loop offers (`tools:`, docs/guide/tools.md): already in
    /// `params.tools` as the model is offered them.
    pub tools: Vec<tools::ToolSpec>,
    /// `loop:` — how far one job's loop may go.
    pub loop_limits: tools::LoopLimits,
    /// `mcp:` — servers whose tools a run adds to `tools` once it has started them.
    pub mcp: Vec<tools::McpServerSpec>,
    /// Where `grade:` is in the bench file.
    pub(crate) grade_at: FilePos,
    /// Each tool's schema, compiled: what a call's arguments are checked against.
    pub argument_checks: tools::ArgumentChecks,
    /// `decide: best`: every run finds the best of the variants, `epsilon` points (2 by
    /// default) counting as the best.
    pub best_epsilon: Option<f64>,
    /// `gates:` — the run gates the bench carries (a flag given overrides each).
    pub gates: gates::BenchGates,
}

impl Bench {
    /// Loads the bench and everything it names, and checks every template against every case.
    pub fn load(path: &Path) -> Result<Bench, InputErrors> {
        Bench::load_cases(path, None)
    }

    /// [`Bench::load`] with only the case `id` (none if it has no such case): what one
    /// case's prompt needs, without a large bench's every case in memory.
    pub fn load_case(path: &Path, id: &str) -> Result<Bench, InputErrors> {
        Bench::load_cases(path, Some(&|c: &str| c == id))
    }

    /// [`Bench::load`] with only the cases `keep` takes: what a page of cases needs
    /// (`view`'s matrix shows their variables), without a large bench's every case.
    pub fn load_some(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<Bench, InputErrors> {
        Bench::load_cases(path, Some(keep))
    }

    /// Loads the bench at `path` with the cases `keep` takes (all, without it), checking
    /// each part as it is read and the parts against each other.
    fn load_cases(path: &Path, keep: Option<&dyn Fn(&str) -> bool>) -> Result<Bench, InputErrors> {
        let (text, raw) = read_raw(path)?;
        let here = |key: &str| match error::line_of_key(&text, key) {
            Some(l) => FilePos::line(path, l),
            None => FilePos::file(path),
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let case_paths = check_named(&raw, dir, &here)?;
        let limits = resolve_limits(raw.limits, &Limits::default(), &here)?;
        let endpoints = bench_endpoints(raw.endpoints, &raw.endpoint, &limits, &here)?;
        let judge = judge_settings(raw.judge, &limits, &endpoints, &here)?;
        let repeats = repeats_of(raw.repeats, &here)?;
        let confidence = confidence_of(raw.confidence, &here)?;
        let sequential = raw.sequential.unwrap_or_default();
        check_sequential(&sequential, &here)?;
        check_price(raw.price.as_ref(), &here)?;
        check_base_urls(&raw.endpoint, &here)?;
        let mut grade = raw.grade.unwrap_or_default();
        let mut cases = match keep {
            None => cases::load_all(&case_paths)?,
            Some(keep) => cases::load_some(&case_paths, keep)?,
        };
        grading::name_parts(
            std::iter::once(&mut grade).chain(cases.iter_mut().filter_map(|c| c.grade.as_mut())),
        );
        check_expected_given(&cases, &grade)?;
        let params = check_agent_tools(&raw.tools, raw.params, &cases, &here)?;
        let grade_at = here("grade");
        let best_epsilon = best_epsilon(raw.decide, raw.epsilon, &here)?;
        let argument_checks = tools::ArgumentChecks::of(&raw.tools).map_err(|(tool, e)| {
            InputError::new(
                here("tools"),
                format!("the parameters of `{tool}` {}", e.message),
            )
            .fix(e.fix)
        })?;
        check_loop(raw.agent_loop.as_ref(), &here)?;
        raw.gates.check(&here)?;
        tools::check_servers(&raw.mcp).map_err(|e| InputError::new(here("mcp"), e).fix("each server is {run: [program, args…], env: [NAMES], timeout: 30s, tools: [names]}; see docs/guide/tools.md"))?;

        let mut variants = load_variants(dir, &raw.variants, path, &text)?;
        default_reading(raw.extract.as_ref(), &mut variants, &here)?;
        let templates = Templates::compile(&variants)?;
        templates.check(&variants, &cases)?;
        check_tools(&cases, &grade, &params, &variants)?;
        check_names_apart(&endpoints, &variants, &here)?;

        Ok(Bench {
            path: path.to_path_buf(),
            text,
            name: raw.name,
            cases,
            variants,
            grade,
            endpoint: raw.endpoint,
            endpoints,
            params,
            limits,
            price: raw.price,
            repeats,
            confidence,
            templates,
            judge,
            sequential,
            tools: raw.tools,
            loop_limits: raw.agent_loop.unwrap_or_default(),
            mcp: raw.mcp,
            argument_checks,
            best_epsilon,
            grade_at,
            gates: raw.gates,
        })
    }

    /// Every tool a trajectory scorer names (the bench's `grade:`, each case's) is one the
    /// model is offered: a scorer waiting for a call no model can make would fail every job
    /// and say nothing. For a bench with MCP servers, once their tools are in.
    pub fn check_trajectory_tools(&self) -> Result<(), InputErrors> {
        let offered: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
        let fix = format!(
            "name tools the model is offered: {}",
            if offered.is_empty() {
                "none is (declare them under `tools:`)".to_string()
            } else {
                offered.join(", ")
            }
        );
        let grades = std::iter::once((&self.grade, self.grade_at.clone())).chain(
            self.cases
                .iter()
                .filter_map(|c| c.grade.as_ref().map(|g| (g, c.location.clone()))),
        );
        let mut errors = Vec::new();
        for (grade, at) in grades {
            let named = match grade.named_tools() {
                Ok(named) => named,
                Err(e) => {
                    errors.push(InputError::new(at, e).fix(fix.clone()));
                    continue;
                }
            };
            if let Some(missing) = named.iter().find(|n| !offered.contains(n)) {
                errors.push(
                    InputError::new(at, format!("a trajectory scorer names the tool `{missing}`, which the model is not offered")).fix(fix.clone()),
                );
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(InputErrors(errors))
        }
    }

    /// Whether each job is an agent loop: the bench declares tools, or MCP servers that
    /// will list them.
    pub fn has_tools(&self) -> bool {
        !self.tools.is_empty() || !self.mcp.is_empty()
    }

    /// Adds the tools the bench's MCP servers list (each marked with its server, its
    /// schema compiled) to those it declares, offered to the model with them; why they
    /// cannot be (a name declared twice, or one a provider refuses).
    pub fn serve_tools(&mut self, served: tools::ServedTools) -> Result<(), String> {
        let mut all = self.tools.clone();
        all.extend(served.tools);
        tools::check(&all)?;
        self.argument_checks.extend(served.checks);
        self.params.remove("tools");
        self.params = tools::with_tools(std::mem::take(&mut self.params), &all)?;
        self.tools = all;
        Ok(())
    }

    /// Whether every score this bench can give is 0 or 1 with one answer per case: the
    /// sequential test then works on the discordant pairs.
    pub fn binary(&self) -> bool {
        self.repeats == 1
            && self
                .cases
                .iter()
                .all(|c| c.grade.as_ref().unwrap_or(&self.grade).binary())
    }

    /// Tokens a request reserves against tokens_per_minute: its estimated prompt tokens and
    /// the completion ceiling, `max_tokens`.
    pub fn reservation(&self, variant: usize, messages: &[ChatMessage]) -> u64 {
        prompt_tokens(messages) + self.max_tokens(variant).unwrap_or(0)
    }

    /// The messages a job sends: its variant rendered for its case.
    pub fn render_job(&self, job: &Job) -> Result<Vec<ChatMessage>, minijinja::Error> {
        self.templates.render(
            job.variant,
            &self.cases[job.case],
            &self.variants[job.variant],
        )
    }

    /// The completion ceiling a variant's requests carry, if any.
    pub fn max_tokens(&self, variant: usize) -> Option<u64> {
        self.max_tokens_at(variant, &Map::new())
    }

    /// The completion ceiling a variant's requests carry at an endpoint (its parameters
    /// over the bench's), if any.
    pub fn max_tokens_at(&self, variant: usize, endpoint: &Map<String, Value>) -> Option<u64> {
        let params = self.params_at(variant, endpoint);
        params
            .get("max_completion_tokens")
            .or_else(|| params.get("max_tokens"))
            .and_then(Value::as_u64)
    }

    /// Each program its scorers will run (the bench's `grade:` and every case's own), once,
    /// in a sentence that says where it is named and what of the environment it sees:
    /// "scores with `python3 score.py` (promptgauge.yaml line 7); it sees PATH, HOME, …".
    pub fn programs_said(&self) -> Vec<String> {
        let mut said: Vec<(Vec<String>, String)> = Vec::new();
        let named = std::iter::once((&self.grade, self.location_of("run"))).chain(
            self.cases
                .iter()
                .filter_map(|c| c.grade.as_ref().map(|g| (g, c.location.clone()))),
        );
        for (grade, at) in named {
            for (argv, env) in grade.programs() {
                if said.iter().any(|(a, _)| a.as_slice() == argv) {
                    continue;
                }
                let place = match at.line {
                    Some(l) => format!("{} line {l}", at.file.display()),
                    None => at.file.display().to_string(),
                };
                let sees = grading::PASSED_ENV
                    .iter()
                    .map(|s| s.to_string())
                    .chain(env.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(", ");
                said.push((
                    argv.to_vec(),
                    format!(
                        "scores with `{}` ({place}); it sees {sees} and no other variable",
                        argv.join(" ")
                    ),
                ));
            }
        }
        said.into_iter().map(|(_, s)| s).collect()
    }

    /// Where `key` is written in the bench file (its line, when it is there).
    pub fn location_of(&self, key: &str) -> FilePos {
        match error::line_of_key(&self.text, key) {
            Some(l) => FilePos::line(&self.path, l),
            None => FilePos::file(&self.path),
        }
    }

    /// The folder the bench's files are named relative to.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Request parameters for a variant: the bench's, overridden by the variant's.
    pub fn params_for(&self, variant: usize) -> Map<String, Value> {
        self.params_at(variant, &Map::new())
    }

    /// A variant's request parameters at an endpoint: the bench's, then the endpoint's
    /// over them, then the variant's over both (a variant's own setting always wins).
    pub fn params_at(&self, variant: usize, endpoint: &Map<String, Value>) -> Map<String, Value> {
        let mut params = self.params.clone();
        for (k, v) in endpoint.iter().chain(&self.variants[variant].params) {
            params.insert(k.clone(), v.clone());
        }
        params
    }
}

/// The `judge:` block, checked, its limits over the bench's.
fn judge_settings(
    raw: Option<RawJudge>,
    limits: &Limits,
    endpoints: &[endpoints::NamedEndpoint],
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Option<JudgeSettings>, InputErrors> {
    Ok(match raw {
        None => None,
        Some(mut j) => {
            let named = match &j.endpoint {
                None => None,
                Some(name) => Some(endpoints.iter().find(|e| &e.name == name).ok_or_else(|| {
                    InputError::new(
                        here("judge"),
                        format!("judge.endpoint names `{name}`, which is not one of `endpoints:`"),
                    )
                    .fix(if endpoints.is_empty() {
                        "list it under `endpoints:`, or give the judge its own base_url and model".to_string()
                    } else {
                        format!(
                            "name one of: {}",
                            endpoints.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")
                        )
                    })
                })?),
            };
            // The named endpoint's settings, under what the block says itself.
            let mut params = Map::new();
            let mut base_limits = limits.clone();
            let mut headers = Vec::new();
            if let Some(e) = named {
                j.base_url = j.base_url.or_else(|| {
                    e.spec
                        .base_url
                        .as_ref()
                        .and_then(|u| u.urls().first().cloned())
                });
                j.model = j.model.or_else(|| e.spec.model.clone());
                j.api_key_env = j.api_key_env.or_else(|| e.spec.api_key_env.clone());
                j.protocol = j.protocol.or(e.spec.protocol);
                j.price = j.price.or_else(|| e.price.clone());
                params = e.params.clone();
                base_limits = e.limits.clone();
                headers = e.headers.clone();
            }
            params.extend(j.params);
            if let Some(url) = &j.base_url {
                check_base_url(url, j.protocol.unwrap_or_default()).map_err(|m| {
                    InputError::new(here("judge"), format!("judge.base_url: {m}"))
                        .fix("write the full URL, e.g. http://127.0.0.1:8000/v1, or `mock`")
                })?;
            }
            Some(JudgeSettings {
                endpoint: j.endpoint,
                base_url: j.base_url,
                model: j.model,
                api_key_env: j.api_key_env,
                protocol: j.protocol,
                params,
                limits: resolve_limits(j.limits, &base_limits, &|key| {
                    here(&format!("judge.limits.{key}"))
                })?,
                price: j.price,
                headers,
            })
        }
    })
}

/// The bench's named endpoints: `endpoints:` lists at least one, and is not given beside
/// `endpoint:`.
fn bench_endpoints(
    raw: Option<Vec<endpoints::RawNamedEndpoint>>,
    endpoint: &EndpointSpec,
    limits: &Limits,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Vec<endpoints::NamedEndpoint>, InputError> {
    if raw.as_ref().is_some_and(Vec::is_empty) {
        return Err(
            InputError::new(here("endpoints"), "`endpoints:` lists no endpoint")
                .fix("list at least one (name, base_url, model), or remove `endpoints:`"),
        );
    }
    let raw = raw.unwrap_or_default();
    if !raw.is_empty() && *endpoint != EndpointSpec::default() {
        return Err(InputError::new(
            here("endpoints"),
            "the bench has both `endpoint:` and `endpoints:`",
        )
        .fix("move the `endpoint:` block into `endpoints:` as one more named entry"));
    }
    endpoints::named_endpoints(raw, limits, here)
}

/// Every `base_url` of `endpoint:` is a whole URL its protocol can be sent to.
fn check_base_urls(
    endpoint: &EndpointSpec,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<(), InputError> {
    for url in endpoint.base_url.iter().flat_map(UrlList::urls) {
        check_base_url(&url, endpoint.protocol.unwrap_or_default()).map_err(|e| {
            InputError::new(here("base_url"), e.to_string())
                .fix("write the full URL, e.g. http://127.0.0.1:8000/v1")
        })?;
    }
    Ok(())
}

/// No endpoint has a variant's name: a cell is `ENDPOINT/VARIANT` and a gate may name
/// either, so one name has one meaning.
fn check_names_apart(
    endpoints: &[endpoints::NamedEndpoint],
    variants: &[Variant],
    here: &dyn Fn(&str) -> FilePos,
) -> Result<(), InputError> {
    match endpoints
        .iter()
        .find(|e| variants.iter().any(|v| v.name == e.name))
    {
        Some(clash) => Err(InputError::new(
            here("endpoints"),
            format!(
                "endpoint `{}` has the name of a variant: a gate or a report naming `{}` would mean both",
                clash.name, clash.name
            ),
        )
        .fix("rename the endpoint (e.g. after its model or server)")),
        None => Ok(()),
    }
}

/// `sequential:` makes sense: a difference in points, a power, at least as many cases at
/// most as at least.
fn check_sequential(q: &SequentialSpec, here: &dyn Fn(&str) -> FilePos) -> Result<(), InputErrors> {
    let bad = |m: String, fix: &str| -> InputErrors {
        InputError::new(here("sequential"), m).fix(fix).into()
    };
    if !(q.detect > 0.0 && q.detect < 100.0) {
        return Err(bad(
            format!(
                "sequential.detect must be between 0 and 100 points, found {}",
                q.detect
            ),
            "the smallest difference worth detecting, in points: e.g. detect: 10",
        ));
    }
    if !(q.power > 0.0 && q.power < 1.0) {
        return Err(bad(
            format!(
                "sequential.power must be between 0 and 1, found {}",
                q.power
            ),
            "e.g. power: 0.8",
        ));
    }
    if q.max_cases == Some(0) || q.max_cases.is_some_and(|m| m < q.min_cases) {
        return Err(bad(
            format!(
                "sequential.max_cases ({}) must be at least 1 and at least min_cases ({})",
                q.max_cases.unwrap_or(0),
                q.min_cases
            ),
            "raise max_cases, or lower min_cases",
        ));
    }
    Ok(())
}

/// The bench's `extract:`, for every variant that has none of its own.
fn default_reading(
    written: Option<&Value>,
    variants: &mut [Variant],
    here: &dyn Fn(&str) -> FilePos,
) -> Result<(), InputError> {
    let Some(written) = written.filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let reading = extract::Extract::from_value(written)
        .map_err(|e| InputError::new(here("extract"), e.message).fix(e.fix))?;
    for v in variants.iter_mut().filter(|v| v.extract.is_none()) {
        v.extract = Some(reading.clone());
    }
    Ok(())
}

/// The variants' prompt files, each name once; `bench` is the bench file and `text` its
/// text (an entry that names no file is said at its line).
fn load_variants(
    dir: &Path,
    files: &[String],
    bench: &Path,
    text: &str,
) -> Result<Vec<Variant>, InputErrors> {
    let mut variants: Vec<Variant> = Vec::new();
    for p in files {
        if !dir.join(p).exists() {
            return Err(no_prompt_file(bench, text, p).into());
        }
        let v = prompts::load(&dir.join(p))?;
        if let Some(other) = variants.iter().find(|o| o.name == v.name) {
            return Err(InputError::new(
                FilePos::file(&v.path),
                format!(
                    "variant name `{}` is also used by {}",
                    v.name,
                    other.path.display()
                ),
            )
            .fix("give each variant a unique `name:`")
            .into());
        }
        variants.push(v);
    }
    Ok(variants)
}

/// `decide: best`'s ε in points (2 unless `epsilon:` says); `epsilon:` without it is a
/// mistake.
fn best_epsilon(
    decide: Option<Decide>,
    epsilon: Option<f64>,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Option<f64>, InputErrors> {
    match (decide, epsilon) {
        (Some(Decide::Best), Some(e)) if !(e.is_finite() && (0.0..50.0).contains(&e)) => {
            Err(InputError::new(
                here("epsilon"),
                format!("`epsilon: {e}` is not a number of points from 0 up to (not including) 50"),
            )
            .fix("`epsilon: 2` (two points: an arm within 2 points of the best counts as the best)")
            .into())
        }
        (Some(Decide::Best), e) => Ok(Some(e.unwrap_or(2.0))),
        (_, Some(_)) => Err(InputError::new(
            here("epsilon"),
            "`epsilon:` says how close to the best counts as the best, and the bench does not decide the best",
        )
        .fix("add `decide: best`, or remove `epsilon:`")
        .into()),
        _ => Ok(None),
    }
}

/// The bench's `tools:` (names and schemas every provider takes) and every case's
/// `tool_results:` (each line a declared tool); returns `params` with the tools offered.
fn check_agent_tools(
    declared: &[tools::ToolSpec],
    params: Map<String, Value>,
    cases: &[Case],
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Map<String, Value>, InputErrors> {
    let fix =
        "each tool is {name, description, parameters: {type: object, …}}; see docs/guide/tools.md";
    tools::check(declared).map_err(|e| InputError::new(here("tools"), e).fix(fix))?;
    let params =
        tools::with_tools(params, declared).map_err(|e| InputError::new(here("tools"), e))?;
    let mut errors = Vec::new();
    for case in cases.iter().filter(|c| !c.tool_script.is_empty()) {
        if let Err(e) = tools::check_script(declared, &case.tool_script) {
            errors.push(
                InputError::new(case.location.clone(), format!("case `{}`: {e}", case.id))
                    .fix("each line is {tool, args, match: exact|subset|pattern, result}, naming a tool of the bench's `tools:` (an MCP server's tools are answered by it, never scripted)"),
            );
        }
    }
    if errors.is_empty() {
        Ok(params)
    } else {
        Err(InputErrors(errors))
    }
}

/// A `tool_call` case can only pass if every variant offers the tools it expects: a case
/// whose expected call names a tool a variant does not offer is a bench bug, caught here.
fn check_tools(
    cases: &[Case],
    grade: &GradeSpec,
    params: &Map<String, Value>,
    variants: &[Variant],
) -> Result<(), InputErrors> {
    let mut errors = Vec::new();
    for case in cases {
        if !case.grade.as_ref().unwrap_or(grade).uses_tool_call() {
            continue;
        }
        let expected: Vec<&str> = match &case.expected_json {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|c| c.get("name")?.as_str())
                .collect(),
            Some(one) => one
                .get("name")
                .and_then(Value::as_str)
                .into_iter()
                .collect(),
            None => Vec::new(),
        };
        for v in variants {
            let tools = v.params.get("tools").or_else(|| params.get("tools"));
            let offered: Vec<&str> = tools
                .and_then(Value::as_array)
                .map(|ts| {
                    ts.iter()
                        .filter_map(|t| {
                            t.get("function")
                                .and_then(|f| f.get("name"))
                                .or_else(|| t.get("name"))
                                .and_then(Value::as_str)
                        })
                        .collect()
                })
                .unwrap_or_default();
            if offered.is_empty() {
                errors.push(
                    InputError::new(
                        case.location.clone(),
                        format!(
                            "case `{}` is scored by the tool calls made, but variant `{}` offers no tools",
                            case.id, v.name
                        ),
                    )
                    .fix("list the tools under `params: { tools: [...] }` in the bench (or the variant)"),
                );
                continue;
            }
            for name in &expected {
                if !offered.contains(name) {
                    errors.push(
                        InputError::new(
                            case.location.clone(),
                            format!(
                                "case `{}` expects a call to `{name}`, which variant `{}` does not offer (it offers {})",
                                case.id,
                                v.name,
                                offered.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ")
                            ),
                        )
                        .fix("correct the expected name, or add the tool to `params.tools`"),
                    );
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InputErrors(errors))
    }
}

/// Estimated prompt tokens of rendered messages: about four characters a token, plus a few
/// per message for the chat framing, plus each file's tokens by the provider's rule that
/// counts more (what a hold before sending assumes: docs/guide/attachments.md).
pub fn prompt_tokens(messages: &[ChatMessage]) -> u64 {
    prompt_tokens_by(messages, FileTokens::most)
}

/// [`prompt_tokens`], each file counted by `rule` (one provider's).
pub fn prompt_tokens_by(messages: &[ChatMessage], rule: impl Fn(FileTokens) -> u64) -> u64 {
    messages
        .iter()
        .map(|m| {
            let files: u64 = m.files.iter().map(|p| rule(p.file.tokens)).sum();
            m.content.chars().count().div_ceil(4) as u64 + 3 + files
        })
        .sum()
}

/// The bench file's text, and the bench as written in it.
fn read_raw(path: &Path) -> Result<(String, RawBench), InputError> {
    let text = error::read_text(path, "bench")?;
    if text.trim().is_empty() {
        return Err(
            InputError::new(FilePos::file(path), "the bench file is empty")
                .fix("a bench needs `name:`, `cases:` and `variants:`; see docs/guide/files.md"),
        );
    }
    let mut raw: RawBench = serde_saphyr::from_str_with_options(&text, yaml::core_schema())
        .map_err(|e| {
            inline_variant_error(path, &text, &e)
                .unwrap_or_else(|| error::yaml_error(path, "bench file", &e))
        })?;
    yaml::tool_defaults_as_written(path, &text, &mut raw.tools)?;
    Ok((text, raw))
}

/// How a variant is written, for an entry of `variants:` that is none.
const VARIANT_FORM: &str = "a variant is the path of a prompt file (.yaml, .txt or .md), relative to the bench: `variants: [prompts/plain.txt, prompts/careful.yaml]` (docs/guide/files.md, \"Variants\")";

/// An entry of `variants:` that names no file: a prompt written inline (its text), or a
/// path that is not there; `path` is the bench file, `text` its text.
fn no_prompt_file(path: &Path, text: &str, entry: &str) -> InputError {
    let start = error::line_of_key(text, "variants").unwrap_or(1);
    let line = text
        .lines()
        .enumerate()
        .skip(start - 1)
        .find(|(_, l)| l.contains(entry.lines().next().unwrap_or(entry)))
        .map_or(start, |(i, _)| i + 1);
    let mut shown: String = entry
        .chars()
        .take(60)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if entry.chars().count() > 60 {
        shown.push('…');
    }
    let is_path = !entry.contains(['\n', '{', '}'])
        && !entry.trim().contains(' ')
        && [".yaml", ".yml", ".txt", ".md"]
            .iter()
            .any(|x| entry.ends_with(x));
    if is_path {
        return InputError::new(
            FilePos::line(path, line),
            format!(
                "variant `{shown}`: there is no prompt file {}",
                path.parent()
                    .unwrap_or(Path::new("."))
                    .join(entry)
                    .display()
            ),
        )
        .fix("check the path; relative paths are resolved from the bench file's folder");
    }
    InputError::new(
        FilePos::line(path, line),
        format!("variant `{shown}` is a prompt's text, not the path of a prompt file"),
    )
    .fix(format!("write the prompt into a file — e.g. prompts/plain.txt holding `{shown}` (one user message), or a .yaml prompt file with `name:` and `messages:` — and list its path; {VARIANT_FORM}"))
}

/// A bench whose `variants:` holds something other than paths (a prompt written inline as
/// a map, `- {name: x, messages: […]}`): the YAML reader's "expected string scalar" in the
/// words of a bench, at its line. `None` when the error is not in `variants:`.
fn inline_variant_error(path: &Path, text: &str, err: &serde_saphyr::Error) -> Option<InputError> {
    let at = err.location().filter(|l| l.line() > 0)?;
    let line = at.line() as usize;
    let start = error::line_of_key(text, "variants")?;
    let top_level = |l: &str| {
        l.chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let inside = line >= start
        && !text
            .lines()
            .skip(start)
            .take(line.saturating_sub(start + 1))
            .any(top_level);
    if !inside || !err.to_string().contains("expected string") {
        return None;
    }
    Some(
        InputError::new(
            FilePos::at(path, line, at.column() as usize),
            "`variants:` holds a prompt written in the bench; it lists prompt files",
        )
        .fix(format!("move each prompt into its own file — e.g. prompts/plain.yaml holding its `name:` and `messages:` — and list the file; {VARIANT_FORM}")),
    )
}

/// Whether a bench name can name a run folder, a line of a CI step's outputs and a terminal
/// title: not empty, no spaces at an end, no slash, no leading `.`, no control character,
/// at most 100 bytes.
pub fn is_folder_safe(name: &str) -> bool {
    !(name.trim().is_empty()
        || name.trim() != name
        || name.contains(['/', '\\'])
        || name.starts_with('.')
        || name.chars().any(char::is_control)
        || name.len() > 100)
}

/// `loop:`'s limits: each lets a loop send a request and make a call, and its deadline
/// reads.
fn check_loop(
    agent_loop: Option<&tools::LoopLimits>,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<(), InputErrors> {
    if agent_loop.is_some_and(|l| l.max_turns == 0) {
        return Err(InputError::new(
            here("loop"),
            "loop.max_turns is 0: no request could be sent",
        )
        .fix("max_turns: 8 (the requests to the model a loop may make, the first included)")
        .into());
    }
    if agent_loop.is_some_and(|l| l.max_tool_calls == 0) {
        return Err(InputError::new(
            here("loop"),
            "loop.max_tool_calls is 0: the first answer that calls a tool would end its loop, and every job would fail after its first request was paid for",
        )
        .fix("max_tool_calls: 16 (the tool calls a loop may make in all); a bench whose model should call no tool declares none")
        .into());
    }
    if let Some(d) = agent_loop.and_then(|l| l.deadline.as_deref()) {
        parse_duration(d).map_err(|e| {
            InputError::new(here("loop"), format!("loop.deadline: {e}"))
                .fix("deadline: 5m (or 90s, 1h)")
        })?;
    }
    Ok(())
}

/// A usable name, at least one cases file (returned, from `dir`) and at least one variant.
fn check_named(
    raw: &RawBench,
    dir: &Path,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Vec<PathBuf>, InputError> {
    // The name becomes a folder name, a line of the CI step's outputs and a terminal
    // title: no separators, no control characters (a newline would split `run-dir`).
    let name = &raw.name;
    if !is_folder_safe(name) {
        return Err(InputError::new(
            here("name"),
            format!(
                "bench name `{}` is empty, too long (over 100 bytes), starts with `.`, has spaces at an end, or contains a slash or a control character",
                name.escape_debug()
            ),
        )
        .fix("the name is used in report folder names; use e.g. `routing`"));
    }
    let case_paths: Vec<PathBuf> = match &raw.cases {
        OneOrMany::One(p) => vec![dir.join(p)],
        OneOrMany::Many(ps) => ps.iter().map(|p| dir.join(p)).collect(),
    };
    if case_paths.is_empty() {
        return Err(InputError::new(here("cases"), "`cases` lists no files")
            .fix("name at least one .jsonl, .yaml or .csv file"));
    }
    if raw.variants.is_empty() {
        return Err(
            InputError::new(here("variants"), "`variants` lists no prompt files")
                .fix("name at least one prompt file; the first is the baseline"),
        );
    }
    Ok(case_paths)
}

/// `repeats`: 1 unless set, at most 10000.
/// The most `repeats:` a bench may ask for.
const MAX_REPEATS: i64 = 10_000;

fn repeats_of(repeats: Option<i64>, here: &dyn Fn(&str) -> FilePos) -> Result<u32, InputError> {
    match repeats {
        None => Ok(1),
        Some(r) if (1..=MAX_REPEATS).contains(&r) => Ok(r as u32),
        Some(r) => Err(InputError::new(
            here("repeats"),
            format!("repeats must be between 1 and 10000, found {r}"),
        )
        .fix("use repeats: 1 unless you sample with temperature > 0")),
    }
}

/// `confidence`: 0.95 unless set, strictly between 0.5 and 1.
fn confidence_of(
    confidence: Option<f64>,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<f64, InputError> {
    match confidence {
        None => Ok(0.95),
        Some(c) if c > 0.5 && c < 1.0 => Ok(c),
        Some(c) => Err(InputError::new(
            here("confidence"),
            format!("confidence must be between 0.5 and 1 (exclusive), found {c}"),
        )
        .fix("use e.g. confidence: 0.95")),
    }
}

/// Every case whose scorer compares with an expected answer has one.
fn check_expected_given(cases: &[Case], grade: &GradeSpec) -> Result<(), InputErrors> {
    let errors: Vec<InputError> = cases
        .iter()
        .filter(|case| {
            case.expected.is_empty() && case.grade.as_ref().unwrap_or(grade).needs_expected()
        })
        .map(|case| {
            InputError::new(
                case.location.clone(),
                format!("case `{}` has no `expected` answer", case.id),
            )
            .fix("add \"expected\": \"…\" (a string, or a list of acceptable strings); only `json_schema` cases may go without")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InputErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::Duration;

    fn bench_dir(bench: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bench.yaml"), bench).unwrap();
        fs::write(
            dir.path().join("cases.jsonl"),
            "{\"id\": \"a\", \"vars\": {\"q\": \"2+3\"}, \"expected\": \"5\"}\n{\"id\": \"b\", \"vars\": {\"q\": \"1+1\"}, \"expected\": \"2\"}\n",
        )
        .unwrap();
        fs::write(dir.path().join("plain.txt"), "{{ q }}").unwrap();
        fs::write(
            dir.path().join("careful.yaml"),
            "name: careful\nmessages:\n  - { role: system, content: Be careful. }\n  - { role: user, content: \"{{ q }}\" }\nparams: { max_tokens: 50 }\n",
        )
        .unwrap();
        dir
    }

    const GOOD: &str = "name: t\ncases: cases.jsonl\nvariants: [plain.txt, careful.yaml]\ngrade: { kind: number }\nparams: { temperature: 0, max_tokens: 10 }\nlimits: { concurrency: 3, first_token_timeout: 5s, idle_timeout: 500ms }\n";

    #[test]
    fn the_bench_s_reading_is_every_variant_s_without_one_of_its_own() {
        let dir = bench_dir(&format!("{GOOD}extract: last_line\n"));
        let careful = dir.path().join("careful.yaml");
        let own = fs::read_to_string(&careful).unwrap() + "extract: { tag: answer }\n";
        fs::write(&careful, own).unwrap();
        let b = Bench::load(&dir.path().join("bench.yaml")).unwrap();
        assert_eq!(b.variants[0].extract, Some(extract::Extract::LastLine));
        assert_eq!(b.variants[1].extract, extract::Extract::tag("answer").ok());
        let dir = bench_dir(&format!("{GOOD}extract: {{ json: answer }}\n"));
        let e = Bench::load(&dir.path().join("bench.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bench.yaml:7: `answer` is not a JSON pointer"),
            "{e}"
        );
    }

    #[test]
    fn loads_a_bench() {
        let dir = bench_dir(GOOD);
        let b = Bench::load(&dir.path().join("bench.yaml")).unwrap();
        assert_eq!(b.cases.len(), 2);
        assert_eq!(b.variants[1].name, "careful");
        assert_eq!(b.limits.concurrency, 3);
        assert_eq!(b.limits.idle_timeout, Duration::from_millis(500));
        assert_eq!(b.limits.total_timeout, Duration::from_secs(300));
        assert_eq!(b.params_for(1)["max_tokens"], 50);
        assert_eq!(b.params_for(0)["max_tokens"], 10);
    }

    #[test]
    fn unknown_key_names_the_nearest() {
        let dir = bench_dir(&GOOD.replace("concurrency: 3", "concurency: 3"));
        let e = Bench::load(&dir.path().join("bench.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown key `concurency`"), "{e}");
        assert!(e.contains("did you mean `concurrency`?"), "{e}");
        assert!(e.contains("bench.yaml:6"), "{e}");
        let dir = bench_dir(&format!("{GOOD}varients: []\n"));
        let e = Bench::load(&dir.path().join("bench.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `variants`?"), "{e}");
    }

    #[test]
    fn bad_limits_are_errors_with_lines() {
        let dir = bench_dir(&GOOD.replace("concurrency: 3", "concurrency: -2"));
        let e = Bench::load(&dir.path().join("bench.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bench.yaml:6: limits.concurrency must be between 1"),
            "{e}"
        );
        let dir = bench_dir(&GOOD.replace("500ms", "soon"));
        let e = Bench::load(&dir.path().join("bench.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a duration"), "{e}");
    }

    #[test]
    fn base_url_checks() {
        assert!(check_base_url("http://127.0.0.1:8000/v1", ProtocolKind::OpenaiChat).is_ok());
        assert!(
            check_base_url("127.0.0.1:8000/v1", ProtocolKind::OpenaiChat)
                .unwrap_err()
                .to_string()
                .contains("scheme")
        );
        assert!(
            check_base_url(
                "https://api.x.com/v1/chat/completions",
                ProtocolKind::OpenaiChat
            )
            .is_err()
        );
    }

    /// Every form YAML 1.1 would rewrite, as a case file, a variant and a bench carry it
    /// (issue 50, item 25): the prompt and the answer keep what the author wrote.
    #[test]
    fn yaml_values_reach_prompts_and_answers_as_written() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("bench.yaml"),
            "name: t\ncases: cases.yaml\nvariants: [v.yaml]\ngrade: { kind: exact }\n\
             tools:\n  - { name: lookup, parameters: { type: object, properties: { a: { enum: [NO, yes, on, off] } } }, default: NO }\n  - { name: size, default: 1e3 }\n",
        )
        .unwrap();
        let forms = ["NO", "yes", "on", "off", "010", "1e3", "0x1F", "1_000"];
        let mut cases = String::new();
        for (i, form) in forms.iter().enumerate() {
            cases.push_str(&format!(
                "- id: {form}\n  vars: {{ v: {form}, list: [{form}], deep: {{ x: {form} }} }}\n  expected: {form}\n  tags: [{form}]\n  group: {form}\n  messages:\n    - {{ role: user, content: {form} }}\n    - {{ role: assistant, content: \"{i}\" }}\n"
            ));
        }
        cases.push_str(
            "- id: nothing\n  vars: { v: ~, list: [a], deep: { x: b } }\n  expected: [\"~\"]\n",
        );
        fs::write(dir.path().join("cases.yaml"), &cases).unwrap();
        fs::write(
            dir.path().join("v.yaml"),
            "name: NO\nmessages:\n  - history\n  - { role: system, content: on }\n  - { role: user, content: \"{{ v }} {{ list[0] }} {{ deep.x }}\" }\n  - { role: assistant, content: 010 }\n  - { role: user, content: 1e3 }\n",
        )
        .unwrap();
        let bench = Bench::load(&dir.path().join("bench.yaml")).unwrap();
        assert_eq!(bench.variants[0].name, "NO");
        let texts: Vec<&str> = bench.variants[0]
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(
            texts[1..],
            ["on", "{{ v }} {{ list[0] }} {{ deep.x }}", "010", "1e3"]
        );
        for (case, form) in bench.cases.iter().zip(forms) {
            assert_eq!(case.id, form);
            assert_eq!(case.expected, vec![form.to_string()], "{form}");
            assert_eq!(case.tags, vec![form.to_string()]);
            assert_eq!(case.group.as_deref(), Some(form));
            assert_eq!(case.messages[0].content, form);
            let rendered = bench.templates.render(0, case, &bench.variants[0]).unwrap();
            assert_eq!(rendered[0].content, form, "history turn");
            assert_eq!(
                rendered[3].content,
                format!("{form} {form} {form}"),
                "{form}"
            );
        }
        // `~` is YAML's null, as `null` is JSON's: no value, not the text "~".
        let last = bench.cases.last().unwrap();
        assert_eq!(last.vars["v"], Value::Null);
        assert_eq!(last.expected, vec!["~"]);
        let lookup = &bench.tools[0];
        assert_eq!(lookup.default, Some(Value::String("NO".into())));
        assert_eq!(
            lookup.parameters["properties"]["a"]["enum"],
            serde_json::json!(["NO", "yes", "on", "off"])
        );
        assert_eq!(bench.tools[1].default, Some(Value::String("1e3".into())));
    }

    /// A number a template computes with stays a number, as in JSON; only what would read
    /// back differently is kept as text.
    #[test]
    fn yaml_numbers_that_read_back_the_same_stay_numbers() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("bench.yaml"),
            "name: t\ncases: c.yaml\nvariants: [p.txt]\ngrade: { kind: number, tolerance: 1e-3 }\n",
        )
        .unwrap();
        fs::write(
            dir.path().join("c.yaml"),
            "- { id: a, vars: { n: 10, x: 2.5, b: true }, expected: 011 }\n",
        )
        .unwrap();
        fs::write(
            dir.path().join("p.txt"),
            "{{ n + 1 }} {{ x * 2 }} {% if b %}yes{% endif %}",
        )
        .unwrap();
        let bench = Bench::load(&dir.path().join("bench.yaml")).unwrap();
        let case = &bench.cases[0];
        assert_eq!(case.expected, vec!["011"]);
        let rendered = bench.templates.render(0, case, &bench.variants[0]).unwrap();
        assert_eq!(rendered[0].content, "11 5.0 yes");
    }
}
