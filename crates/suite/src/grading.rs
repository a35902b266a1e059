//! How a bench or case file says its answers are scored: the `grade:` spec, as written. The
//! scorers it describes are built by the grade crate (promptgauge-grade).

use serde::{Deserialize, Serialize};

/// The variables every `command` scorer's processes see, when they are set: nothing else
/// of promptgauge's environment (an API key, a token) reaches them unless the bench names
/// it under the scorer's `env:`.
pub const PASSED_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// A scorer as written in a bench or case file (the kinds docs/guide/scorers.md lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "Grade")]
pub enum GradeSpec {
    /// The trimmed answer equals an expected value.
    Exact {
        #[serde(default)]
        case_sensitive: bool,
    },
    /// The answer contains an expected value.
    Contains {
        #[serde(default)]
        case_sensitive: bool,
    },
    /// The pattern matches; with a capture group, the capture equals an expected value.
    Regex {
        /// A regular expression: `"Answer: (\\w+)"`.
        pattern: String,
        #[serde(default)]
        case_sensitive: bool,
    },
    /// The last number in the answer is within `tolerance` of the expected one.
    Number {
        #[serde(default)]
        #[schemars(range(min = 0))]
        tolerance: f64,
    },
    /// The chosen option letter ("Answer: B", a lone "B", "(B)") is the expected one.
    Choice,
    /// The value at `path` of the answer parsed as JSON is expected.
    Json {
        /// Where in the answer's JSON: `result.items[0].name`.
        path: String,
        #[serde(default)]
        case_sensitive: bool,
    },
    /// A model decides whether the answer matches the known answer (or scores it 0–10).
    Judge {
        /// Criteria added to the built-in prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rubric: Option<String>,
        /// Named criteria, each judged on its own (a call each, after `rubric`): each is a
        /// part with its own figures; the answer passes when it meets every one (a 0–10
        /// judge: their mean).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        criteria: Vec<Criterion>,
        #[serde(default)]
        scale: Scale,
        /// Ask this many times: the majority (binary) or the mean (0–10) counts.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        #[schemars(range(min = 1, max = 15))]
        votes: u32,
        /// A template file replacing the built-in prompt (relative to the bench).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        /// The judge answers with one of these labels (its `prompt` asks for one)...
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        labels: Vec<String>,
        /// ...and the answer passes when it is one of these.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        passing_labels: Vec<String>,
        /// The judge answers with a number in this range (its `prompt` asks for one)...
        #[serde(default, skip_serializing_if = "Option::is_none")]
        range: Option<[f64; 2]>,
        /// ...and the answer passes at this number or more (default: the range's top).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pass_threshold: Option<f64>,
    },
    /// The answer is JSON that validates against a schema (a file, or inline).
    JsonSchema { schema: serde_json::Value },
    /// The share of `expected`'s fields the answer's JSON gets right.
    Fields {
        /// Fields that zero the score when wrong.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        required: Vec<String>,
        #[serde(default)]
        case_sensitive: bool,
        #[serde(default)]
        #[schemars(range(min = 0))]
        tolerance: f64,
    },
    /// The tool calls the model made, against `expected`'s `{name, arguments}`.
    ToolCall {
        /// Arguments must equal the expected ones (else they need only contain them).
        #[serde(default)]
        exact: bool,
        #[serde(default)]
        order: CallOrder,
    },
    /// The tools an agent loop called (docs/guide/tools.md): `tools` in order
    /// (`in_order`: as a subsequence of the calls), exactly those in any order
    /// (`any_order`), or among the calls (`subset`).
    ToolSequence {
        tools: Vec<String>,
        #[serde(default)]
        order: SequenceOrder,
    },
    /// A call of `tool` whose arguments hold `args` (its fields with their values; others
    /// may be there too) was made in the loop.
    ToolArgs {
        tool: String,
        args: serde_json::Value,
    },
    /// The loop made at most `steps` tool calls.
    MaxSteps { steps: u32 },
    /// A program of yours scores each answer: a small pool of long-lived processes, one
    /// JSON request per line in, one JSON reply per line out (docs/guide/scorers.md).
    Command {
        /// The program and its arguments, run in the bench's folder: `[python3, score.py]`.
        run: Vec<String>,
        /// Variables of promptgauge's environment it sees beside PATH, HOME, LANG and
        /// TMPDIR: no other (an API key, a token) reaches it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
        /// Processes at most, each scoring one answer at a time.
        #[serde(default = "four", skip_serializing_if = "is_four")]
        workers: u32,
        /// How long one reply may take (`30s`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<String>,
        /// Its scores are 0 or 1 (a pass or a fail): any other is an error, and the
        /// statistics are those of pass/fail answers.
        #[serde(default)]
        binary: bool,
    },
    /// The answer passes when its embedding's cosine similarity to an expected answer's
    /// reaches `threshold`, through an OpenAI-compatible `/v1/embeddings`.
    Embedding {
        threshold: f64,
        /// One of the run's endpoints (`endpoints:`) [default: the run's endpoint, or its
        /// first].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// The embedding model [default: the endpoint's model].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// An expression over the answer (`output`; `raw` before the variant's `extract:`), its
    /// JSON (`json`), `expected` and the case's `vars`, evaluated in-process: true/false, or
    /// a score in [0, 1]
    /// (docs/guide/scorers.md, "Inline checks").
    Expr {
        /// `"'refund' in output|lower and output|length < 400"`.
        expr: String,
    },
    /// Every part passes (the lowest score).
    All { of: Vec<GradePart> },
    /// One part passes (the highest score).
    Any { of: Vec<GradePart> },
    /// The weighted mean of the parts' scores.
    Mean {
        of: Vec<GradePart>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weights: Option<Vec<f64>>,
    },
}

/// One scorer of an `all`, `any` or `mean`, with the name its figures go by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradePart {
    /// The part's name in reports and gates [default: its kind, numbered when two parts
    /// share one].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub spec: GradeSpec,
    /// The name it goes by without a `name:`, given over the whole bench when it is loaded
    /// ([`name_parts`]): one name, one check. Not written anywhere (not in a case's hash).
    #[serde(skip)]
    pub default_name: Option<String>,
}

/// A part's schema is a scorer's with `name` beside its `kind`: each kind keeps
/// `additionalProperties: false`, which a flattened schema would lose (an editor would
/// then accept `tolerence:` inside a part, which the loader refuses).
impl schemars::JsonSchema for GradePart {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GradePart".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = GradeSpec::json_schema(generator);
        let name = serde_json::json!({
            "description": "The part's name in the reports and the gates [default: its kind, numbered from the second of a kind: `tool_args 2`]. No `=`, `,` or control character, no space at an end.",
            "type": "string",
            "pattern": "^[^\\s=,]([^=,\\u0000-\\u001f]*[^\\s=,])?$"
        });
        if let Some(kinds) = schema.get_mut("oneOf").and_then(|k| k.as_array_mut()) {
            for kind in kinds {
                if let Some(properties) = kind.get_mut("properties").and_then(|p| p.as_object_mut())
                {
                    properties.insert("name".into(), name.clone());
                }
            }
        }
        schema.insert(
            "description".into(),
            "One scorer of an `all`, `any` or `mean`, with the name its figures go by.".into(),
        );
        schema
    }
}

impl std::ops::Deref for GradePart {
    type Target = GradeSpec;

    fn deref(&self) -> &GradeSpec {
        &self.spec
    }
}

impl From<GradeSpec> for GradePart {
    fn from(spec: GradeSpec) -> GradePart {
        GradePart {
            name: None,
            spec,
            default_name: None,
        }
    }
}

/// The parts an `all`, `any` or `mean` is made of (none for another kind).
fn parts_of(spec: &mut GradeSpec) -> &mut [GradePart] {
    match spec {
        GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => of,
        GradeSpec::Exact { .. }
        | GradeSpec::Contains { .. }
        | GradeSpec::Regex { .. }
        | GradeSpec::Number { .. }
        | GradeSpec::Choice
        | GradeSpec::Json { .. }
        | GradeSpec::Judge { .. }
        | GradeSpec::JsonSchema { .. }
        | GradeSpec::Fields { .. }
        | GradeSpec::ToolCall { .. }
        | GradeSpec::ToolSequence { .. }
        | GradeSpec::ToolArgs { .. }
        | GradeSpec::MaxSteps { .. }
        | GradeSpec::Command { .. }
        | GradeSpec::Embedding { .. }
        | GradeSpec::Expr { .. } => &mut [],
    }
}

/// Names each unnamed part of the `all`/`any`/`mean`s among a bench's grades (its own
/// first, then each case's, in order) so that across the bench one name is one check: its
/// kind, numbered from the second distinct check of that kind (`expr`, `expr 2`), the same
/// check (the same spec, in the same place among its like in its `of`) always the same
/// name, and never a name some part is given (docs/guide/scorers.md, "Parts"). A bench
/// whose cases share one grade keeps the names its `of` alone would give; cases with
/// grades of their own (an imported promptfoo config's asserts) no longer pool different
/// checks under one name.
pub(crate) fn name_parts<'a>(grades: impl Iterator<Item = &'a mut GradeSpec>) {
    let mut grades: Vec<&mut GradeSpec> = grades.collect();
    let mut taken: std::collections::HashSet<String> = grades
        .iter_mut()
        .flat_map(|g| parts_of(g).iter().filter_map(|p| p.name.clone()))
        .collect();
    let mut named: std::collections::HashMap<(String, usize), String> = Default::default();
    for grade in &mut grades {
        let of = parts_of(grade);
        let mut seen: Vec<String> = Vec::with_capacity(of.len());
        for part in of.iter_mut() {
            if part.name.is_some() {
                continue;
            }
            let spec = serde_json::to_string(&part.spec).unwrap_or_default();
            let like = seen.iter().filter(|s| **s == spec).count();
            seen.push(spec.clone());
            let name = named.entry((spec, like)).or_insert_with(|| {
                let kind = part.spec.kind();
                let mut name = kind.clone();
                let mut n = 1;
                while taken.contains(&name) {
                    n += 1;
                    name = format!("{kind} {n}");
                }
                taken.insert(name.clone());
                name
            });
            part.default_name = Some(name.clone());
        }
    }
}

/// One criterion of a judge's `criteria`: judged alone, its figures under `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    pub name: String,
    /// What the answer must do to meet it: `States the refund window.`
    pub rubric: String,
}

/// How `tool_sequence` compares the calls made with its list.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SequenceOrder {
    /// The tools were called in this order (other calls may come between).
    #[default]
    InOrder,
    /// Exactly these calls were made, in any order.
    AnyOrder,
    /// Each of these tools was called.
    Subset,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn four() -> u32 {
    4
}

fn is_four(n: &u32) -> bool {
    *n == 4
}

impl Default for GradeSpec {
    fn default() -> Self {
        GradeSpec::Exact {
            case_sensitive: false,
        }
    }
}

/// What one kind of scorer, apart from its parts, brings to what a bench asks of its grade
/// ([`GradeSpec::own`]): nothing, unless its arm there says so.
#[derive(Default)]
struct Own<'a> {
    /// The tools a trajectory part names, or why it names none.
    tools: Option<Result<Vec<&'a str>, String>>,
    /// The call a `tool_args` part expects.
    call: Option<(String, serde_json::Value)>,
    /// Calls to a judge to score one answer.
    judge_calls: u64,
    /// An `embedding` scorer's `endpoint` and `model`.
    embedding: Option<(Option<String>, Option<String>)>,
    /// Whether it scores the answer's tool calls.
    tool_call: bool,
    /// A `command` scorer's program and the variables it passes on.
    program: Option<(&'a [String], &'a [String])>,
    /// An `expr` scorer's expression.
    expression: Option<&'a str>,
}

impl GradeSpec {
    /// The parts an `all`, `any` or `mean` is made of; none for another kind.
    pub fn parts(&self) -> &[GradePart] {
        match self {
            GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => of,
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }
            | GradeSpec::Judge { .. }
            | GradeSpec::JsonSchema { .. }
            | GradeSpec::Fields { .. }
            | GradeSpec::ToolCall { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::Command { .. }
            | GradeSpec::Embedding { .. }
            | GradeSpec::Expr { .. } => &[],
        }
    }

    /// It and every part within it, depth first, each before its parts.
    fn with_parts(&self) -> Vec<&GradeSpec> {
        let mut all = vec![self];
        for part in self.parts() {
            all.extend(part.spec.with_parts());
        }
        all
    }

    /// What its own kind (not its parts) brings to the questions below: the one match over
    /// the kinds that answers them, so a new kind says here what it brings before it
    /// compiles.
    fn own(&self) -> Own<'_> {
        match self {
            GradeSpec::ToolSequence { tools, .. } => Own {
                tools: Some(if tools.is_empty() {
                    Err("a tool_sequence names no tool (tools: [first, second])".into())
                } else {
                    Ok(tools.iter().map(String::as_str).collect())
                }),
                ..Own::default()
            },
            GradeSpec::ToolArgs { tool, args } => Own {
                tools: Some(Ok(vec![tool.as_str()])),
                call: Some((tool.clone(), super::tools::args_of(args))),
                ..Own::default()
            },
            GradeSpec::Judge {
                votes, criteria, ..
            } => Own {
                judge_calls: u64::from(*votes) * criteria.len().max(1) as u64,
                ..Own::default()
            },
            GradeSpec::Embedding {
                endpoint, model, ..
            } => Own {
                embedding: Some((endpoint.clone(), model.clone())),
                ..Own::default()
            },
            GradeSpec::ToolCall { .. } => Own {
                tool_call: true,
                ..Own::default()
            },
            GradeSpec::Command { run, env, .. } => Own {
                program: Some((run.as_slice(), env.as_slice())),
                ..Own::default()
            },
            GradeSpec::Expr { expr } => Own {
                expression: Some(expr.as_str()),
                ..Own::default()
            },
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }
            | GradeSpec::JsonSchema { .. }
            | GradeSpec::Fields { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::All { .. }
            | GradeSpec::Any { .. }
            | GradeSpec::Mean { .. } => Own::default(),
        }
    }

    /// The tools its trajectory parts name (`tool_sequence`'s, `tool_args`'), with why a
    /// part names none.
    pub fn named_tools(&self) -> Result<Vec<&str>, String> {
        let mut all = Vec::new();
        for spec in self.with_parts() {
            if let Some(tools) = spec.own().tools {
                all.extend(tools?);
            }
        }
        Ok(all)
    }

    /// The calls its `tool_args` parts expect, in order (inside `all`, `any` and `mean`
    /// too): what the simulator's agent calls when a case scripts none of those tools
    /// (a program or an MCP server answers them).
    pub fn expected_calls(&self) -> Vec<(String, serde_json::Value)> {
        self.with_parts()
            .into_iter()
            .filter_map(|s| s.own().call)
            .collect()
    }

    /// How many calls to a judge scoring one answer takes (its votes, over every judged
    /// part; a retried unreadable reply is not counted).
    pub fn judge_calls(&self) -> u64 {
        self.with_parts().iter().map(|s| s.own().judge_calls).sum()
    }

    /// The `embedding` scorers it holds (alone or as parts): their `endpoint` and `model`.
    pub fn embeddings(&self) -> Vec<(Option<String>, Option<String>)> {
        self.with_parts()
            .into_iter()
            .filter_map(|s| s.own().embedding)
            .collect()
    }

    /// Whether it scores the tool calls made (alone or as a part).
    pub(crate) fn uses_tool_call(&self) -> bool {
        self.with_parts().iter().any(|s| s.own().tool_call)
    }

    /// Whether it compares the answer with the case's `expected` (a schema does not, nor
    /// does a judge given a rubric: it then judges by the rubric alone).
    pub(crate) fn needs_expected(&self) -> bool {
        match self {
            // An expression that reads `expected` is checked against each case when the
            // bench loads; one that does not needs none.
            GradeSpec::JsonSchema { .. }
            | GradeSpec::Expr { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. } => false,
            GradeSpec::Judge {
                rubric: Some(r), ..
            } if !r.trim().is_empty() => false,
            GradeSpec::Judge { criteria, .. } if !criteria.is_empty() => false,
            GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => {
                of.iter().any(|p| p.needs_expected())
            }
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }
            | GradeSpec::Judge { .. }
            | GradeSpec::Fields { .. }
            | GradeSpec::ToolCall { .. }
            | GradeSpec::Command { .. }
            | GradeSpec::Embedding { .. } => true,
        }
    }

    /// The programs it runs (a `command` scorer's `run`, within `all`/`any`/`mean` too),
    /// each with the variables its `env:` passes on.
    pub(crate) fn programs(&self) -> Vec<(&[String], &[String])> {
        self.with_parts()
            .into_iter()
            .filter_map(|s| s.own().program)
            .collect()
    }

    /// The expressions of its `expr` scorers (within `all`/`any`/`mean` too).
    pub fn expressions(&self) -> Vec<&str> {
        self.with_parts()
            .into_iter()
            .filter_map(|s| s.own().expression)
            .collect()
    }

    /// Its `kind:` as written (`exact`, `tool_args`).
    pub fn kind(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
            .unwrap_or_default()
    }

    /// Whether it reads an agent loop's trajectory (the calls made) rather than its answer.
    pub fn reads_trajectory(&self) -> bool {
        matches!(
            self,
            GradeSpec::ToolSequence { .. }
                | GradeSpec::ToolArgs { .. }
                | GradeSpec::MaxSteps { .. }
        )
    }

    /// Whether every score it gives is 0 or 1 (no partial credit).
    pub(crate) fn binary(&self) -> bool {
        match self {
            GradeSpec::Judge {
                scale,
                labels,
                range,
                ..
            } => *scale == Scale::Binary || !labels.is_empty() || range.is_some(),
            // An expression may give any number in [0, 1]: what it gives is known per answer.
            GradeSpec::Fields { .. } | GradeSpec::Mean { .. } | GradeSpec::Expr { .. } => false,
            GradeSpec::Command { binary, .. } => *binary,
            GradeSpec::All { of } | GradeSpec::Any { of } => of.iter().all(|p| p.binary()),
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }
            | GradeSpec::JsonSchema { .. }
            | GradeSpec::ToolCall { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::Embedding { .. } => true,
        }
    }
}

/// What the judge gives.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Scale {
    /// Yes or no: 1 or 0.
    #[default]
    #[serde(rename = "binary")]
    Binary,
    /// 0 to 10, scaled to [0, 1].
    #[serde(rename = "0-10")]
    TenPoint,
}

/// In which order several expected calls must come.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CallOrder {
    /// Call i is the i-th expected call.
    #[default]
    Strict,
    /// Any order.
    Any,
}
