//! The simulator answers in the format a variant reads (`extract:`, docs/guide/simulator.md):
//! its answer inside the variant's tag, at its JSON pointer, on a last line after some
//! working, or where its regex's first group would capture it — so variants that differ
//! only in format differ in the simulator as they would with a model that follows them.
//! A dressed answer is kept only if the variant's reading gives the answer back; a template
//! cannot be turned around, and its answer stays plain.

use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Value, json};

use promptgauge_suite::cases::Vars;
use promptgauge_suite::extract::Extract;

/// `answer` in the format `reading` reads, or as it is when that cannot be done.
pub(crate) fn dress(answer: &str, reading: &Extract) -> String {
    let dressed = match reading {
        Extract::Tag(tag) => Some(format!("Let me work it out.\n<{tag}>{answer}</{tag}>")),
        Extract::Json(pointer) => Some(at_pointer(pointer, answer).to_string()),
        Extract::LastLine => Some(format!("Working it out step by step.\n{answer}")),
        Extract::Regex(p) => regex_syntax::Parser::new()
            .parse(p.as_str())
            .ok()
            .map(|hir| {
                let mut out = String::new();
                fill(&hir, answer, &mut out);
                out
            }),
        Extract::Template(_) => None,
    };
    let gives_back = |d: &String| {
        promptgauge_grade::read::read(reading, d, &Vars::default()).ok()
            == Some(answer.trim().into())
    };
    dressed
        .filter(gives_back)
        .unwrap_or_else(|| answer.to_string())
}

/// `{"a": {"b": answer}}` for `/a/b`: the answer as JSON when it is JSON (a number, an
/// object), else as text.
fn at_pointer(pointer: &str, answer: &str) -> Value {
    let value = serde_json::from_str::<Value>(answer.trim())
        .ok()
        .filter(|v| !v.is_string())
        .unwrap_or_else(|| Value::String(answer.to_string()));
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .fold(value, |inner, key| json!({ key: inner }))
}

/// Text the pattern `h` matches, with `answer` where its first group captures.
fn fill(h: &Hir, answer: &str, out: &mut String) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.push_str(&String::from_utf8_lossy(&l.0)),
        HirKind::Class(c) => out.extend(one_of(c)),
        HirKind::Capture(c) if c.index == 1 => out.push_str(answer),
        HirKind::Capture(c) => fill(&c.sub, answer, out),
        HirKind::Repetition(r) => {
            let times = if r.min == 0 && holds_group(&r.sub) {
                1
            } else {
                r.min
            };
            for _ in 0..times.min(16) {
                fill(&r.sub, answer, out);
            }
        }
        HirKind::Concat(hs) => hs.iter().for_each(|h| fill(h, answer, out)),
        HirKind::Alternation(hs) => {
            if let Some(h) = hs.iter().find(|h| holds_group(h)).or(hs.first()) {
                fill(h, answer, out);
            }
        }
    }
}

/// Whether the first capture group lies in `h`.
fn holds_group(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Capture(c) => c.index == 1 || holds_group(&c.sub),
        HirKind::Repetition(r) => holds_group(&r.sub),
        HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().any(holds_group),
        _ => false,
    }
}

/// A character of a class: a space where it takes one (`\s`), else its first.
fn one_of(c: &Class) -> Option<char> {
    match c {
        Class::Unicode(u) => {
            let space = u
                .ranges()
                .iter()
                .any(|r| r.start() <= ' ' && ' ' <= r.end());
            if space {
                Some(' ')
            } else {
                u.ranges().first().map(|r| r.start())
            }
        }
        Class::Bytes(b) => b
            .ranges()
            .first()
            .map(|r| char::from(r.start()))
            .filter(char::is_ascii),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(v: Value) -> Extract {
        Extract::from_value(&v).unwrap()
    }

    #[test]
    fn an_answer_is_dressed_as_each_reading_reads_it_back() {
        for v in [
            json!({"tag": "answer"}),
            json!({"json": "/result/choice"}),
            json!("last_line"),
            json!({"regex": "(?i)final answer:\\s*\\(?([A-D])\\)?"}),
            json!({"regex": "^Answer: (\\w+)$"}),
        ] {
            let x = reading(v);
            let dressed = dress("B", &x);
            assert_ne!(dressed, "B", "{x:?}");
            assert_eq!(
                promptgauge_grade::read::read(&x, &dressed, &Vars::default()).unwrap(),
                "B"
            );
        }
        assert_eq!(dress("12", &reading(json!({"json": "/n"}))), r#"{"n":12}"#);
    }

    #[test]
    fn what_cannot_be_turned_around_stays_plain() {
        let t = reading(json!({"template": "{{ answer | upper }}"}));
        assert_eq!(dress("b", &t), "b");
        // A pattern whose group cannot hold the answer.
        assert_eq!(dress("B", &reading(json!({"regex": "n=(\\d+)"}))), "B");
    }
}
