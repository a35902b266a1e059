//! The text graders (`exact`, `contains`, `regex`, `number`, `choice`, `json`): a grade
//! spec compiled once into a [`Grader`], which scores an answer 0 or 1 at once and says what
//! it extracted; and the readers the other scorers share (a number as people write it, JSON
//! in a Markdown fence).

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::scorer::{CaseError, Score, ScoreContext, ScoreFuture, ScoreInput, Scorer};
use super::spec_error::SpecError;
use promptgauge_suite::{Case, GradeSpec};

/// The first capture group of `pattern`, as text, and a regex that matches exactly what it
/// can capture (`None` without a group, or when it cannot be taken apart).
fn first_group(pattern: &str, case_sensitive: bool) -> Option<(String, Regex)> {
    use regex_syntax::hir::{Hir, HirKind};
    fn find(h: &Hir) -> Option<&Hir> {
        match h.kind() {
            HirKind::Capture(c) if c.index == 1 => Some(&c.sub),
            HirKind::Capture(c) => find(&c.sub),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().find_map(find),
            HirKind::Repetition(r) => find(&r.sub),
            _ => None,
        }
    }
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let group = find(&hir)?.to_string();
    let flags = if case_sensitive { "" } else { "(?i)" };
    let whole = Regex::new(&format!("{flags}^(?:{group})$")).ok()?;
    Some((group, whole))
}

/// A grader ready to use: its regex compiled once, its path parsed once.
#[derive(Debug, Clone)]
pub(crate) enum Grader {
    Exact {
        case_sensitive: bool,
    },
    Contains {
        case_sensitive: bool,
    },
    Regex {
        regex: Regex,
        case_sensitive: bool,
    },
    Number {
        tolerance: f64,
    },
    Choice,
    Json {
        path: Vec<PathStep>,
        case_sensitive: bool,
    },
}

/// One step of a JSON path: a key or an index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PathStep {
    Key(String),
    Index(usize),
}

/// The verdict on one output: a text grader's score is full marks or none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Grade {
    /// 1 when the output matches an expected answer, else 0.
    pub(crate) score: f64,
    /// What the grader took from the output; `None` when it found nothing to compare.
    pub(crate) extracted: Option<String>,
}

/// Full marks (1) when `pass`, else none (0).
fn marks(pass: bool) -> f64 {
    if pass { 1.0 } else { 0.0 }
}

impl Grade {
    /// Whether it has full marks.
    #[cfg(test)]
    pub(crate) fn passed(&self) -> bool {
        self.score == 1.0
    }
}

impl Grader {
    /// A text grader: its regex compiled once, its path parsed once. Errors for the
    /// structured and model-graded kinds (their scorers are built by `SpecExt::scorer`).
    pub(crate) fn new(spec: &GradeSpec) -> Result<Grader, SpecError> {
        Ok(match spec {
            GradeSpec::Exact { case_sensitive } => Grader::Exact {
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Contains { case_sensitive } => Grader::Contains {
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Regex {
                pattern,
                case_sensitive,
            } => Grader::Regex {
                regex: Regex::new(pattern).map_err(|error| SpecError::Regex {
                    pattern: pattern.clone(),
                    error,
                })?,
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Number { tolerance } => {
                if !tolerance.is_finite() || *tolerance < 0.0 {
                    return Err(SpecError::Tolerance(*tolerance));
                }
                Grader::Number {
                    tolerance: *tolerance,
                }
            }
            GradeSpec::Choice => Grader::Choice,
            GradeSpec::Json {
                path,
                case_sensitive,
            } => Grader::Json {
                path: parse_path(path)?,
                case_sensitive: *case_sensitive,
            },
            other @ (GradeSpec::Judge { .. }
            | GradeSpec::JsonSchema { .. }
            | GradeSpec::Fields { .. }
            | GradeSpec::ToolCall { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::Command { .. }
            | GradeSpec::Embedding { .. }
            | GradeSpec::Expr { .. }
            | GradeSpec::All { .. }
            | GradeSpec::Any { .. }
            | GradeSpec::Mean { .. }) => return Err(SpecError::NotText(other.kind())),
        })
    }

    /// Checks that an expected answer can ever match, so a typo is caught before the run.
    fn check_expected(&self, expected: &str) -> Result<(), CaseError> {
        match self {
            Grader::Number { .. } if parse_number(expected).is_none() => {
                Err(CaseError::NotANumber(expected.to_string()))
            }
            Grader::Choice if choice_letter(expected).is_none() => {
                Err(CaseError::NotALetter(expected.to_string()))
            }
            Grader::Regex {
                regex,
                case_sensitive,
            } => match first_group(regex.as_str(), *case_sensitive) {
                Some((group, whole)) if !whole.is_match(expected.trim()) => {
                    Err(CaseError::NeverCaptured {
                        expected: expected.to_string(),
                        group,
                    })
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Whether `output` matches one of `expected`, and what was extracted from it.
    pub(crate) fn grade(&self, output: &str, expected: &[String]) -> Grade {
        match self {
            Grader::Exact { case_sensitive } => {
                let got = output.trim();
                Grade {
                    score: marks(
                        expected
                            .iter()
                            .any(|e| text_eq(got, e.trim(), *case_sensitive)),
                    ),
                    extracted: Some(got.to_string()),
                }
            }
            Grader::Contains { case_sensitive } => contained(output, expected, *case_sensitive),
            Grader::Regex {
                regex,
                case_sensitive,
            } => matched(regex, output, expected, *case_sensitive),
            Grader::Number { tolerance } => {
                let got = last_number(output);
                Grade {
                    score: marks(got.is_some_and(|g| {
                        expected
                            .iter()
                            .filter_map(|e| parse_number(e))
                            .any(|e| (g - e).abs() <= *tolerance)
                    })),
                    extracted: got.map(format_number),
                }
            }
            Grader::Choice => {
                let got = extract_choice(output);
                Grade {
                    score: marks(
                        got.is_some_and(|g| expected.iter().any(|e| choice_letter(e) == Some(g))),
                    ),
                    extracted: got.map(String::from),
                }
            }
            Grader::Json {
                path,
                case_sensitive,
            } => {
                let got = json_value_at(output, path);
                Grade {
                    score: marks(got.as_ref().is_some_and(|g| {
                        expected.iter().any(|e| {
                            text_eq(g, e.trim(), *case_sensitive)
                                || matches!((parse_number(g), parse_number(e)), (Some(a), Some(b)) if a == b)
                        })
                    })),
                    extracted: got,
                }
            }
        }
    }
}

/// `contains`: the first expected answer found in the output.
fn contained(output: &str, expected: &[String], case_sensitive: bool) -> Grade {
    let found = expected.iter().find(|e| {
        if case_sensitive {
            output.contains(e.as_str())
        } else {
            output.to_lowercase().contains(&e.to_lowercase())
        }
    });
    Grade {
        score: marks(found.is_some()),
        extracted: found.cloned(),
    }
}

/// `regex`: its first group compared with the expected answers; without a group, a match
/// passes.
fn matched(regex: &Regex, output: &str, expected: &[String], case_sensitive: bool) -> Grade {
    let Some(caps) = regex.captures(output) else {
        return Grade {
            score: marks(false),
            extracted: None,
        };
    };
    match caps.get(1) {
        Some(group) => {
            let got = group.as_str().trim();
            Grade {
                score: marks(
                    expected
                        .iter()
                        .any(|e| text_eq(got, e.trim(), case_sensitive)),
                ),
                extracted: Some(got.to_string()),
            }
        }
        None => Grade {
            score: marks(true),
            extracted: caps.get(0).map(|m| m.as_str().to_string()),
        },
    }
}

fn text_eq(a: &str, b: &str, case_sensitive: bool) -> bool {
    if case_sensitive {
        a == b
    } else {
        a.to_lowercase() == b.to_lowercase()
    }
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[-−]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+−]?\d+)?")
        .expect("valid regex")
});

/// A number as people write it: `-3`, `1,234`, `3.50`, `−2` (Unicode minus), `1e3`,
/// `6.02E23`, `2.5e-4`.
pub fn parse_number(text: &str) -> Option<f64> {
    let t = text.trim();
    let m = NUMBER.find(t)?;
    if m.start() != 0 || m.end() != t.len() {
        return None;
    }
    to_f64(m.as_str())
}

fn to_f64(s: &str) -> Option<f64> {
    s.replace(',', "").replace('−', "-").parse().ok()
}

/// The last number in a text, the usual place for a final answer.
pub fn last_number(text: &str) -> Option<f64> {
    NUMBER
        .find_iter(text)
        .last()
        .and_then(|m| to_f64(m.as_str()))
}

fn format_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The letter of an expected choice: `B`, `b`, `(B)`, `B)`.
fn choice_letter(expected: &str) -> Option<char> {
    let t = expected
        .trim()
        .trim_matches(|c| matches!(c, '(' | ')' | '.' | ':'));
    let mut chars = t.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => Some(c.to_ascii_uppercase()),
        _ => None,
    }
}

static ANSWER_IS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:answer|choice|option|category)\s*(?:is|:)?\s*[:\-]?\s*\(?([A-Z])\)?(?:[^A-Za-z0-9]|$)")
        .expect("valid regex")
});
static LONE_LETTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\(?([A-Z])\)?[.:]?$").expect("valid regex"));
static LEADING_LETTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\(?([A-Z])[).:](?:\s|$)").expect("valid regex"));
static BRACKETED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(([A-Z])\)").expect("valid regex"));

/// The option letter a model chose. In order of trust: an explicit "Answer: X" (the last
/// one, as models revise), the whole output being a letter, a leading "X)", a bracketed "(X)".
fn extract_choice(output: &str) -> Option<char> {
    let text = output.replace(['*', '`'], "");
    let text = text.trim();
    let letter = |m: Option<regex::Match>| m.and_then(|m| m.as_str().chars().next());
    if let Some(c) = ANSWER_IS.captures_iter(text).last() {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    if let Some(c) = LONE_LETTER.captures(text) {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    if let Some(c) = LEADING_LETTER.captures(text) {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    BRACKETED
        .captures_iter(text)
        .last()
        .and_then(|c| letter(c.get(1)))
}

/// `a.b[0].c`, `$.a.b.0` or `/a/b/0`.
fn parse_path(path: &str) -> Result<Vec<PathStep>, SpecError> {
    let p = path.trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let parts: Vec<&str> = if p.starts_with('/') {
        p.split('/').filter(|s| !s.is_empty()).collect()
    } else {
        p.split(['.', '[', ']']).filter(|s| !s.is_empty()).collect()
    };
    if parts.is_empty() {
        return Err(SpecError::EmptyPath(path.to_string()));
    }
    Ok(parts
        .into_iter()
        .map(|s| match s.parse::<usize>() {
            Ok(i) => PathStep::Index(i),
            Err(_) => PathStep::Key(s.to_string()),
        })
        .collect())
}

/// The value at `path`, as text: strings bare, everything else as compact JSON.
fn json_value_at(output: &str, path: &[PathStep]) -> Option<String> {
    let body = strip_code_fence(output.trim());
    let mut value: &serde_json::Value = &serde_json::from_str(body).ok()?;
    for step in path {
        value = match (step, value) {
            (PathStep::Key(k), serde_json::Value::Object(map)) => map.get(k)?,
            (PathStep::Index(i), serde_json::Value::Array(items)) => items.get(*i)?,
            (PathStep::Index(i), serde_json::Value::Object(map)) => map.get(&i.to_string())?,
            _ => return None,
        };
    }
    let owned = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(owned)
}

/// Models often wrap JSON in a Markdown fence; the JSON inside is still the answer.
pub(super) fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map_or("", |(_, r)| r);
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

impl Scorer for Grader {
    fn looks_for(&self, _: &Case) -> Option<&'static str> {
        match self {
            Grader::Number { .. } => Some("a number"),
            Grader::Choice => Some("an option letter"),
            Grader::Json { .. } => Some("JSON with a value at the path"),
            Grader::Regex { regex, .. } if regex.captures_len() > 1 => {
                Some("a match of the pattern")
            }
            _ => None,
        }
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let grade = self.grade(&input.answer.text, &input.case.expected);
        Box::pin(std::future::ready(Ok(Score {
            value: grade.score,
            extracted: grade.extracted,
            usage: None,
            detail: None,
            judge: Vec::new(),
            parts: Vec::new(),
        })))
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        if case.expected_json.is_some() {
            return Err(CaseError::ExpectedJson);
        }
        case.expected
            .iter()
            .try_for_each(|e| self.check_expected(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compile;

    fn grade(spec: GradeSpec, output: &str, expected: &[&str]) -> Grade {
        let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        spec.compile().unwrap().grade(output, &expected)
    }

    #[test]
    fn exact_trims_and_ignores_case_by_default() {
        assert!(grade(GradeSpec::default(), "  Paris \n", &["paris"]).passed());
        let sensitive = GradeSpec::Exact {
            case_sensitive: true,
        };
        assert!(!grade(sensitive, "Paris", &["paris"]).passed());
        assert!(!grade(GradeSpec::default(), "Paris, France", &["paris"]).passed());
    }

    #[test]
    fn contains_accepts_any_expected() {
        let g = grade(
            GradeSpec::Contains {
                case_sensitive: false,
            },
            "It is LYON.",
            &["paris", "lyon"],
        );
        assert!(g.passed());
        assert_eq!(g.extracted.as_deref(), Some("lyon"));
    }

    #[test]
    fn regex_compares_capture_group() {
        let spec = GradeSpec::Regex {
            pattern: r"Answer:\s*(\w+)".into(),
            case_sensitive: false,
        };
        let g = grade(spec.clone(), "blah\nAnswer: Blue", &["blue"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("Blue")));
        assert!(!grade(spec, "Answer: red", &["blue"]).passed());
        let bad = GradeSpec::Regex {
            pattern: "(".into(),
            case_sensitive: false,
        };
        assert!(
            bad.compile()
                .unwrap_err()
                .to_string()
                .contains("does not compile")
        );
    }

    #[test]
    fn number_takes_last_number_with_separators_and_sign() {
        let n = GradeSpec::Number { tolerance: 0.0 };
        let g = grade(
            n.clone(),
            "2 + 3 = 5, so the total is 1,234.50",
            &["1234.5"],
        );
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("1234.5")));
        assert!(grade(n.clone(), "It is -7.", &["-7"]).passed());
        assert!(grade(n.clone(), "It is −7.", &["-7"]).passed());
        assert!(grade(n.clone(), "$3.50", &["3.5"]).passed());
        // Scientific notation is one number, not its exponent.
        let g = grade(n.clone(), "It is 1e3.", &["1000"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("1000")));
        assert!(grade(n.clone(), "Avogadro: 6.02E23", &["6.02e23"]).passed());
        assert!(grade(n.clone(), "about 2.5e-4 m", &["0.00025"]).passed());
        assert!(grade(n.clone(), "x = −1.5e−2", &["-0.015"]).passed());
        assert!(grade(n.clone(), "5 eggs", &["5"]).passed());
        assert!(!grade(n.clone(), "no digits", &["3"]).passed());
        assert!(!grade(n, "4", &["3"]).passed());
        let tol = GradeSpec::Number { tolerance: 0.01 };
        assert!(grade(tol, "3.141", &["3.14"]).passed());
    }

    #[test]
    fn choice_finds_the_letter() {
        for (output, letter) in [
            ("B", 'B'),
            ("(c)", 'C'),
            ("D.", 'D'),
            ("A) Billing", 'A'),
            ("The customer mentions a refund. Answer: C", 'C'),
            ("**Answer:** (B)", 'B'),
            ("I think it is A, no wait. The answer is D.", 'D'),
            ("Category: b", 'B'),
            ("It must be (A) because…", 'A'),
        ] {
            assert_eq!(extract_choice(output), Some(letter), "{output}");
        }
        assert_eq!(extract_choice("I am not sure"), None);
        assert!(grade(GradeSpec::Choice, "Answer: b", &["B"]).passed());
        assert!(!grade(GradeSpec::Choice, "Answer: A", &["B"]).passed());
    }

    #[test]
    fn json_reads_path_and_strips_fence() {
        let spec = GradeSpec::Json {
            path: "result.items[1].name".into(),
            case_sensitive: false,
        };
        let out = "```json\n{\"result\": {\"items\": [{\"name\": \"a\"}, {\"name\": \"B\"}]}}\n```";
        let g = grade(spec, out, &["b"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("B")));
        let n = GradeSpec::Json {
            path: "$.n".into(),
            case_sensitive: false,
        };
        assert!(grade(n.clone(), r#"{"n": 5.0}"#, &["5"]).passed());
        let g = grade(n, "not json", &["5"]);
        assert_eq!((g.passed(), g.extracted), (false, None));
    }

    #[test]
    fn expected_values_are_checked_against_the_grader() {
        let number = GradeSpec::Number { tolerance: 0.0 }.compile().unwrap();
        assert!(number.check_expected("12").is_ok());
        assert!(number.check_expected("twelve").is_err());
        assert!(Grader::Choice.check_expected("AB").is_err());
        // A capture group that can only take digits can never capture "four".
        let regex = |p: &str| {
            GradeSpec::Regex {
                pattern: p.into(),
                case_sensitive: false,
            }
            .compile()
            .unwrap()
        };
        assert!(regex(r"Answer: (\d+)").check_expected("4").is_ok());
        let e = regex(r"Answer: (\d+)")
            .check_expected("four")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("can never be what the regex's first group"),
            "{e}"
        );
        assert!(
            regex(r"Team: (billing|shipping)")
                .check_expected("Billing")
                .is_ok()
        );
        assert!(
            regex(r"Team: (billing|shipping)")
                .check_expected("sales")
                .is_err()
        );
        // Without a group the expected value is not compared: nothing to check.
        assert!(regex(r"done\.").check_expected("anything").is_ok());
    }
}
