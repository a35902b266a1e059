//! The command line as clap defines it: the flags as plain data, their value parsers and
//! small methods that turn flags into plain values. Nothing here reads the environment or
//! a file: the app's settings (`src/app/settings/`) resolve the flags with the
//! environment, the bench and its endpoints, once.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use promptgauge_report::gates::{Gates, MinAccuracy};
use promptgauge_suite::Shard;

const ABOUT: &str = "Measure prompt variants on cases with known answers: accuracy with confidence \
intervals, tokens, cost and latency, through a client that survives real providers.";

const AFTER_HELP: &str = "\
Examples:
  promptgauge run                      run ./promptgauge.yaml (the simulator answers if no URL is set)
  promptgauge run bench.yaml --base-url http://127.0.0.1:8000/v1 --model qwen2.5-7b
  promptgauge check bench.yaml         validate files and print the plan; sends nothing
  promptgauge compare reports/A reports/B   the same cases on two models, paired by case
  promptgauge run --fail-if-worse --min-accuracy 0.9 --junit junit.xml   a CI gate
  promptgauge run --shard 2/4 && promptgauge merge reports/*              fan out, then combine
  promptgauge mock --port 8000 --rate-429 0.1 --cut 0.05
  promptgauge history --since 30d      every recorded run of the bench, steps marked
  promptgauge run --baseline latest:main --fail-if-worse   gate against main's newest run

Base URL precedence: --base-url, $PROMPTGAUGE_BASE_URL, the bench's endpoint.base_url,
$OPENAI_BASE_URL, $LLM_BASE_URL; with none set, the built-in simulator answers (and says so).
The API key is read from the variable the bench names in endpoint.api_key_env
(default $OPENAI_API_KEY, then $LLM_API_KEY).

Exit codes: 0 ok, 1 a CI gate failed, 2 bad input (nothing sent), 3 run incomplete,
4 stopped by the provider (401/403/402), 5 a CI gate inconclusive (the data cannot tell
at this size; --on-inconclusive pass makes it 0), 130 interrupted.";

/// The command line, as parsed.
#[derive(Debug, Parser)]
#[command(name = "promptgauge", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a small working bench (bench, ten cases, two variants, every key commented)
    /// that runs at once on the built-in simulator.
    Init(InitArgs),
    /// Turn another tool's config into a bench: `import promptfoo promptfooconfig.yaml`, or
    /// an OpenAI Evals export: `import openai-evals eval.json --run run.json`.
    Import(ImportArgs),
    /// Turn another tool's per-sample results into a run folder, so `compare`, `history`,
    /// the gates, the reports and the store work on them: inspect_ai eval logs (.eval,
    /// .json), lm-evaluation-harness `--log_samples` files, promptfoo's `--output
    /// results.json`. Each file given is a variant, paired with the others by case.
    #[command(name = "import-results")]
    ImportResults(ImportResultsArgs),
    /// Run every variant of a bench over its cases and report accuracy, cost and latency.
    Run(RunArgs),
    /// Validate the bench, its cases and prompts, and print the plan; no network calls.
    Check(CheckArgs),
    /// How many cases a bench needs to detect a difference worth knowing, or what its
    /// cases can detect: the power of the test and Holm family the reports use.
    Plan(PowerArgs),
    /// Compare two runs over the same cases (e.g. a commercial and a self-hosted model),
    /// variant by variant, paired by case.
    Compare(CompareArgs),
    /// Combine the run folders of `run --shard i/n` into one run.
    Merge(MergeArgs),
    /// Rebuild a run folder's reports (report.html, summary.*) from its journal.
    Report(ReportArgs),
    /// Score a sample of judged answers yourself (or import scores), to see how far to
    /// trust the judge: the reports then compare it with you and correct the scores.
    Label(LabelArgs),
    /// Serve the simulated OpenAI-compatible provider, with misbehaviour on demand.
    Mock(MockArgs),
    /// Runs of a bench over time, per variant, from the history store: each step whose
    /// change from the run before is significant (paired by case, as `compare`) is marked.
    History(HistoryArgs),
    /// List the runs the history store holds.
    Runs(RunsArgs),
    /// (Re)build the history store from run folders: each DIR is a run folder or a folder
    /// of them (such as reports/).
    Index(IndexArgs),
    /// Serve every recorded run in the browser: the runs, newest first and filterable; a
    /// run's report, answers and jobs; runs in progress, live; two runs compared; a
    /// bench's history; labelling (docs/guide/view.md). Listens on 127.0.0.1 only, unless
    /// --public. With --bundle, writes the pages as static files instead.
    View(ViewArgs),
    /// Print the JSON Schema of a bench file (such as promptgauge.yaml), a case, a prompt
    /// variant or an `endpoints:` list, for editors to check and complete them
    /// (docs/guide/files.md); with --out, write every one into a folder.
    Schema(SchemaArgs),
    /// Print the completion script for a shell, built from the same definitions as --help:
    /// `source <(promptgauge completions bash)` (docs/guide/install.md).
    Completions(CompletionsArgs),
    /// Print the manual page (roff), built from the same definitions as --help; with
    /// --out, write one page per command into a folder (docs/guide/install.md).
    Man(ManArgs),
}

/// `schema [WHICH]`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which file's schema to print.
    #[arg(required_unless_present = "out")]
    pub which: Option<SchemaWhich>,
    /// Write every schema into DIR (created if missing) as docs/schema/ holds them.
    #[arg(long, value_name = "DIR", conflicts_with = "which")]
    pub out: Option<PathBuf>,
}

/// Which file's schema `schema` prints: the suite's [`SchemaOf`](promptgauge_suite::schema::SchemaOf)
/// as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaWhich {
    /// a bench file, such as promptgauge.yaml (also: config)
    #[value(alias = "config")]
    Bench,
    /// a case (a .jsonl line) or a .yaml case file
    Case,
    /// a .yaml prompt file
    Variant,
    /// a bench's `endpoints:` list
    Endpoints,
}

impl SchemaWhich {
    /// The schema it names.
    pub fn of(self) -> promptgauge_suite::schema::SchemaOf {
        use promptgauge_suite::schema::SchemaOf;
        match self {
            SchemaWhich::Bench => SchemaOf::Bench,
            SchemaWhich::Case => SchemaOf::Case,
            SchemaWhich::Variant => SchemaOf::Variant,
            SchemaWhich::Endpoints => SchemaOf::Endpoints,
        }
    }
}

/// `completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell whose script to print.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write promptgauge.1 and promptgauge-COMMAND.1 for each command into DIR (created
    /// if missing) instead of printing promptgauge.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    #[arg(long, help = STORE_HELP, value_name = "URL")]
    pub store: Option<String>,
    /// The folder of run folders: runs the store records by a relative path are found
    /// there, and runs in progress are looked for there.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub reports: PathBuf,
    /// The port to listen on (0: any free one).
    #[arg(long, default_value_t = 8741, value_name = "N")]
    pub port: u16,
    /// The address to listen on; another than loopback needs --public.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Serve on an address other than loopback. It needs HTTPS (--tls-cert and --tls-key)
    /// or --insecure-http, and every request the random access token.
    #[arg(long)]
    pub public: bool,
    /// Serve without the access token every request otherwise carries (in the URL printed
    /// at start, then a cookie): any user of this machine can then read every run and
    /// write labels. Loopback only.
    #[arg(long, conflicts_with = "public")]
    pub no_token: bool,
    /// Serve HTTPS with this certificate chain (a PEM file); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (a PEM file).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --public and no certificate: serve plain HTTP anyway. The token and every page
    /// then travel in clear; use it only on a network you trust.
    #[arg(long, requires = "public", conflicts_with = "tls_cert")]
    pub insecure_http: bool,
    /// Open the pages in the default browser ($BROWSER, else the system's opener), through
    /// a file only you can read that holds a one-time link: the access token is never on
    /// the browser's command line.
    #[arg(long)]
    pub open: bool,
    /// Write the pages as static files into DIR instead of serving them (the runs list,
    /// each run's report, answers and jobs, each bench's history), to publish as a CI
    /// artifact or on any static host.
    #[arg(long, value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    /// With --bundle: this run (by id; repeat for more) [default: the newest 20].
    #[arg(long = "run", value_name = "RUN_ID", requires = "bundle")]
    pub runs: Vec<String>,
}

const STORE_HELP: &str = "The history store: a SQLite file or a postgres:// URL [default: \
$PROMPTGAUGE_STORE, else promptgauge.db in the folder of run folders, reports/promptgauge.db]";

/// Which runs `history` and `runs` show.
#[derive(Debug, Clone, Args, Default)]
pub struct RunFilterArgs {
    /// Only runs started since a date (2026-11-01) or for a while (30d, 2weeks).
    #[arg(long, value_name = "DATE|DURATION")]
    pub since: Option<String>,
    /// Only runs started on this git branch (from the checkout, or CI's variables).
    #[arg(long)]
    pub branch: Option<String>,
    /// Only runs of this model.
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, help = STORE_HELP, value_name = "URL")]
    pub store: Option<String>,
}

/// `history [BENCH]`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The bench's name [default: the only bench in the store].
    pub bench: Option<String>,
    #[command(flatten)]
    pub filter: RunFilterArgs,
    /// Print JSON (promptgauge.history/1) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where to write history.html [default: history.html beside a SQLite store, else
    /// reports/history.html; with --part NAME, history-part-NAME.html there].
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Include incomplete runs (interrupted, stopped, with failed jobs); they are never
    /// compared with.
    #[arg(long)]
    pub all: bool,
    /// Show one named part of the score over time instead of the whole score: a `fields`
    /// key (`category`), a scorer of `all`/`any`/`mean` (its `name:`, else its kind), a
    /// judge's criterion. Each run's mean of that part per variant, with its interval;
    /// without --part, `history` lists the parts its runs have.
    #[arg(long, value_name = "NAME")]
    pub part: Option<String>,
}

/// `runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs of this bench.
    pub bench: Option<String>,
    #[command(flatten)]
    pub filter: RunFilterArgs,
    /// The newest N.
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Print JSON lines, one run each, instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `index DIR…`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Run folders, or folders of run folders.
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// The store to (re)build [default: $PROMPTGAUGE_STORE, else promptgauge.db in the
    /// first DIR's folder of run folders].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// Where a run is recorded (`run`, `merge`).
#[derive(Debug, Clone, Args, Default)]
pub struct StoreArgs {
    #[arg(long, help = STORE_HELP, value_name = "URL")]
    pub store: Option<String>,
    /// Do not record this run in the history store.
    #[arg(long, conflicts_with = "store")]
    pub no_store: bool,
}

/// `import promptfoo CONFIG` or `import openai-evals EVAL.json --run RUN.json`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The tool the config is for.
    #[arg(value_enum)]
    pub from: ImportFrom,
    /// Its config file: promptfooconfig.yaml, or the OpenAI eval's JSON (as `GET
    /// /v1/evals/ID` returned it, or as it was created).
    pub config: PathBuf,
    /// openai-evals: a run of the eval, as exported (`GET …/runs/ID`, or the body it was
    /// created with): its data source holds the prompt template, the model and its
    /// sampling parameters. Repeat it for several runs: each is a variant.
    #[arg(long = "run", value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// openai-evals: the items, one JSON object per line (`{"item": {…}}`, as uploaded)
    /// [default: those the run holds inline].
    #[arg(long, value_name = "ITEMS.jsonl")]
    pub items: Option<PathBuf>,
    /// Where to write the bench (nothing is overwritten).
    #[arg(long, default_value = "imported", value_name = "DIR")]
    pub out: PathBuf,
    /// Also read files the config names outside its own folder (`file://../x.txt`,
    /// `file:///abs/path`). Without it they are refused: a config from elsewhere could
    /// otherwise copy any file you can read into the bench it writes.
    #[arg(long)]
    pub allow_outside_files: bool,
}

/// `import-results FORMAT FILE…`.
#[derive(Debug, Args)]
pub struct ImportResultsArgs {
    /// The tool that wrote the files.
    #[arg(value_enum)]
    pub format: ResultsFormat,
    /// Its result files: inspect_ai logs (one per variant), lm-eval `samples_TASK_DATE.jsonl`
    /// files (one per model; the `results_DATE.json` beside each is read too), or
    /// promptfoo results.json files (each prompt × provider column a variant).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Name the variants, in the order the files (or a promptfoo file's columns) give them
    /// [default: the model, or what tells the files apart].
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub variants: Vec<String>,
    /// The score to take when a sample has several: an inspect_ai scorer (or a key of a
    /// scorer's dict), an lm-eval metric (`acc`, `acc_norm`, `exact_match`), promptfoo's
    /// `success`, `score` (its fractional one) or a named score [default: inspect's
    /// headline scorer, the line's first metric, promptfoo's `success`].
    #[arg(long, value_name = "NAME")]
    pub score: Option<String>,
    /// lm-eval: the filter whose lines to take (`strict-match`, `flexible-extract`)
    /// [default: the first in the file].
    #[arg(long, value_name = "NAME")]
    pub filter: Option<String>,
    /// Root folder for the run folder.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Print only the variants' table, the verdicts and the gates' lines.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub gates: GateArgs,
    #[command(flatten)]
    pub outputs: OutputArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Tools whose results `import-results` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultsFormat {
    /// inspect_ai eval logs: `.eval` archives or `.json` logs.
    Inspect,
    /// lm-evaluation-harness `--log_samples` output.
    #[value(name = "lm-eval")]
    LmEval,
    /// promptfoo `eval --output results.json`.
    Promptfoo,
}

/// Tools `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFrom {
    Promptfoo,
    /// An OpenAI Evals export: the eval (its data source and testing criteria), with the
    /// run(s) that hold the prompt (--run) and the items (--items, or the run's own).
    #[value(name = "openai-evals")]
    OpenaiEvals,
}

/// `init [DIR]`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to write the bench (created if missing; nothing is overwritten).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// What the answers look like: an option letter, a number, a JSON object (scored field by
    /// field), free text (scored by a model as judge), a count of the shapes in an image
    /// (vision: ten generated PNGs, and a variant that leaves them out), or an agent that
    /// calls two tools before it answers (agent: the tools scripted per case).
    #[arg(long, value_enum, default_value = "choice")]
    pub task: Task,
}

/// `init --task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Task {
    Choice,
    Number,
    Json,
    Free,
    Vision,
    Agent,
}

impl Task {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Task::Choice => "multiple-choice",
            Task::Number => "numeric",
            Task::Json => "JSON extraction",
            Task::Free => "free-text (judged)",
            Task::Vision => "vision (images)",
            Task::Agent => "agent (tools)",
        }
    }
}

/// `plan [BENCH]`.
#[derive(Debug, Args)]
pub struct PowerArgs {
    /// The bench file, or a folder holding promptgauge.yaml [default: promptgauge.yaml].
    pub bench: Option<PathBuf>,
    /// The smallest difference worth detecting, in points (10 = ten percentage points):
    /// print the cases it takes [default: a table for 5, 10, 15 and 20 points].
    #[arg(long, value_name = "POINTS", value_parser = parse_points)]
    pub detect: Option<f64>,
    /// A number of cases: print the smallest difference they detect [default: the
    /// bench's cases].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub cases: Option<u64>,
    /// The baseline's expected accuracy, 0 to 1 [default: the baseline's accuracy in the
    /// newest run of this bench under reports/, else 0.5, which needs the most cases].
    #[arg(long, value_name = "P", value_parser = parse_unit)]
    pub baseline_accuracy: Option<f64>,
    /// The chance of detecting a real difference of that size.
    #[arg(long, default_value_t = 0.8, value_parser = parse_unit)]
    pub power: f64,
    /// Variants compared with the baseline (Holm's family) [default: the bench's variants
    /// less the baseline].
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub comparisons: Option<u64>,
    /// Correlation (phi) of the variants' right and wrong answers: 0 assumes independent
    /// errors; variants that fail on the same cases (0.3 is common) need fewer cases.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub correlation: f64,
    /// Size `run --best` over K arms instead: the jobs a search takes (seeded simulations of
    /// it at the baseline accuracy, the best `--detect` points ahead of the others — 10 by
    /// default), against the fixed design with the same guarantee (docs/guide/best.md).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(2..=64))]
    pub best: Option<u64>,
    /// With --best: how close to the best counts as the best, in points [default: the
    /// bench's `epsilon:`, else 2].
    #[arg(long, value_name = "POINTS", allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// The gates a run would check, each sized: the cases it needs to decide, from the
    /// newest run of the bench under reports/.
    #[command(flatten)]
    pub gates: GateArgs,
}

fn parse_points(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches("points").trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p),
        _ => Err(format!(
            "`{text}` is not a difference in points: write a number between 0 and 100, such as 10"
        )),
    }
}

/// A budget in USD: a number above 0, with or without a `$`.
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "`{text}` is not an amount in USD: write a number above 0, such as 5 or 0.50"
        )),
    }
}

fn parse_unit(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!(
            "`{text}` must be a number between 0 and 1, such as 0.8"
        )),
    }
}

/// `label RUN_DIR`.
#[derive(Debug, Args)]
pub struct LabelArgs {
    /// The run folder.
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub run: PathBuf,
    /// How many judged answers to show (drawn at random, without the judge's verdict;
    /// answers already labelled are skipped).
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub sample: usize,
    /// Seed of the draw: the same seed shows the same answers.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Import labels instead: JSON lines {"case", "variant", "repeat", "score"}.
    #[arg(long, value_name = "FILE", conflicts_with = "sample")]
    pub from: Option<PathBuf>,
}

/// `report DIR`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run folder.
    pub run: PathBuf,
    /// Also write one CSV row per job (as `run --jobs-csv`), from the journal.
    #[arg(long, value_name = "FILE")]
    pub jobs_csv: Option<PathBuf>,
}

/// `merge DIR…`.
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shard run folders.
    #[arg(required = true, num_args = 1.., value_hint = clap::ValueHint::DirPath)]
    pub runs: Vec<PathBuf>,
    /// Root folder for the merged run folder [default: the first shard's parent].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print only the variants' table, the verdicts and the gates' lines.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub gates: GateArgs,
    #[command(flatten)]
    pub outputs: OutputArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `compare RUN_A RUN_B`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The reference run (A): a run folder, a run id, `latest` or `latest:BRANCH` (from
    /// the history store).
    pub run_a: String,
    /// The run compared with it (B), named the same ways.
    pub run_b: String,
    /// The bench `latest` means, when the store holds several.
    #[arg(long)]
    pub bench: Option<String>,
    #[arg(long, help = STORE_HELP, value_name = "URL")]
    pub store: Option<String>,
    /// Where to write compare.json, compare.md, compare.html and compare.csv [default: a new
    /// folder beside RUN_A].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The confidence level of the comparison (e.g. 0.95) [default: the runs' own; needed
    /// when they differ].
    #[arg(long, value_name = "LEVEL", value_parser = parse_confidence)]
    pub confidence: Option<f64>,
}

fn parse_confidence(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "`{text}` is not a confidence level: write a number between 0 and 1, such as 0.95"
        )),
    }
}

/// `--shard`: a shard given, or `auto`: numbered by the scheduler that started the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    Given(Shard),
    /// `auto`, or `auto/N` when the scheduler gives the index but not the count.
    Auto(Option<u32>),
}

impl std::str::FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().strip_prefix("auto") {
            Some("") => Ok(ShardSpec::Auto(None)),
            Some(rest) => match rest.strip_prefix('/').map(|n| n.trim().parse::<u32>()) {
                Some(Ok(n)) if n > 0 => Ok(ShardSpec::Auto(Some(n))),
                _ => Err(format!(
                    "`{s}` is not a shard; write i/n (2/4), auto, or auto/n (n ≥ 1: how many shards)"
                )),
            },
            None => s.parse().map(ShardSpec::Given),
        }
    }
}

/// Flags over the client's limits (the bench's `limits:`, and each endpoint's): a new one
/// is its field here and its line in [`LimitArgs::apply`] (docs/dev/architecture.md,
/// "Where the next capabilities land").
#[derive(Debug, Args, Clone)]
pub struct LimitArgs {
    /// Requests in flight at once, per replica (overrides limits.concurrency).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: Option<u32>,
}

impl LimitArgs {
    /// What the flags say, over `limits`.
    pub(crate) fn apply(&self, limits: &mut promptgauge_client::Limits) {
        if let Some(c) = self.concurrency {
            limits.concurrency = c as usize;
        }
    }
}

/// Flags that shape the plan; shared by `run` and `check`.
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// The bench file, or a folder holding promptgauge.yaml [default: promptgauge.yaml; with
    /// --resume, the run's own bench].
    pub bench: Option<PathBuf>,
    /// OpenAI-compatible base URL ending in /v1; repeat it for replicas of one model;
    /// `mock` selects the built-in simulator.
    #[arg(long, value_name = "URL")]
    pub base_url: Vec<String>,
    /// Model name sent in each request (overrides endpoint.model).
    #[arg(long)]
    pub model: Option<String>,
    /// The wire protocol the endpoint speaks (overrides endpoint.protocol) [default:
    /// openai-chat: POST …/chat/completions, streamed; or openai-responses: POST
    /// …/responses, OpenAI's Responses API; or anthropic-messages: POST …/messages,
    /// Anthropic's Messages API]. A resume keeps the run's.
    #[arg(long, value_name = "NAME")]
    pub protocol: Option<promptgauge_client::ProtocolKind>,
    /// Run on these of the bench's named `endpoints:`, in this order: the first is the
    /// baseline endpoint [default: every one, and those --endpoint adds]. Each keeps its
    /// own price, parameters, limits and headers; with several, every variant runs at every
    /// endpoint and the reports compare both ways (docs/guide/endpoints.md).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub endpoints: Vec<String>,
    /// Adds an endpoint for this run, e.g. `local=http://127.0.0.1:8000/v1,model=qwen`
    /// (`NAME=URL[,model=M][,key_env=VAR][,protocol=P]`); it takes the bench's
    /// parameters and limits (no price: see --price), and joins the run's endpoints. A name
    /// the bench has moves that endpoint for this run (and unprices it).
    #[arg(long, value_name = "NAME=URL,…")]
    pub endpoint: Vec<promptgauge_suite::endpoints::AdHocEndpoint>,
    /// What the run's endpoint costs, in USD per million prompt and answer tokens: `IN,OUT`
    /// (`IN,OUT,CACHED` with a price for cached prompt tokens), or `0` for a server that
    /// costs nothing; `NAME=IN,OUT` prices one endpoint of
    /// several. A price belongs to its endpoint: one that --base-url, --model or
    /// --endpoint moves elsewhere (or adds) is unpriced without it (docs/guide/endpoints.md).
    #[arg(long = "price", value_name = "[NAME=]IN,OUT")]
    pub prices: Vec<promptgauge_suite::endpoints::PriceFlag>,
    /// Where the judge answers (overrides judge.base_url); `mock` selects the built-in
    /// simulator [default: the run's endpoint]. Pinned here, the judge stays put whatever
    /// --base-url says; a resume keeps the run's judge.
    #[arg(long, value_name = "URL")]
    pub judge_base_url: Option<String>,
    /// The judge's model (overrides judge.model) [default: the model under test, which
    /// then judges its own answers, and the reports say so].
    #[arg(long, value_name = "NAME")]
    pub judge_model: Option<String>,
    /// The variable holding the judge's API key (overrides judge.api_key_env) [default:
    /// the endpoint's when the judge answers there].
    #[arg(long, value_name = "VAR")]
    pub judge_key_env: Option<String>,
    /// The wire protocol of the judge's endpoint (overrides judge.protocol).
    #[arg(long, value_name = "NAME")]
    pub judge_protocol: Option<promptgauge_client::ProtocolKind>,
    /// The client's limits as the flags set them.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Samples per (case, variant) (overrides repeats).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub repeats: Option<u32>,
    /// Use only the first N cases.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Download every URL the cases attach before anything is sent, and send the files'
    /// bytes: their kind, cost and cache key from what they hold (each within the file
    /// limit and 30 s). By default a URL is given to the provider as it is.
    #[arg(long)]
    pub fetch_urls: bool,
    /// Only these variants, by name, comma-separated; the first is the baseline.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub variants: Vec<String>,
    /// Run only shard I of N (cases split by position); combine shards with `merge`.
    /// `auto` (or `auto/N`) takes I (and N) from the scheduler that started the process:
    /// a Kubernetes Indexed Job, a SLURM job array, GitLab's `parallel:`, CircleCI,
    /// Buildkite, an AWS Batch array job.
    #[arg(long = "shard", id = "shard", value_name = "I/N|auto[/N]")]
    pub shard_spec: Option<ShardSpec>,
    /// The shard `--shard` comes to (its `auto` read from the environment): set by the
    /// app's settings (`resolve_shard`) before any command runs.
    #[arg(skip)]
    pub shard: Option<Shard>,
    /// Run cases in a seeded random order and stop each variant as soon as its comparison
    /// with the baseline is decided (better, worse, or no difference of `sequential.detect`
    /// points), and the run when all are: cases not needed are never sent. The verdicts
    /// hold at 1 − confidence however early the run stops.
    #[arg(long, conflicts_with = "shard")]
    pub until_decided: bool,
    /// Find the best of the variants (or, with several endpoints, of the variant ×
    /// endpoint cells): cases in a seeded random order, an arm shown worse than another is
    /// sent no more cases, and the run stops when one arm is left or an arm is shown to be
    /// the best or within --epsilon points of it, with the bench's confidence however early
    /// that comes; when the cases run out, "the best is one of …" (docs/guide/best.md).
    /// With --shard each shard runs a block of the seeded order, and `merge` searches.
    #[arg(long, conflicts_with = "until_decided")]
    pub best: bool,
    /// With --best: how close to the best counts as the best, in points [default: the
    /// bench's `epsilon:`, else 2].
    #[arg(long, value_name = "POINTS", allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// With --best --shard: the merged run of this search's earlier shards (`merge`); the
    /// arms it showed out are not sent (docs/guide/best.md, "In shards").
    #[arg(long, value_name = "MERGED_RUN", requires = "shard", value_hint = clap::ValueHint::DirPath)]
    pub after: Option<PathBuf>,
    /// The arms `--after`'s merge showed out, or a resumed shard's record kept.
    #[arg(skip)]
    pub arms_out: Vec<String>,
    /// Send the jobs through the endpoint's batch API instead of streaming them (OpenAI's
    /// /v1/batches, Anthropic's Message Batches): about half the price, answers within
    /// 24 hours, no latency figures. Every batch is journaled as it is submitted, so a
    /// killed run's --resume adopts its batches and pays for nothing twice; with
    /// --until-decided the cases go out in waves and a decided variant's are never sent
    /// (docs/guide/batch.md). `batch: true` on an endpoint does the same for it alone.
    #[arg(long)]
    pub batch: bool,
    /// Stop sending once what the run spent, and what its requests in flight may still
    /// cost (each at its prompt and its max_tokens, its judge's calls too), would pass USD:
    /// the jobs not sent are "not run" and the run exits incomplete (3) with the resume
    /// command; a resume keeps the budget or takes a new one. A plan whose estimate is over
    /// the budget is refused before anything is sent (see --run-to-budget). Needs `price`
    /// (and the judge's, when a judge scores) (docs/guide/budget.md).
    #[arg(long, value_name = "USD", value_parser = parse_usd, allow_negative_numbers = true)]
    pub budget: Option<f64>,
    /// With a budget: start even when the plan may cost more, and send until the budget
    /// is reached.
    #[arg(long)]
    pub run_to_budget: bool,
    /// The seed of the random order cases are sent in when the run may stop early
    /// (--budget, --until-decided): what it measures is then a random sample of the
    /// bench's cases, not its first ones [default: drawn at random (with --shard, from the
    /// bench, so every shard draws one order), recorded in run.json and the reports; a
    /// resume keeps the run's].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// A resumed run's own sequential plan (its seed and limits).
    #[arg(skip)]
    pub sequential: Option<promptgauge_suite::plan::SequentialPlan>,
    /// A resume: the case order is the run's own (`seed`, or the file's when it had none),
    /// never drawn again: jobs, their keys and their batches' ids are numbered by it.
    #[arg(skip)]
    pub order_kept: bool,
    /// `run --max-drop` (a share), for a new `--until-decided` plan's drop check.
    #[arg(skip)]
    pub max_drop: Option<f64>,
}

/// `check [BENCH]`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Also look at the endpoint and the judge as a run would before its first job: one
    /// `GET …/models` each (nothing that costs), saying whether each answers, accepts its
    /// key and lists its model.
    #[arg(long)]
    pub probe: bool,
    /// The gates a run would check, each sized before anything is sent: the cases it needs
    /// to decide, from the newest run of the bench under reports/.
    #[command(flatten)]
    pub gates: GateArgs,
}

/// `run [BENCH]`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Root folder for run folders.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Continue the run in DIR: send only the jobs its journal lacks, then report on all.
    /// The plan (cases, variants, repeats) is the run's own.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["limit", "variants", "repeats", "out", "shard"])]
    pub resume: Option<PathBuf>,
    /// With --resume: send again the jobs that failed — `transient` (the default: those a
    /// server outage, overload or timeout failed) or `all`. Each failure stays in the
    /// journal as the job's history; the new answer takes its place in the reports.
    #[arg(long, value_enum, value_name = "WHICH", requires = "resume", num_args = 0..=1, default_missing_value = "transient")]
    pub retry_failed: Option<RetryFailed>,
    /// Reuse complete answers from earlier runs with the same endpoint, model, messages,
    /// parameters and repeat (kept in .cache/ under --out); new ones are added.
    #[arg(long)]
    pub cache: bool,
    /// One line per attempt on stderr (no secrets).
    #[arg(long, short)]
    pub verbose: bool,
    /// Print only the variants' table, the verdicts and the gates' lines.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// After the first Ctrl-C or SIGTERM, how long attempts in flight may take to finish
    /// before they are abandoned and the reports written (no new attempt starts, and no
    /// job waits for a retry). Keep it below your scheduler's kill timeout.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = parse_delay)]
    pub grace: Duration,
    #[command(flatten)]
    pub batch: BatchArgs,
    #[command(flatten)]
    pub gates: GateArgs,
    #[command(flatten)]
    pub outputs: OutputArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// How `--batch` waits for the provider's batches (docs/guide/batch.md).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Batches (--batch)")]
pub struct BatchArgs {
    /// The first wait between looks at the batches' state; it doubles while none ends, up
    /// to --batch-poll-max.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_delay)]
    pub batch_poll: Duration,
    /// The longest wait between looks at the batches' state.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_delay)]
    pub batch_poll_max: Duration,
    /// How long to wait for the batches before stopping: they stay with the provider, and
    /// `--resume` collects them later without paying again.
    #[arg(long, value_name = "DURATION", default_value = "26h", value_parser = parse_long_delay)]
    pub batch_wait: Duration,
    /// Requests per batch, at most [default: the provider's limit, 50,000 for OpenAI and
    /// 100,000 for Anthropic; files are split at 200 MB or 256 MB too].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: Option<u64>,
    /// Bytes per batch file, at most (4MiB, 100MB; under the provider's own 200 MB or
    /// 256 MB): for a server with a smaller limit, or to keep files with images small.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub batch_max_bytes: Option<u64>,
    /// On Ctrl-C, SIGTERM or --batch-wait, cancel the batches still running (by default
    /// they are left to run, and `--resume` collects them).
    #[arg(long)]
    pub batch_cancel: bool,
}

impl BatchArgs {
    /// As the runner takes them.
    pub(crate) fn settings(&self) -> promptgauge_runner::batch::BatchSettings {
        promptgauge_runner::batch::BatchSettings {
            poll: self.batch_poll.max(Duration::from_millis(1)),
            poll_max: self.batch_poll_max.max(self.batch_poll),
            wait: self.batch_wait,
            max_requests: self.batch_size.map(|n| n.min(usize::MAX as u64) as usize),
            max_bytes: self
                .batch_max_bytes
                .map(|n| n.min(usize::MAX as u64) as usize),
            cancel_on_stop: self.batch_cancel,
        }
    }
}

/// Files a run (or a merged run) writes besides its folder, for CI and other tools.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Write a JUnit XML report: one test case per case and variant.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Append the Markdown summary to FILE (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write one CSV row per job: case, variant (and endpoint, with several), repeat,
    /// status, score, tokens, cost, latency (for a spreadsheet or another tool's
    /// statistics).
    #[arg(long, value_name = "FILE")]
    pub jobs_csv: Option<PathBuf>,
}

impl OutputArgs {
    /// Every file named, to check before anything is sent that each can be written.
    pub(crate) fn files(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.junit, &self.markdown, &self.jobs_csv]
            .into_iter()
            .flatten()
    }

    /// The files named that are outputs of the run's figures (`report::outputs`), one
    /// line each.
    pub(crate) fn asked(&self) -> promptgauge_report::Asked {
        promptgauge_report::Asked {
            junit: self.junit.clone(),
            markdown: self.markdown.clone(),
            terminal: true,
            quiet: false,
        }
    }
}

/// Which failed jobs `--retry-failed` sends again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RetryFailed {
    /// Jobs whose last attempt met a server down, overloaded or slow: 408, 429, 5xx, no
    /// connection, a cut or stalled stream, no first token.
    Transient,
    /// Every failed job (a 4xx too: after you fixed its cause).
    All,
}

/// What an inconclusive gate does to the run (`--on-inconclusive`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OnInconclusive {
    /// Exit 5: the gate did not pass.
    #[default]
    Fail,
    /// Exit 0 (when no gate failed): the line still says it could not tell.
    Pass,
}

/// CI gates: each ends passed, failed (exit 1) or inconclusive (exit 5), with one line
/// saying why and what it would take to decide (docs/guide/ci.md).
#[derive(Debug, Args, Clone, Default)]
pub struct GateArgs {
    /// Fail when a variant is significantly worse than the baseline (paired test), or, with
    /// --baseline, than itself in that earlier run. A lower point estimate alone never fails.
    #[arg(long)]
    pub fail_if_worse: bool,
    /// With --best: fail when the baseline (the first variant) is not in the answer — not
    /// the best nor within --epsilon of it, or, when the cases ran out, not among the arms
    /// left. "Is what we ship still the best of the candidates?"
    #[arg(long)]
    pub fail_if_not_best: bool,
    /// Fail unless the data show that no variant is more than POINTS worse than the
    /// baseline (or, with --baseline, than itself in that run): the lower end of the
    /// difference's interval must be above −POINTS. Passing needs evidence; too few cases
    /// fail. This is "did my change break it?"; --fail-if-worse only catches clear drops.
    /// With --until-decided a sequential check decides it as the cases come, and each
    /// variant runs until both it and its difference are settled.
    #[arg(long, value_name = "POINTS", value_parser = parse_points)]
    pub max_drop: Option<f64>,
    /// An earlier run over the same cases to compare this run with, variant by variant: a
    /// run folder, a run id, `latest` (the newest finished run of this bench in the
    /// history store) or `latest:BRANCH` (the newest on that git branch, e.g. latest:main).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Fail when accuracy is below P (0.8 or 80%), for every variant or VARIANT=P; with
    /// several endpoints also ENDPOINT/VARIANT=P (one cell) or ENDPOINT=P. A part of the
    /// score (a `fields` key, a scorer's `name:`, a judge's criterion): @PART=P for every
    /// variant's, VARIANT@PART=P for one's. Repeatable.
    #[arg(long, value_name = "[VARIANT][@PART]=P")]
    pub min_accuracy: Vec<MinAccuracy>,
    /// With `repeats: k` (k ≥ 2): fail when pass^k — the share of cases answered right all
    /// k times — is below P, for every variant or VARIANT=P (as --min-accuracy); repeatable.
    #[arg(long, value_name = "[VARIANT=]P")]
    pub min_pass_all: Vec<MinAccuracy>,
    /// Fail when the whole run cost more than USD (needs `price` in the bench).
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Fail when a variant's jobs cost more than USD each, on average (needs `price`).
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    pub max_cost_per_job: Option<f64>,
    /// Fail when any variant's p90 end-to-end latency is above DURATION (e.g. 2s).
    #[arg(long, value_name = "DURATION", value_parser = parse_delay)]
    pub max_p90_latency: Option<Duration>,
    /// Fail when any job's end-to-end latency is above DURATION (e.g. 5s).
    #[arg(long, value_name = "DURATION", value_parser = parse_delay)]
    pub max_latency: Option<Duration>,
    /// Failed jobs tolerated before the run counts as incomplete (exit 3).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub allow_failures: u64,
    /// What a gate the data cannot decide at this size does: `fail` (exit 5) or `pass`
    /// (exit 0 when no gate failed). Its line says so, and how many cases would decide.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = OnInconclusive::Fail)]
    pub on_inconclusive: OnInconclusive,
}

impl GateArgs {
    /// These flags over a bench's `gates:`: each gate the bench sets applies unless its
    /// flag is given (the flag's value wins).
    pub(crate) fn or_bench(&self, bench: &promptgauge_suite::gates::BenchGates) -> GateArgs {
        GateArgs {
            max_cost: self.max_cost.or(bench.max_cost),
            max_cost_per_job: self.max_cost_per_job.or(bench.max_cost_per_job),
            max_p90_latency: self.max_p90_latency.or(bench.max_p90_latency),
            max_latency: self.max_latency.or(bench.max_latency),
            ..self.clone()
        }
    }

    /// The gates these flags ask for.
    pub(crate) fn gates(&self) -> Gates {
        Gates {
            fail_if_worse: self.fail_if_worse,
            fail_if_not_best: self.fail_if_not_best,
            max_drop: self.max_drop.map(|p| p / 100.0),
            min_accuracy: self.min_accuracy.clone(),
            min_pass_all: self.min_pass_all.clone(),
            max_cost_usd: self.max_cost,
            max_cost_per_job_usd: self.max_cost_per_job,
            budget_usd: None,
            max_p90_latency: self.max_p90_latency,
            max_latency: self.max_latency,
            allow_failures: self.allow_failures,
            inconclusive_passes: self.on_inconclusive == OnInconclusive::Pass,
            against_earlier: self.baseline.is_some(),
        }
    }
}

/// Where the simulator puts usage (`mock --usage`).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum UsageArg {
    Separate,
    LastChunk,
    None,
}

/// `mock`: the simulator's settings and misbehaviours.
#[derive(Debug, Args)]
pub struct MockArgs {
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Model name the simulator reports.
    #[arg(long, default_value = "mock-model")]
    pub model: String,
    /// Serve only --model: a request for another model gets 404 (as vLLM and OpenAI do).
    #[arg(long)]
    pub strict_model: bool,
    /// Require `Authorization: Bearer KEY`; other requests get 401.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Requests in flight above this get 429 with Retry-After.
    #[arg(long, value_name = "N")]
    pub capacity: Option<usize>,
    /// Retry-After in whole seconds on 429s.
    #[arg(long, value_name = "SECONDS", default_value_t = 1)]
    pub retry_after: u64,
    /// Send Retry-After as an HTTP date this many seconds ahead instead.
    #[arg(long, value_name = "SECONDS", conflicts_with = "retry_after_ms")]
    pub retry_after_date: Option<u64>,
    /// Send retry-after-ms instead.
    #[arg(long, value_name = "MS")]
    pub retry_after_ms: Option<u64>,
    /// Probability per attempt of a 429.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub rate_429: f64,
    /// Probability per attempt of a 500/502/503.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub rate_5xx: f64,
    /// Probability of accepting the request and never answering.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub hang: f64,
    /// Probability of a TCP reset mid-stream.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub reset: f64,
    /// Probability of a clean end mid-stream without finish_reason.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub cut: f64,
    /// Probability of going silent mid-stream.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub stall: f64,
    /// Probability of an error event mid-stream.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub error_event: f64,
    /// Probability of a failed ending mid-stream (`response.failed` on /v1/responses, an
    /// error chunk on /v1/chat/completions).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub failed: f64,
    /// Probability of ending mid-answer with finish_reason: content_filter (the answer is
    /// withheld: counted apart, never graded).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub content_filter: f64,
    /// Probability of ending mid-answer with finish_reason: abort (vLLM's word for a
    /// dropped request; not a finish, so the job is retried).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub abort: f64,
    /// Probability of HTTP 529 overloaded (Anthropic's answer when busy).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub overloaded: f64,
    /// Probability of breaking the stream right after its finish, before the event that
    /// ends it (`[DONE]`; on /v1/messages, `message_stop`, so the answer is cut).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub cut_before_end: f64,
    /// Faults strike only the first N attempts of each Idempotency-Key.
    #[arg(long, value_name = "N")]
    pub fault_attempts: Option<u32>,
    /// Send `: keep-alive` comments between events.
    #[arg(long)]
    pub keepalive: bool,
    /// End lines with CRLF.
    #[arg(long)]
    pub crlf: bool,
    /// Split writes inside multi-byte UTF-8 characters.
    #[arg(long)]
    pub split_utf8: bool,
    /// Where usage goes in the stream.
    #[arg(long, value_enum, default_value = "separate")]
    pub usage: UsageArg,
    /// Never send `data: [DONE]`.
    #[arg(long)]
    pub no_done: bool,
    /// Answer 400 to requests that carry stream_options.
    #[arg(long)]
    pub reject_stream_options: bool,
    /// Answer 400 to a request carrying an image larger than SIZE (5MiB: Anthropic's
    /// limit), as a provider does.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_image_bytes: Option<u64>,
    /// Play an agent of N steps: a request that offers tools and holds fewer than N tool
    /// results calls the first tool; then the answer comes (docs/guide/tools.md).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub agent_steps: u32,
    /// An agent makes all its calls in its first answer (parallel calls), then answers.
    #[arg(long)]
    pub agent_parallel: bool,
    /// The chance an agent's call names a tool that does not exist.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub agent_wrong_tool: f64,
    /// The chance an agent's call has arguments that are not JSON.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub agent_bad_json: f64,
    /// An agent that never answers: it calls a tool at every turn (the loop's turn limit
    /// ends it).
    #[arg(long)]
    pub agent_endless: bool,
    /// Stream reasoning_content deltas before the answer.
    #[arg(long)]
    pub reasoning: bool,
    /// Delay before the first event.
    #[arg(long, value_parser = parse_delay, default_value = "0ms")]
    pub first_token_delay: Duration,
    /// Delay between events.
    #[arg(long, value_parser = parse_delay, default_value = "0ms")]
    pub token_delay: Duration,
    /// Seed for the fault draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How often the simulated judge gets a verdict wrong (it answers promptgauge's
    /// reference-guided judge prompts).
    #[arg(long, default_value_t = 0.1, value_name = "P")]
    pub judge_error: f64,
    /// An outage: every request after the first N gets 503 (until the simulator restarts).
    #[arg(long, value_name = "N")]
    pub outage_after: Option<u64>,
    /// The batch API (`/v1/files`, `/v1/batches`): how long a batch takes to complete.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_delay)]
    pub batch_delay: Duration,
    /// The batch API: batches expire with half their requests answered.
    #[arg(long)]
    pub batch_expires: bool,
    /// No batch API: its paths answer 404, as a self-hosted server's do.
    #[arg(long)]
    pub no_batch_api: bool,
    /// The batch API: a batch is created but the answer to its creation is a 502, as when a
    /// proxy loses it (the client must find the batch, not create it twice).
    #[arg(long)]
    pub batch_lose_create: bool,
    /// The batch API: the answer to creating a batch comes this long after the batch was
    /// created (kill a client meanwhile, and it never learns the batch's id).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_delay)]
    pub batch_create_delay: Duration,
    /// The batch API: each batch's results give its first request twice, as a provider
    /// that duplicated a line would (the job must fail, neither answer scored).
    #[arg(long)]
    pub batch_duplicate: bool,
    /// Refuse every prompt holding WORD, in each wire's own way (chat completions'
    /// `refusal` field, a Responses refusal part, Anthropic's `stop_reason: refusal`).
    #[arg(long, value_name = "WORD")]
    pub refuse_on: Option<String>,
    /// Report N output tokens for every answer, whatever `max_tokens` allowed (a provider
    /// whose accounting went wrong: the run flags it, and a budget says what it cost).
    #[arg(long, value_name = "N")]
    pub report_output_tokens: Option<u64>,
    /// Bill each PDF given by URL as N pages (3,000 prompt tokens a page): a provider that
    /// read a document the run could not size before sending it.
    #[arg(long, value_name = "N")]
    pub url_document_pages: Option<u64>,
}

/// A long wait (a batch's): at most a week.
fn parse_long_delay(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); e.g. 26h"))?;
    if d > Duration::from_secs(7 * 24 * 3600) {
        return Err(format!("`{s}` is longer than a week; e.g. 26h"));
    }
    Ok(d)
}

/// A size flag: `4MiB`, `512KiB`, `100MB` or a bare number of bytes, more than 0.
fn parse_size(s: &str) -> Result<u64, String> {
    match promptgauge_client::limits::parse_bytes(s) {
        Ok(0) => Err("a size must be more than 0 bytes; e.g. 100MB".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A duration flag: zero allowed, at most a day (longer is a typo, and overflows clocks).
fn parse_delay(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); e.g. 50ms"))?;
    if d > promptgauge_suite::MAX_DURATION {
        return Err(format!("`{s}` is longer than a day; e.g. 50ms, 30s or 2m"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_parses() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "promptgauge",
            "run",
            "b.yaml",
            "--variants",
            "a,b",
            "--limit",
            "20",
        ])
        .unwrap();
        let Command::Run(r) = cli.command else {
            panic!("run")
        };
        assert_eq!(r.plan.variants, vec!["a", "b"]);
        assert!(Cli::try_parse_from(["promptgauge", "run", "--concurrency", "0"]).is_err());
    }
}
