//! How the simulator answers any bench, not only the example: when it runs inside
//! `promptgauge run`, it is told each job's case (a [`Hint`]) and answers it right with a
//! wording-dependent probability, otherwise with a plausible wrong answer of the same shape
//! (another case's answer, a near-miss number, a JSON object with one field changed, a tool
//! call with a wrong argument). It also judges: a reference-guided judge prompt gets a
//! verdict that is right except with probability `judge_error`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::model::unit;
use promptgauge_grade::Shape;

/// What the simulator is told about the case behind a request.
#[derive(Debug, Clone)]
pub struct Hint {
    /// The case's id: which cases are hard does not depend on the prompt.
    pub case: String,
    pub expected: Vec<String>,
    pub expected_json: Option<Value>,
    pub shape: Shape,
    /// Other cases' answers, for plausible wrong ones.
    pub others: Arc<Vec<String>>,
    /// The files the case attaches: a request that carried none of them cannot know what
    /// they show, and is answered wrong.
    pub files: usize,
    /// The tool calls the case's agent loop scripts, in order (`tool_results:`): the
    /// simulator makes them, one a request, then answers from what they returned.
    pub tool_script: Vec<(String, Value)>,
    /// How the job's variant reads its answer (`extract:`): the simulator answers in that
    /// format where it can be turned around (docs/guide/simulator.md).
    pub reading: Option<promptgauge_suite::extract::Extract>,
}

/// A lookup from an idempotency key to the case behind it.
pub(crate) type Lookup = dyn Fn(&str) -> Option<Hint> + Send + Sync;

/// Looks up the case behind a request by its idempotency key.
#[derive(Clone)]
pub struct Oracle(pub Arc<Lookup>);

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Oracle")
    }
}

/// A tool call the simulator makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub name: String,
    pub arguments: String,
}

/// An answer to a case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Made {
    pub text: String,
    pub calls: Vec<Call>,
}

/// Answers the case of `hint`: right unless `wrong`.
pub(crate) fn answer(hint: &Hint, wrong: bool, tools: Option<&Value>) -> Made {
    let text = |t: String| Made {
        text: t,
        calls: Vec::new(),
    };
    let first = hint.expected.first().cloned().unwrap_or_default();
    match &hint.shape {
        Shape::ToolCall => tool_calls(hint, wrong, tools),
        Shape::Json => {
            let mut doc = hint
                .expected_json
                .clone()
                .or_else(|| serde_json::from_str(&first).ok())
                .unwrap_or_else(|| json!({}));
            if wrong {
                change_one_field(&mut doc, &hint.case);
            }
            text(said(hint, doc.to_string(), None))
        }
        Shape::JsonPath(path) => {
            let value = if wrong { other_answer(hint) } else { first };
            text(said(hint, json_at(path, &value).to_string(), None))
        }
        Shape::Number => {
            let value = if wrong {
                near_miss(&first, &hint.case)
            } else {
                first
            };
            let sentence = format!("The answer is {value}.");
            text(said(hint, value, Some(sentence)))
        }
        Shape::Choice => {
            let letter = first.trim().trim_matches(['(', ')', '.']).to_uppercase();
            let letter = if wrong {
                let c = letter.chars().next().unwrap_or('A');
                let next = if c >= 'D' { 'A' } else { (c as u8 + 1) as char };
                next.to_string()
            } else {
                letter
            };
            let sentence = format!("Answer: {letter}");
            text(said(hint, letter, Some(sentence)))
        }
        Shape::Text => text(said(
            hint,
            if wrong { other_answer(hint) } else { first },
            None,
        )),
    }
}

/// The answer as the variant reads it (`bare`, dressed in its format), or without a
/// reading the `sentence` a model would say it in (`bare` itself when none is given).
fn said(hint: &Hint, bare: String, sentence: Option<String>) -> String {
    match &hint.reading {
        Some(reading) => super::dress::dress(&bare, reading),
        None => sentence.unwrap_or(bare),
    }
}

/// Another case's answer, or a near miss when there is none.
fn other_answer(hint: &Hint) -> String {
    let first = hint.expected.first().cloned().unwrap_or_default();
    let candidates: Vec<&String> = hint
        .others
        .iter()
        .filter(|o| !hint.expected.contains(o))
        .collect();
    if candidates.is_empty() {
        return format!("not {first}");
    }
    let i = (unit(&[&hint.case, "other"]) * candidates.len() as f64) as usize;
    candidates[i.min(candidates.len() - 1)].clone()
}

/// A number one off (or a word changed, when it is not a number).
fn near_miss(expected: &str, case: &str) -> String {
    match promptgauge_grade::parse_number(expected) {
        Some(x) => {
            let step = if unit(&[case, "sign"]) < 0.5 {
                1.0
            } else {
                -1.0
            };
            let y = x + step * if x.fract() == 0.0 { 1.0 } else { 0.5 };
            if y.fract() == 0.0 {
                format!("{}", y as i64)
            } else {
                format!("{y}")
            }
        }
        None => format!("not {expected}"),
    }
}

/// `{"a": {"b": value}}` for the path `a.b` (indices become objects' keys).
fn json_at(path: &str, value: &str) -> Value {
    let parsed: Value = promptgauge_grade::parse_number(value)
        .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
        .unwrap_or_else(|| Value::String(value.to_string()));
    path.trim_start_matches('$')
        .split(['.', '/', '[', ']'])
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .fold(parsed, |inner, key| json!({ key: inner }))
}

/// Changes one leaf of a JSON document (which one depends on the case).
fn change_one_field(doc: &mut Value, case: &str) {
    let mut leaves = Vec::new();
    collect(doc, &mut Vec::new(), &mut leaves);
    if leaves.is_empty() {
        *doc = json!({"answer": null});
        return;
    }
    let i = ((unit(&[case, "field"]) * leaves.len() as f64) as usize).min(leaves.len() - 1);
    let mut target = &mut *doc;
    for step in &leaves[i] {
        target = match step {
            ReplyStep::Key(k) => &mut target[k.as_str()],
            ReplyStep::Index(n) => &mut target[*n],
        };
    }
    *target = match target.take() {
        Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 1.0),
        Value::Bool(b) => json!(!b),
        Value::String(s) => json!(format!("{s} (unsure)")),
        _ => json!("unknown"),
    };
}

enum ReplyStep {
    Key(String),
    Index(usize),
}

fn collect(v: &Value, path: &mut Vec<ReplyStep>, out: &mut Vec<Vec<ReplyStep>>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(ReplyStep::Key(k.clone()));
                collect(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                path.push(ReplyStep::Index(i));
                collect(child, path, out);
                path.pop();
            }
        }
        _ => out.push(
            path.iter()
                .map(|s| match s {
                    ReplyStep::Key(k) => ReplyStep::Key(k.clone()),
                    ReplyStep::Index(i) => ReplyStep::Index(*i),
                })
                .collect(),
        ),
    }
}

/// The expected calls (or, wrong, one with a changed argument); without a hint, the first
/// tool offered, with no arguments.
fn tool_calls(hint: &Hint, wrong: bool, tools: Option<&Value>) -> Made {
    let expected = hint.expected_json.clone().or_else(|| {
        hint.expected
            .first()
            .and_then(|t| serde_json::from_str(t).ok())
    });
    let list = match expected {
        Some(Value::Array(items)) => items,
        Some(one) => vec![one],
        None => Vec::new(),
    };
    let mut calls: Vec<Call> = list
        .iter()
        .map(|c| Call {
            name: c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string(),
            arguments: match c.get("arguments") {
                // Already encoded, as the API sends them: sent as written.
                Some(Value::String(text)) => text.clone(),
                Some(v) => v.to_string(),
                None => "{}".to_string(),
            },
        })
        .collect();
    if calls.is_empty() {
        return first_tool(tools);
    }
    if wrong {
        let i = ((unit(&[&hint.case, "call"]) * calls.len() as f64) as usize).min(calls.len() - 1);
        let mut args: Value =
            serde_json::from_str(&calls[i].arguments).unwrap_or_else(|_| json!({}));
        change_one_field(&mut args, &hint.case);
        if args == json!({"answer": null}) {
            calls[i].name = format!("{}_v2", calls[i].name);
        } else {
            calls[i].arguments = args.to_string();
        }
    }
    Made {
        text: String::new(),
        calls,
    }
}

/// Without a case to go by: call the first tool offered, with no arguments.
pub(crate) fn first_tool(tools: Option<&Value>) -> Made {
    let name = tools
        .and_then(|t| t.pointer("/0/function/name"))
        .and_then(Value::as_str)
        .unwrap_or("tool");
    Made {
        text: String::new(),
        calls: vec![Call {
            name: name.to_string(),
            arguments: "{}".into(),
        }],
    }
}

/// A reference-guided judge prompt, as promptgauge's built-in judge writes it (tags carrying
/// a marker) or as a custom prompt may (plain `<answer>` tags).
pub(crate) fn is_judge_prompt(prompt: &str) -> bool {
    let m = tag_marker(prompt);
    let has = |tag: &str| prompt.contains(&format!("<{tag}{m}>"));
    (has("reference") || has("criteria")) && has("answer")
}

/// The marker of the built-in prompt's tags (`-3f9a…`, as its first sentence names it), or
/// none for plain tags.
fn tag_marker(prompt: &str) -> String {
    prompt
        .split_once("enclosed in tags marked with ")
        .and_then(|(_, rest)| rest.split([',', ' ']).next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_hexdigit()))
        .map_or(String::new(), |m| format!("-{m}"))
}

/// The text of the last `tag` block, as a judge that reads the last block would: with the
/// marker, only a block that carries it counts.
fn between(text: &str, tag: &str) -> String {
    let m = tag_marker(text);
    let open = format!("<{tag}{m}>");
    let close = format!("</{tag}{m}>");
    text.rsplit_once(&open)
        .and_then(|(_, rest)| rest.split_once(&close))
        .map_or(String::new(), |(inside, _)| inside.trim().to_string())
}

/// What the simulated judge replies: right about the answer except with probability
/// `judge_error`; JSON when asked for it, else a last `VERDICT:` (or `SCORE:`) line.
pub(crate) fn judge(prompt: &str, judge_error: f64, json_mode: bool) -> String {
    let reference = between(prompt, "reference");
    let answer = between(prompt, "answer");
    let (reference, answer) = (reference.as_str(), answer.as_str());
    let norm = |s: &str| {
        s.to_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (a, refs) = (
        norm(answer),
        reference
            .lines()
            .map(norm)
            .filter(|r| !r.is_empty())
            .collect::<Vec<_>>(),
    );
    // Criteria alone (no reference): the simulator cannot read them, so it passes about
    // seven answers in ten, the same ones every time.
    // (The built-in prompt's tags carry its marker: `between` reads them either way.)
    let criteria = between(prompt, "criteria");
    let by_criteria = refs.is_empty() && !criteria.is_empty();
    // A JSON answer equal to a JSON reference, however either is spaced.
    let json = |s: &str| serde_json::from_str::<Value>(s.trim()).ok();
    let same_json = json(answer).is_some_and(|a| json(reference) == Some(a));
    let right = (by_criteria && unit(&[answer, &criteria]) < 0.7)
        || same_json
        || refs.iter().any(|r| {
            a == *r
                || (!r.is_empty() && a.contains(r.as_str()))
                || matches!(
                    (promptgauge_grade::last_number(&a), promptgauge_grade::parse_number(r)),
                    (Some(x), Some(y)) if x == y
                )
        });
    let mistaken = unit(&[answer, reference, "judge"]) < judge_error;
    let verdict = right != mistaken;
    let reason = if verdict {
        "The answer agrees with the reference."
    } else {
        "The answer does not agree with the reference."
    };
    let scaled = prompt.contains("SCORE:");
    match (scaled, json_mode) {
        (false, true) => {
            json!({"verdict": if verdict { "yes" } else { "no" }, "reason": reason}).to_string()
        }
        (false, false) => format!("{reason}\nVERDICT: {}", if verdict { "yes" } else { "no" }),
        (true, true) => json!({"score": if verdict { 9 } else { 2 }, "reason": reason}).to_string(),
        (true, false) => format!("{reason}\nSCORE: {}", if verdict { 9 } else { 2 }),
    }
}

/// A JSON reply, when the request asked for one and the text is not JSON already.
pub(crate) fn as_json(text: &str) -> String {
    if serde_json::from_str::<Map<String, Value>>(text.trim()).is_ok() {
        text.to_string()
    } else {
        json!({ "answer": text }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_judge_passes_a_json_answer_equal_to_the_reference_however_spaced() {
        let prompt = "<reference>\n{\"category\": \"technical\", \"priority\": \"high\"}\n</reference>\n<answer>{\"priority\":\"high\",\"category\":\"technical\"}</answer>\nVERDICT:";
        assert!(judge(prompt, 0.0, false).ends_with("VERDICT: yes"));
        let wrong = prompt.replace("\"high\",", "\"low\",");
        assert!(judge(&wrong, 0.0, false).ends_with("VERDICT: no"));
    }

    fn hint(shape: Shape, expected: &str, json: Option<Value>) -> Hint {
        Hint {
            case: "c-1".into(),
            expected: vec![expected.into()],
            expected_json: json,
            shape,
            others: Arc::new(vec!["billing".into(), "shipping".into()]),
            files: 0,
            tool_script: Vec::new(),
            reading: None,
        }
    }

    #[test]
    fn a_wrong_json_answer_gets_one_field_wrong_which_one_by_the_case() {
        let expected = json!({"category": "billing", "priority": "high", "total": 12});
        let mut changed = std::collections::BTreeMap::new();
        for i in 0..40 {
            let mut h = hint(Shape::Json, "", Some(expected.clone()));
            h.case = format!("t-{i}");
            let right: Value = serde_json::from_str(&answer(&h, false, None).text).unwrap();
            assert_eq!(right, expected);
            let wrong: Value = serde_json::from_str(&answer(&h, true, None).text).unwrap();
            let off: Vec<&String> = expected
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| wrong[k.as_str()] != **v)
                .map(|(k, _)| k)
                .collect();
            assert_eq!(off.len(), 1, "{wrong}");
            // The same case's wrong answer is the same every time (seeded by the case).
            assert_eq!(answer(&h, true, None).text, wrong.to_string());
            *changed.entry(off[0].clone()).or_insert(0) += 1;
        }
        // Every field is the wrong one in some case: each field's accuracy follows the
        // variant's.
        assert_eq!(changed.len(), 3, "{changed:?}");
    }

    #[test]
    fn right_and_wrong_answers_have_the_expected_shape() {
        let h = hint(Shape::Text, "shipping", None);
        assert_eq!(answer(&h, false, None).text, "shipping");
        assert_eq!(answer(&h, true, None).text, "billing");
        let n = hint(Shape::Number, "42", None);
        assert_eq!(answer(&n, false, None).text, "The answer is 42.");
        assert!(
            ["The answer is 41.", "The answer is 43."]
                .contains(&answer(&n, true, None).text.as_str())
        );
        let f = hint(Shape::Json, "", Some(json!({"name": "Ada", "age": 36})));
        let wrong: Value = serde_json::from_str(&answer(&f, true, None).text).unwrap();
        assert_ne!(wrong, json!({"name": "Ada", "age": 36}));
        assert_eq!(wrong.as_object().unwrap().len(), 2);
        let t = hint(
            Shape::ToolCall,
            "",
            Some(json!({"name": "get_weather", "arguments": {"city": "Oslo"}})),
        );
        let right = answer(&t, false, None);
        assert_eq!(
            right.calls,
            vec![Call {
                name: "get_weather".into(),
                arguments: r#"{"city":"Oslo"}"#.into()
            }]
        );
        assert_ne!(answer(&t, true, None).calls, right.calls);
        let p = hint(Shape::JsonPath("result.total".into()), "12", None);
        assert_eq!(answer(&p, false, None).text, r#"{"result":{"total":12.0}}"#);
    }

    #[test]
    fn the_judge_is_right_unless_it_errs() {
        let prompt = |a: &str| {
            format!(
                "Question:\n<question>\nq\n</question>\n<reference>\nParis\n</reference>\n<answer>\n{a}\n</answer>\nVERDICT: yes or VERDICT: no"
            )
        };
        assert!(judge(&prompt("It is Paris."), 0.0, false).ends_with("VERDICT: yes"));
        assert!(judge(&prompt("Lyon"), 0.0, true).contains(r#""verdict":"no""#));
        assert!(
            judge(&prompt("Lyon"), 1.0, false).ends_with("VERDICT: yes"),
            "always wrong"
        );
        assert!(is_judge_prompt(&prompt("x")));
    }

    #[test]
    fn criteria_alone_pass_about_seven_answers_in_ten_each_criterion_its_own() {
        // As the built-in prompt writes them: tags carrying its marker.
        let prompt = |answer: &str, criterion: &str| {
            format!(
                "Each part below is enclosed in tags marked with 3f9a0c, one to open it.\n<answer-3f9a0c>\n{answer}\n</answer-3f9a0c>\nCriteria the answer must meet:\n<criteria-3f9a0c>\n{criterion}\n</criteria-3f9a0c>\nVERDICT: yes or VERDICT: no"
            )
        };
        let passes = |criterion: &str| -> Vec<bool> {
            (0..200)
                .map(|i| {
                    let p = prompt(&format!("answer {i}"), criterion);
                    assert!(is_judge_prompt(&p));
                    judge(&p, 0.0, false).ends_with("VERDICT: yes")
                })
                .collect()
        };
        let (warm, short) = (passes("Is warm."), passes("Is short."));
        let share = |v: &[bool]| v.iter().filter(|p| **p).count() as f64 / v.len() as f64;
        assert!((0.6..0.8).contains(&share(&warm)), "{}", share(&warm));
        assert!(
            warm.iter().zip(&short).any(|(a, b)| a != b),
            "each criterion its own"
        );
        assert_eq!(warm, passes("Is warm."), "the same ones every time");
    }
}
