//! The `expr` scorer: a one-line expression evaluated in-process over each answer
//! (docs/guide/scorers.md, "Inline checks"). The expression is the template engine's own
//! (Jinja's expression syntax, run by minijinja), compiled once when the bench loads, run
//! on a fixed fuel with no loader (no file, no include, no network), over the answer
//! (`output`, or `answer`: what the variant's `extract:` read, else the whole answer; `raw`,
//! the whole answer always), its JSON (`json`), `expected` and the case's `vars`. It gives
//! `true`/`false` (1 or 0) or a number in [0, 1]; anything else fails the job with its
//! cause, never a silent 0.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, ErrorKind, Expression};

use super::scorer::ready;
use super::scorer::{CaseError, Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer};
pub use super::spec_error::ExprError;
use promptgauge_suite::Case;

/// Steps one evaluation may run: a check people write takes tens; a runaway (a loop over
/// a huge range, a string repeated millions of times) stops here, well under a millisecond.
pub const FUEL: u64 = 50_000;

/// The names an expression may read, besides the engine's own functions (`range`, `dict`).
pub const NAMES: [&str; 6] = ["output", "answer", "raw", "json", "expected", "vars"];

/// The filters and tests the engine adds to the template engine's own.
const HELPERS: [&str; 5] = ["matches", "capture", "wordcount", "last_number", "fromjson"];

/// Compiled regular expressions at most kept (an expression names a handful).
const KEPT_REGEXES: usize = 256;

/// The one engine every expression runs in: the template engine's builtins, the helpers
/// below, undefined values that chain (`json.a.b` of an answer without `a` is undefined,
/// and compares false), a fixed fuel, and no loader (nothing outside the answer is read).
static ENGINE: LazyLock<Environment<'static>> = LazyLock::new(engine);

fn engine() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
    env.set_fuel(Some(FUEL));
    env.add_test("matches", |text: &str, pattern: &str| {
        matches(text, pattern)
    });
    env.add_filter("matches", |text: &str, pattern: &str| {
        matches(text, pattern)
    });
    env.add_filter("capture", capture);
    env.add_filter("wordcount", |text: &str| text.split_whitespace().count());
    env.add_filter("last_number", |text: &str| {
        super::text::last_number(text).map_or(Value::UNDEFINED, Value::from)
    });
    env.add_filter("fromjson", |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .map_or(Value::UNDEFINED, |v| serde_value(&v))
    });
    env.set_unknown_method_callback(method);
    env
}

/// A serializable value as the engine's.
fn serde_value(v: &impl serde::Serialize) -> Value {
    Value::from(minijinja::value::Serde(v))
}

/// The Python methods people reach for on a text or a map (`output.startswith("Yes")`,
/// `json.get("a")`), as the engine's filters and tests do them.
fn method(
    state: &mut minijinja::State,
    value: &Value,
    name: &str,
    args: &[Value],
) -> Result<Value, minijinja::Error> {
    use minijinja::value::from_args;
    let unknown = || Err(minijinja::Error::from(ErrorKind::UnknownMethod));
    if let Some(text) = value.as_str() {
        return match name {
            "lower" | "upper" | "strip" => {
                let () = from_args(args)?;
                let filter = if name == "strip" { "trim" } else { name };
                state.apply_filter(filter, std::slice::from_ref(value))
            }
            "startswith" | "endswith" => {
                let (part,): (&str,) = from_args(args)?;
                Ok(Value::from(if name == "startswith" {
                    text.starts_with(part)
                } else {
                    text.ends_with(part)
                }))
            }
            "count" => {
                let (part,): (&str,) = from_args(args)?;
                Ok(Value::from(if part.is_empty() {
                    text.chars().count() + 1
                } else {
                    text.matches(part).count()
                }))
            }
            "split" => {
                let (sep,): (Option<&str>,) = from_args(args)?;
                Ok(match sep {
                    Some(sep) if !sep.is_empty() => text.split(sep).map(Value::from).collect(),
                    _ => text.split_whitespace().map(Value::from).collect(),
                })
            }
            _ => unknown(),
        };
    }
    if value.kind() == ValueKind::Map {
        return match name {
            "get" => {
                let (key, default): (Value, Option<Value>) = from_args(args)?;
                let got = value.get_item(&key).unwrap_or(Value::UNDEFINED);
                Ok(if got.is_undefined() {
                    default.unwrap_or(Value::from(()))
                } else {
                    got
                })
            }
            "keys" | "values" | "items" => {
                let () = from_args(args)?;
                let pairs = state.apply_filter("items", std::slice::from_ref(value))?;
                let nth = |i: usize| -> Result<Value, minijinja::Error> {
                    pairs
                        .try_iter()?
                        .map(|p| p.get_item_by_index(i))
                        .collect::<Result<_, _>>()
                };
                match name {
                    "keys" => nth(0),
                    "values" => nth(1),
                    _ => Ok(pairs),
                }
            }
            _ => unknown(),
        };
    }
    unknown()
}

/// Regexes compiled so far, by pattern: an expression's patterns are compiled once a run,
/// and each is shared (a clone would build its search cache anew on every answer).
static REGEXES: LazyLock<Mutex<HashMap<String, Arc<regex::Regex>>>> =
    LazyLock::new(Default::default);

/// `pattern` compiled (once), or why it does not compile.
fn regex_of(pattern: &str) -> Result<Arc<regex::Regex>, minijinja::Error> {
    let mut kept = REGEXES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = kept.get(pattern) {
        return Ok(r.clone());
    }
    let r = regex::Regex::new(pattern).map(Arc::new).map_err(|e| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("the regex `{pattern}` does not compile: {e}"),
        )
    })?;
    if kept.len() < KEPT_REGEXES {
        kept.insert(pattern.to_string(), r.clone());
    }
    Ok(r)
}

/// Whether `pattern` matches anywhere in `text` (JavaScript's `/re/.test(text)`).
fn matches(text: &str, pattern: &str) -> Result<bool, minijinja::Error> {
    Ok(regex_of(pattern)?.is_match(text))
}

/// What `pattern` finds in `text`: its first group (the whole match without a group), or
/// undefined when it finds nothing.
fn capture(text: &str, pattern: &str) -> Result<Value, minijinja::Error> {
    let r = regex_of(pattern)?;
    Ok(r.captures(text).map_or(Value::UNDEFINED, |c| {
        Value::from(c.get(1).or_else(|| c.get(0)).map_or("", |m| m.as_str()))
    }))
}

/// A compiled expression and what it reads.
pub struct Expr {
    text: String,
    compiled: Expression<'static, 'static>,
    /// The names it reads (`output`, `vars`), so an answer's JSON is parsed only when used.
    reads: BTreeSet<&'static str>,
    /// The case variables it names (`vars.topic`), each checked against every case.
    vars: Vec<String>,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expr").field("text", &self.text).finish()
    }
}

impl Expr {
    /// Compiles `text`: a syntax error says where, a name it does not have is refused with
    /// the nearest one, and each regex written as a literal (`matches("…")`) is compiled now.
    pub fn new(text: &str) -> Result<Expr, ExprError> {
        if text.trim().is_empty() {
            return Err(ExprError::Empty);
        }
        let compiled = ENGINE
            .compile_expression_owned(text.to_string())
            .map_err(|e| syntax_error(text, &e))?;
        let globals: BTreeSet<String> = ENGINE.globals().map(|(n, _)| n.to_string()).collect();
        let mut reads = BTreeSet::new();
        for name in compiled.undeclared_variables(false) {
            match NAMES.iter().find(|n| **n == name) {
                Some(n) => {
                    reads.insert(*n);
                }
                None if globals.contains(&name) => {}
                None => return Err(unknown(text, &name)),
            }
        }
        let vars = compiled
            .undeclared_variables(true)
            .into_iter()
            .filter_map(|n| n.strip_prefix("vars.").map(|v| v.to_string()))
            .collect();
        if let Some(u) = promptgauge_suite::jinja::unknown_in_expression(&ENGINE, text, &HELPERS)
            .into_iter()
            .next()
        {
            return Err(ExprError::UnknownFilter {
                expr: text.to_string(),
                unknown: u,
            });
        }
        check_literal_regexes(text)?;
        Ok(Expr {
            text: text.to_string(),
            compiled,
            reads,
            vars,
        })
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Evaluates it over one whole answer: its score, or why it gives none.
    pub fn eval(&self, case: &Case, answer: &str) -> Result<f64, String> {
        self.eval_read(case, answer, answer)
    }

    /// Evaluates it over what a variant read of an answer (`output`) and the whole answer
    /// (`raw`).
    pub fn eval_read(&self, case: &Case, answer: &str, raw: &str) -> Result<f64, String> {
        let mut best: Option<f64> = None;
        for expected in self.expecteds(case) {
            let got = self
                .compiled
                .eval(self.context(case, answer, raw, expected))
                .map_err(|e| self.failed(&e))?;
            let score = self.score_of(&got)?;
            best = Some(best.map_or(score, |b: f64| b.max(score)));
            if score == 1.0 {
                break;
            }
        }
        Ok(best.unwrap_or(0.0))
    }

    /// The values `expected` takes, one evaluation each: the case's JSON answer, or each of
    /// its acceptable answers (any one right is right); one undefined when it is not read.
    fn expecteds(&self, case: &Case) -> Vec<Value> {
        if !self.reads.contains("expected") {
            return vec![Value::UNDEFINED];
        }
        match &case.expected_json {
            Some(j) => vec![serde_value(j)],
            None if case.expected.is_empty() => vec![Value::UNDEFINED],
            None => case
                .expected
                .iter()
                .map(|e| Value::from(e.as_str()))
                .collect(),
        }
    }

    /// What the expression sees: only the names it reads.
    fn context(&self, case: &Case, answer: &str, raw: &str, expected: Value) -> Value {
        let value = |name: &str| match name {
            "output" | "answer" => Value::from(answer),
            "raw" => Value::from(raw),
            "json" => super::structured::extract_json(answer)
                .map_or(Value::UNDEFINED, |j| serde_value(&j)),
            "expected" => expected.clone(),
            _ => serde_value(&case.vars),
        };
        Value::from_pairs(self.reads.iter().map(|n| (*n, value(n))))
    }

    /// A result as a score: `true`/`false` as 1/0, a number in [0, 1] as itself.
    fn score_of(&self, got: &Value) -> Result<f64, String> {
        let said = |why: String| format!("the expression `{}` {why}", self.text);
        match got.kind() {
            ValueKind::Bool => Ok(if got.is_true() { 1.0 } else { 0.0 }),
            ValueKind::Number => {
                let n = f64::try_from(got.clone()).unwrap_or(f64::NAN);
                if (0.0..=1.0).contains(&n) {
                    Ok(n)
                } else {
                    Err(said(format!(
                        "gave {got}, outside [0, 1]: a score is a number from 0 to 1 (scale it, e.g. `x / 10`), or true/false"
                    )))
                }
            }
            ValueKind::Undefined => Err(said(
                "gave undefined (a name or field this answer does not have): compare it (`json.a == 1`), or test it (`json.a is defined`)".into(),
            )),
            kind => Err(said(format!(
                "gave {} {}, not true/false or a number in [0, 1]: compare it (`… == …`, `'x' in output`)",
                article(kind),
                promptgauge_client::protocol::truncate(&got.to_string(), 80)
            ))),
        }
    }

    /// An evaluation error in the user's terms.
    fn failed(&self, e: &minijinja::Error) -> String {
        if e.kind() == ErrorKind::OutOfFuel {
            return format!(
                "the expression `{}` ran out of its {FUEL} steps: a runaway (a loop over a long range, a long repetition)",
                self.text
            );
        }
        let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
        format!(
            "the expression `{}` failed on this answer ({}){detail}",
            self.text,
            e.kind()
        )
    }

    /// Why `case` could never be scored by it: a variable it names that the case has not,
    /// or `expected` read with none given.
    pub(crate) fn check(&self, case: &Case) -> Result<(), CaseError> {
        if self.reads.contains("expected") && case.expected.is_empty() {
            return Err(CaseError::ExprReads("expected".into()));
        }
        match self.vars.iter().find(|v| {
            let top = v.split('.').next().unwrap_or(v);
            !case.vars.contains_key(top)
        }) {
            Some(v) => Err(CaseError::ExprReads(format!("vars.{v}"))),
            None => Ok(()),
        }
    }
}

/// "a string", "a list": how a message names a value's kind.
fn article(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::String => "a string",
        ValueKind::Seq => "a list",
        ValueKind::Map => "a map",
        ValueKind::None => "none:",
        _ => "the value",
    }
}

/// A syntax error, with the failing part of the expression and its column.
fn syntax_error(text: &str, e: &minijinja::Error) -> ExprError {
    let at = e.range().map_or(0, |r| r.start).min(text.len());
    let at = (0..=at)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let part: String = text[at..line_end].chars().take(30).collect();
    ExprError::Syntax {
        expr: text.to_string(),
        detail: e.detail().unwrap_or("syntax error").to_string(),
        part: if part.is_empty() {
            "the end".to_string()
        } else {
            part
        },
        column: text[line_start..at].chars().count() + 1,
        line: text[line_start..line_end].to_string(),
    }
}

/// A name the expression does not have, with the nearest one it does.
fn unknown(text: &str, name: &str) -> ExprError {
    let nearest = NAMES
        .iter()
        .map(|n| (strsim::jaro_winkler(name, n), *n))
        .filter(|(s, _)| *s > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(String::new(), |(_, n)| format!(" (did you mean `{n}`?)"));
    ExprError::Unknown {
        expr: text.to_string(),
        name: name.to_string(),
        nearest,
    }
}

/// Compiles each regex the expression writes as a literal (`matches("…")`,
/// `capture('…')`), so a bad one is refused before anything is sent.
fn check_literal_regexes(text: &str) -> Result<(), ExprError> {
    static LITERAL: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"\b(?:matches|capture)\s*\(\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"#)
            .expect("a valid pattern")
    });
    for c in LITERAL.captures_iter(text) {
        // The literal read as the engine reads it (its escapes undone).
        let Ok(pattern) = ENGINE
            .compile_expression(&c[1])
            .and_then(|e| e.eval(Value::UNDEFINED))
        else {
            continue;
        };
        if let Some(p) = pattern.as_str() {
            regex_of(p).map_err(|e| ExprError::Regex {
                expr: text.to_string(),
                why: e.detail().unwrap_or_default().to_string(),
            })?;
        }
    }
    Ok(())
}

/// The `expr` scorer.
#[derive(Debug)]
pub struct ExprScorer {
    expr: Expr,
}

impl ExprScorer {
    /// The scorer of the expression `text` (docs/guide/scorers.md, "Inline checks").
    pub fn new(text: &str) -> Result<ExprScorer, ExprError> {
        Ok(ExprScorer {
            expr: Expr::new(text)?,
        })
    }
}

impl Scorer for ExprScorer {
    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let answer = input.answer;
        let raw = answer.raw.as_deref().unwrap_or(&answer.text);
        match self.expr.eval_read(input.case, &answer.text, raw) {
            Ok(value) => ready(Score {
                value,
                ..Score::binary(false, None)
            }),
            Err(why) => Box::pin(std::future::ready(Err(ScoreError::new(why)))),
        }
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        self.expr.check(case)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptgauge_suite::FilePos;
    use std::path::Path;

    fn case(expected: &[&str], vars: serde_json::Value) -> Case {
        Case {
            id: "c-1".into(),
            vars: promptgauge_suite::cases::Vars(
                vars.as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default(),
            ),
            expected: expected.iter().map(|e| e.to_string()).collect(),
            location: FilePos::line(Path::new("cases.jsonl"), 3),
            ..promptgauge_suite::testing::case()
        }
    }

    /// The score of `expr` on `answer` for a case expecting "Paris" with `topic: geography`.
    fn score(expr: &str, answer: &str) -> Result<f64, String> {
        let c = case(
            &["Paris"],
            serde_json::json!({"topic": "geography", "n": 3}),
        );
        Expr::new(expr).map_err(|e| e.to_string())?.eval(&c, answer)
    }

    #[test]
    fn true_and_false_are_a_pass_and_a_fail() {
        assert_eq!(score("'Paris' in output", "It is Paris."), Ok(1.0));
        assert_eq!(score("'Paris' in output", "It is Lyon."), Ok(0.0));
        assert_eq!(score("answer|length < 10", "short"), Ok(1.0));
        assert_eq!(score("output is startingwith('It')", "It is"), Ok(1.0));
        assert_eq!(
            score(
                "output.startswith('It') and output.lower().endswith('paris.')",
                "It is PARIS."
            ),
            Ok(1.0)
        );
        assert_eq!(
            score(
                "not (output|lower is matches('sorry|apolog'))",
                "I apologise"
            ),
            Ok(0.0)
        );
    }

    #[test]
    fn a_number_in_0_1_is_a_score_and_one_outside_is_an_error() {
        assert_eq!(score("0.25", "x"), Ok(0.25));
        assert_eq!(score("(output|wordcount) / 4", "one two three"), Ok(0.75));
        let e = score("output|wordcount", "one two three").unwrap_err();
        assert!(e.contains("gave 3, outside [0, 1]"), "{e}");
        let e = score("-0.5", "x").unwrap_err();
        assert!(e.contains("outside [0, 1]"), "{e}");
    }

    #[test]
    fn a_result_that_is_no_verdict_is_an_error_naming_what_it_gave() {
        let e = score("output|upper", "paris").unwrap_err();
        assert!(e.contains("gave a string PARIS, not true/false"), "{e}");
        let e = score("json.missing", "{\"a\": 1}").unwrap_err();
        assert!(e.contains("gave undefined"), "{e}");
        let e = score("json.l", "{\"l\": [1]}").unwrap_err();
        assert!(e.contains("gave a list"), "{e}");
    }

    #[test]
    fn json_is_the_answer_parsed_even_in_a_fence_and_undefined_when_it_is_none() {
        let fenced = "```json\n{\"a\": 1, \"items\": [1, 2, 3], \"who\": {\"name\": \"Ada\"}}\n```";
        assert_eq!(score("json.a == 1", fenced), Ok(1.0));
        assert_eq!(
            score(
                "json['items']|length == 3 and json.who.name == 'Ada'",
                fenced
            ),
            Ok(1.0)
        );
        assert_eq!(
            score("json.get('a') == 1 and 'who' in json.keys()", fenced),
            Ok(1.0)
        );
        assert_eq!(score("json is defined", "not JSON at all"), Ok(0.0));
        // A field the answer lacks, however deep, compares false: a wrong answer, not an error.
        assert_eq!(score("json.who.address.city == 'Oslo'", fenced), Ok(0.0));
        assert_eq!(score("json.a == 1", "no JSON here"), Ok(0.0));
        assert_eq!(score("(output|fromjson) is defined", fenced), Ok(0.0));
        assert_eq!(score("(output|fromjson).a == 1", "{\"a\": 1}"), Ok(1.0));
    }

    #[test]
    fn expected_is_each_acceptable_answer_in_turn_and_vars_are_the_case_s() {
        let c = case(
            &["Paris", "paris, france"],
            serde_json::json!({"topic": "geo"}),
        );
        let e = Expr::new("output|trim|lower == expected|lower").unwrap();
        assert_eq!(e.eval(&c, " PARIS, France "), Ok(1.0));
        assert_eq!(e.eval(&c, "Paris"), Ok(1.0));
        assert_eq!(e.eval(&c, "Lyon"), Ok(0.0));
        assert_eq!(
            score("vars.topic in output and vars.n == 3", "geography!"),
            Ok(1.0)
        );
        let mut structured = case(&["{}"], serde_json::json!({}));
        structured.expected_json = Some(serde_json::json!({"a": 1}));
        let e = Expr::new("json.a == expected.a").unwrap();
        assert_eq!(e.eval(&structured, "{\"a\": 1}"), Ok(1.0));
    }

    #[test]
    fn a_case_without_what_the_expression_reads_is_refused_at_load() {
        let e = Expr::new("vars.topic in output and expected in output").unwrap();
        let no_var = case(&["x"], serde_json::json!({"other": 1}));
        assert_eq!(
            e.check(&no_var).unwrap_err().to_string(),
            "the expression reads `vars.topic`, which this case does not have"
        );
        let no_expected = case(&[], serde_json::json!({"topic": "t"}));
        assert!(
            e.check(&no_expected)
                .unwrap_err()
                .to_string()
                .contains("`expected`")
        );
        assert!(
            e.check(&case(&["x"], serde_json::json!({"topic": "t"})))
                .is_ok()
        );
    }

    #[test]
    fn the_regex_helpers_match_capture_and_refuse_a_bad_pattern_at_load() {
        assert_eq!(
            score(r#"output is matches("^\\d{3}-\\d{4}$")"#, "555-1234"),
            Ok(1.0)
        );
        assert_eq!(score(r#"output|matches("(?i)paris")"#, "PARIS"), Ok(1.0));
        assert_eq!(
            score(
                r#"output|capture("Answer: (\\w+)") == 'B'"#,
                "so... Answer: B"
            ),
            Ok(1.0)
        );
        assert_eq!(
            score(r#"output|capture("Answer: (\\w+)") is defined"#, "none"),
            Ok(0.0)
        );
        assert_eq!(
            score(
                "output|last_number >= 3 and output|last_number <= 5",
                "about 4.5 m"
            ),
            Ok(1.0)
        );
        let e = Expr::new(r#"output is matches("(unclosed")"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the regex `(unclosed` does not compile"), "{e}");
        // A pattern built from the case's variables is compiled when it is met.
        let e = score("output is matches(vars.topic ~ '(')", "x").unwrap_err();
        assert!(e.contains("does not compile"), "{e}");
    }

    #[test]
    fn a_runaway_expression_stops_on_its_fuel() {
        let e = score("range(100000)|list|length > 0", "x").unwrap_err();
        assert!(e.contains("ran out of its 50000 steps"), "{e}");
        let e = score("('x' * 100000000)|length > 0", "x").unwrap_err();
        assert!(e.contains("ran out of"), "{e}");
    }

    #[test]
    fn a_syntax_error_says_the_failing_part_and_its_column() {
        let e = Expr::new("output|length >> 3").unwrap_err();
        let ExprError::Syntax {
            column,
            ref part,
            ref line,
            ..
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (column, part.as_str(), line.as_str()),
            (16, "> 3", "output|length >> 3")
        );
        assert!(e.to_string().contains("at `> 3` (column 16)"), "{e}");
        // On a later line of a block expression, the column is that line's.
        let e = Expr::new("'a' in output\n  and (output|length < ").unwrap_err();
        assert_eq!(e.written(), Some("  and (output|length < "), "{e}");
    }

    #[test]
    fn raw_is_the_whole_answer_and_output_what_the_variant_read() {
        let c = case(&["B"], serde_json::json!({}));
        let e = Expr::new("output == expected and raw|wordcount <= 3").unwrap();
        assert_eq!(e.eval_read(&c, "B", "<answer>B</answer>"), Ok(1.0));
        assert_eq!(
            e.eval_read(&c, "B", "Let me think at length.\n<answer>B</answer>"),
            Ok(0.0)
        );
        // Without a reading, raw is the answer itself.
        assert_eq!(score("raw == output", "Paris"), Ok(1.0));
        let e = Expr::new("'x' in raws").unwrap_err().to_string();
        assert!(e.contains("did you mean `raw`?"), "{e}");
    }

    #[test]
    fn a_name_it_does_not_have_is_refused_with_the_nearest() {
        let e = Expr::new("'x' in ouput").unwrap_err().to_string();
        assert!(
            e.contains("uses `ouput`") && e.contains("did you mean `output`?"),
            "{e}"
        );
        // The engine's own functions are no unknown names.
        assert!(Expr::new("output|length in range(3)").is_ok());
    }

    #[test]
    fn an_unknown_filter_or_test_is_refused_at_load_with_the_nearest() {
        let e = Expr::new("output|lenght > 3").unwrap_err();
        assert!(
            e.to_string()
                .contains("uses an unknown filter `lenght` (did you mean `length`?)"),
            "{e}"
        );
        let e = Expr::new("'a' in output\n and output|wordcont < 9").unwrap_err();
        assert!(e.to_string().contains("(did you mean `wordcount`?)"), "{e}");
        assert_eq!(e.written(), Some(" and output|wordcont < 9"));
        let e = Expr::new("output is matchs('a')").unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown test `matchs` (did you mean `matches`?)"),
            "{e}"
        );
        // In a branch only some answers take, it is refused all the same.
        assert!(Expr::new("output|lenght if output == 'zz' else true").is_err());
    }

    #[test]
    fn an_evaluation_error_names_the_expression_and_the_cause() {
        let e = score("output + 1 > 0", "x").unwrap_err();
        assert!(
            e.starts_with(
                "the expression `output + 1 > 0` failed on this answer (invalid operation)"
            ),
            "{e}"
        );
        let e = score("1 / (output|length - 1) > 0", "x").unwrap_err();
        assert!(e.contains("failed on this answer"), "{e}");
    }

    /// The rows of the twenty-checks table in docs/guide/scorers.md: (check, expr).
    fn documented_checks() -> Vec<(String, String)> {
        let doc = std::fs::read_to_string(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("docs/guide/scorers.md"),
        )
        .unwrap();
        let table = doc.split("<!-- expr-table").nth(1).unwrap();
        table
            .lines()
            .skip(1)
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|row| {
                let cells: Vec<String> = row
                    .replace("\\|", "\u{1}")
                    .split('|')
                    .map(|c| c.trim().replace('\u{1}', "|"))
                    .collect();
                let expr = cells[3].split('`').nth(1).unwrap().to_string();
                (cells[1].clone(), expr)
            })
            .collect()
    }

    #[test]
    fn each_documented_check_compiles_and_tells_answers_apart() {
        let checks = documented_checks();
        assert_eq!(checks.len(), 20, "{checks:#?}");
        let c = case(&["yes"], serde_json::json!({"city": "Paris"}));
        let answers = [
            "Yes, your refund and receipt are here: 555-1234. Paris?",
            r#"{"status": "ok", "order_id": 7, "items": [1, 2, 3], "score": 3}"#,
            "sorry, no. It costs 250.",
            "yes",
            "555-1234",
            &"word ".repeat(60),
        ];
        for (check, expr) in checks {
            let e = Expr::new(&expr).unwrap_or_else(|e| panic!("{check}: {e}"));
            let scores: Vec<f64> = answers
                .iter()
                .map(|a| {
                    e.eval(&c, a)
                        .unwrap_or_else(|e| panic!("{check} on {a:?}: {e}"))
                })
                .collect();
            assert!(
                scores.contains(&1.0) && scores.contains(&0.0),
                "{check}: `{expr}` gives {scores:?}"
            );
        }
    }
}
