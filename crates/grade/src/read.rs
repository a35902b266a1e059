//! A variant's reading of its answer, applied (`extract:`, docs/guide/scorers.md, "A
//! variant reads its own answer"): the text the bench's scorer sees in place of the whole
//! answer, or why the reading found nothing — an answer that is then scored wrong, never
//! scored on its raw text.

use serde_json::Value;

use super::structured::extract_json;
use promptgauge_suite::cases::Vars;
use promptgauge_suite::extract::Extract;

/// Why a reading found nothing in an answer, in a person's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NothingRead(pub String);

/// What `extract` reads in `answer` (trimmed), the case's `vars` at hand for a template.
pub fn read(extract: &Extract, answer: &str, vars: &Vars) -> Result<String, NothingRead> {
    let nothing = |why: String| Err(NothingRead(why));
    let got = match extract {
        Extract::Regex(p) => match p.regex().captures(answer) {
            None => return nothing(format!("no match of `{}`", p.as_str())),
            Some(caps) if caps.len() == 1 => caps.get(0).map(|m| m.as_str().to_string()),
            Some(caps) => caps
                .iter()
                .skip(1)
                .flatten()
                .next()
                .map(|m| m.as_str().to_string()),
        },
        Extract::Json(pointer) => match extract_json(answer) {
            None => return nothing("the answer holds no JSON".into()),
            Some(doc) => match doc.pointer(pointer) {
                None => return nothing(format!("its JSON has nothing at {pointer}")),
                Some(Value::Null) => return nothing(format!("its JSON is null at {pointer}")),
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            },
        },
        Extract::Tag(tag) => match inside_last(answer, tag) {
            None => return nothing(format!("no <{tag}> in the answer")),
            some => some,
        },
        Extract::LastLine => answer
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .map(String::from),
        Extract::Template(t) => {
            let context = serde_json::json!({
                "answer": answer,
                "json": extract_json(answer),
                "vars": vars,
            });
            match promptgauge_suite::template::render_capped(&t.template(), context) {
                Ok(text) => Some(text),
                Err(e) => return nothing(format!("the template failed: {e}")),
            }
        }
    };
    match got.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => Ok(text.to_string()),
        _ => nothing("it read nothing but blank text".into()),
    }
}

/// The text inside the last `<tag>` (its name in any case), to its `</tag>` or, unclosed
/// (a model stopped at the closing tag), to the end.
fn inside_last(answer: &str, tag: &str) -> Option<String> {
    // ASCII lowering keeps every byte where it was, so positions found in it hold in `answer`.
    let lower = answer.to_ascii_lowercase();
    let open = format!("<{}>", tag.to_ascii_lowercase());
    let close = format!("</{}>", tag.to_ascii_lowercase());
    let start = lower.rfind(&open)? + open.len();
    let end = lower[start..]
        .find(&close)
        .map_or(answer.len(), |e| start + e);
    Some(answer[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn x(v: Value) -> Extract {
        Extract::from_value(&v).unwrap()
    }

    fn read_of(v: Value, answer: &str) -> Result<String, NothingRead> {
        let vars = Vars(vec![("field".into(), json!("choice"))]);
        read(&x(v), answer, &vars)
    }

    #[test]
    fn a_regex_reads_its_first_group_that_took_part_or_the_whole_match() {
        let r = json!({"regex": "Answer: ([A-D])"});
        assert_eq!(read_of(r.clone(), "I think so.\nAnswer: B").unwrap(), "B");
        assert!(read_of(r, "B").unwrap_err().0.contains("no match"));
        let either = json!({"regex": "A=(\\d+)|B=(\\d+)"});
        assert_eq!(read_of(either, "B=12").unwrap(), "12");
        assert_eq!(read_of(json!({"regex": "\\d+"}), "x 42 y").unwrap(), "42");
        let empty = json!({"regex": "Answer:(\\s*)$"});
        assert!(read_of(empty, "Answer: ").unwrap_err().0.contains("blank"));
    }

    #[test]
    fn a_json_pointer_reads_json_whole_fenced_or_in_prose() {
        let j = json!({"json": "/answer"});
        assert_eq!(read_of(j.clone(), r#"{"answer": "B"}"#).unwrap(), "B");
        assert_eq!(
            read_of(j.clone(), "```json\n{\"answer\": 12}\n```").unwrap(),
            "12"
        );
        assert_eq!(
            read_of(j.clone(), "Here: {\"answer\": \"C\", \"why\": \"…\"} done").unwrap(),
            "C"
        );
        assert!(read_of(j.clone(), "B").unwrap_err().0.contains("no JSON"));
        assert!(
            read_of(j.clone(), r#"{"choice": "B"}"#)
                .unwrap_err()
                .0
                .contains("nothing at /answer")
        );
        assert!(
            read_of(j, r#"{"answer": null}"#)
                .unwrap_err()
                .0
                .contains("null")
        );
        let nested = json!({"json": "/items/1"});
        assert_eq!(
            read_of(nested, r#"{"items": [1, {"a": 2}]}"#).unwrap(),
            r#"{"a":2}"#
        );
    }

    #[test]
    fn a_tag_reads_the_last_one_in_any_case_closed_or_not() {
        let t = json!({"tag": "answer"});
        let two = "I could write <answer>A</answer>, but no.\n<ANSWER> B </Answer>";
        assert_eq!(read_of(t.clone(), two).unwrap(), "B");
        assert_eq!(read_of(t.clone(), "Thinking… <answer>C").unwrap(), "C");
        assert!(
            read_of(t.clone(), "C")
                .unwrap_err()
                .0
                .contains("no <answer>")
        );
        assert!(
            read_of(t, "<answer> </answer>")
                .unwrap_err()
                .0
                .contains("blank")
        );
    }

    #[test]
    fn the_last_line_is_the_last_non_blank_one() {
        let l = json!("last_line");
        assert_eq!(read_of(l.clone(), "Let me see.\n\n  B  \n\n").unwrap(), "B");
        assert!(read_of(l, " \n ").unwrap_err().0.contains("blank"));
    }

    #[test]
    fn a_template_reads_the_answer_its_json_and_the_case_s_vars_on_fuel() {
        let t = json!({"template": "{{ json[vars.field] | upper }}"});
        assert_eq!(read_of(t.clone(), r#"{"choice": "b"}"#).unwrap(), "B");
        // No JSON: `json` is none, and reading a field of none fails the reading.
        assert!(
            read_of(t, "b")
                .unwrap_err()
                .0
                .contains("the template failed")
        );
        let words = json!({"template": "{{ answer | trim | lower }}"});
        assert_eq!(read_of(words, "  YES ").unwrap(), "yes");
        let bomb = json!({"template": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"});
        assert!(
            read_of(bomb, "x")
                .unwrap_err()
                .0
                .contains("the template failed")
        );
    }
}
