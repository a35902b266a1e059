//! promptfoo's output transforms (`options.transform`, `defaultTest.options.transform`,
//! the older `postprocess`) and `transformVars` (docs/guide/import-promptfoo.md,
//! "Transforms"). A transform is JavaScript; the one-line ones people write most map onto
//! a reading of the answer (`extract:`, docs/guide/files.md): `output.trim()`,
//! `output.toLowerCase()`, `JSON.parse(output).answer`, `output.split('\n').pop()`. A
//! reading is per variant, so only a transform every test shares (defaultTest's, or the
//! same one on each test) becomes the bench's `extract:`; any other is named, saying its
//! asserts see the untransformed output.

use serde_json::{Map, Value, json};

use super::bench::Import;

/// A transform as the reading that reads the answer as it does, and what differs, if
/// anything (a reading trims what it reads; it finds JSON in a fence or prose too).
pub(super) fn reading_of(js: &str) -> Option<(Value, Option<&'static str>)> {
    let mut s = js.trim();
    s = s.strip_prefix("return ").unwrap_or(s).trim();
    s = s.strip_suffix(';').unwrap_or(s).trim();
    let (trimmed, rest) = match (s.strip_prefix("output.trim()"), s.strip_prefix("output")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => return json_reading(s),
    };
    const TRIMS: &str = "the reading trims what it reads (promptfoo's transform does not)";
    let template = |filter: &str| json!({"template": format!("{{{{ answer | {filter} }}}}")});
    Some(match rest.strip_suffix(".trim()").unwrap_or(rest) {
        "" => (template("trim"), None),
        ".toLowerCase()" => (template("lower"), (!trimmed).then_some(TRIMS)),
        ".toUpperCase()" => (template("upper"), (!trimmed).then_some(TRIMS)),
        ".split('\\n').pop()" | ".split(\"\\n\").pop()" => (
            json!("last_line"),
            (!trimmed).then_some(
                "`last_line` reads the last line that is not blank, trimmed (promptfoo's transform gives an empty text for an output ending in a newline)",
            ),
        ),
        _ => return json_reading(s),
    })
}

/// `JSON.parse(output).a.b`, `JSON.parse(output)['a'][0]`: the JSON pointer reading.
fn json_reading(s: &str) -> Option<(Value, Option<&'static str>)> {
    let mut rest = s.strip_prefix("JSON.parse(output)")?;
    let mut pointer = String::new();
    while !rest.is_empty() {
        let (key, after) = if let Some(r) = rest.strip_prefix('.') {
            let end = r
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(r.len());
            (r[..end].to_string(), &r[end..])
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            let key = if inner.chars().all(|c| c.is_ascii_digit()) && !inner.is_empty() {
                inner.to_string()
            } else {
                let quoted = inner
                    .strip_prefix('\'')
                    .and_then(|i| i.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|i| i.strip_suffix('"')))?;
                if quoted.contains('\\') {
                    return None;
                }
                quoted.to_string()
            };
            (key, &r[end + 1..])
        } else {
            return None;
        };
        if key.is_empty() {
            return None;
        }
        pointer.push('/');
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        rest = after;
    }
    if pointer.is_empty() {
        return None;
    }
    Some((
        json!({ "json": pointer }),
        Some(
            "the reading finds the JSON in a Markdown fence or in prose too, where promptfoo's JSON.parse throws and fails the test; a value that is not text is read as its JSON",
        ),
    ))
}

impl Import {
    /// `options` (a test's or defaultTest's, named `whose`): its transform, returned as
    /// written; `transformVars` and every other option named in the notes.
    pub(super) fn options(&mut self, options: Option<&Value>, whose: &str) -> Option<String> {
        let options: Map<String, Value> = match options {
            None | Some(Value::Null) => return None,
            Some(Value::Object(o)) => o.clone(),
            Some(other) => {
                self.notes.push(format!(
                    "{whose}: `options` is {}, not a mapping: not carried over",
                    promptgauge_client::protocol::truncate(&other.to_string(), 60)
                ));
                return None;
            }
        };
        let mut transform = None;
        for (key, value) in &options {
            let code = value.as_str().map(shown).unwrap_or_default();
            match key.as_str() {
                "transform" | "postprocess" if value.is_string() => {
                    transform = value.as_str().map(String::from);
                }
                "transformVars" => self.notes.push(format!(
                    "{whose}: `options.transformVars` (`{code}`) is JavaScript promptgauge does not run: the cases hold the variables untransformed, and the prompts see them so"
                )),
                other => self
                    .notes
                    .push(format!("{whose}: `options.{other}` was not carried over")),
            }
        }
        transform
    }

    /// The transforms read: defaultTest's, and each test's (by test number). One every test
    /// shares becomes the bench's reading when it maps onto one; any other is named.
    pub(super) fn transforms(&mut self, default: Option<String>, tests: Vec<(usize, String)>) {
        let shared = match (&default, tests.first()) {
            (Some(d), _) if tests.is_empty() => Some((d.clone(), "defaultTest's")),
            (None, Some((_, t)))
                if tests.len() == self.tests_read && tests.iter().all(|(_, x)| x == t) =>
            {
                Some((t.clone(), "every test's"))
            }
            _ => None,
        };
        if let Some((js, whose)) = shared {
            match reading_of(&js) {
                Some((reading, caveat)) => {
                    if let Some(c) = caveat {
                        self.notes.push(format!(
                            "{whose} `options.transform` (`{}`) became the bench's reading `extract: {reading}`; {c}",
                            shown(&js)
                        ));
                    }
                    self.extract = Some(reading);
                }
                None => self.notes.push(format!(
                    "{whose} `options.transform` (`{}`) is JavaScript promptgauge does not translate: every assert sees the untransformed output",
                    shown(&js)
                )),
            }
            return;
        }
        if let Some(d) = default {
            self.notes.push(format!(
                "defaultTest's `options.transform` (`{}`) is not carried over, as some tests have their own: every assert sees the untransformed output",
                shown(&d)
            ));
        }
        for (n, js) in tests {
            self.notes.push(format!(
                "test {n}: its `options.transform` (`{}`) is not carried over (a bench reads answers per variant, not per test, and not every test has it): its asserts see the untransformed output",
                shown(&js)
            ));
        }
    }
}

/// Code as a note shows it: one line, cut.
fn shown(code: &str) -> String {
    promptgauge_client::protocol::truncate(
        &code.split_whitespace().collect::<Vec<_>>().join(" "),
        80,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_transforms_are_readings() {
        let r = |js: &str| reading_of(js).map(|(v, c)| (v, c.is_some()));
        assert_eq!(
            r("output.trim()"),
            Some((json!({"template": "{{ answer | trim }}"}), false))
        );
        assert_eq!(
            r("return output.trim().toLowerCase();"),
            Some((json!({"template": "{{ answer | lower }}"}), false))
        );
        assert_eq!(
            r("output.toUpperCase()"),
            Some((json!({"template": "{{ answer | upper }}"}), true))
        );
        assert_eq!(
            r("output.split('\\n').pop()"),
            Some((json!("last_line"), true))
        );
        assert_eq!(
            r("output.trim().split(\"\\n\").pop()"),
            Some((json!("last_line"), false))
        );
        assert_eq!(
            r("JSON.parse(output).answer"),
            Some((json!({"json": "/answer"}), true))
        );
        assert_eq!(
            r("JSON.parse(output)['a/b'].items[0]"),
            Some((json!({"json": "/a~1b/items/0"}), true))
        );
        for other in [
            "output.replace(/x/g, '')",
            "JSON.parse(output)",
            "output.slice(0, 3)",
            "myFn(output)",
            "JSON.parse(output)[k]",
        ] {
            assert_eq!(reading_of(other), None, "{other}");
        }
    }
}
