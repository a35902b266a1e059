//! Strict Jinja-style templates: compiled once, checked against every case before any request.

use serde::Serialize;

use super::cases::Case;
use super::error::{FilePos, InputError, InputErrors};
use super::prompts::Variant;

pub use promptgauge_client::ChatMessage;
use promptgauge_client::attachment::Placed;

/// Instructions one rendering of one message may execute: a few-shot prompt looping over
/// fifty examples uses a few thousand; a loop bomb stops here instead of hanging.
pub const FUEL: u64 = 1_000_000;

/// The largest rendered message: beyond any context window, so a template that emits more
/// is a mistake (or a bomb), stopped before it exhausts memory.
pub const MAX_RENDERED_BYTES: usize = 8 << 20;

/// Every variant's message templates, compiled with strict undefined variables.
pub struct Templates {
    env: minijinja::Environment<'static>,
    /// Template names per variant, one per message.
    names: Vec<Vec<String>>,
    /// Names the engine defines (`range`, `namespace`, `dict`, …): not case variables.
    globals: std::collections::HashSet<String>,
    /// Per variant, whether its templates place the cases' files themselves.
    places_files: Vec<bool>,
    /// What the marks `file()` and `files()` leave in a rendering carry, so a case's text
    /// cannot pass for one.
    nonce: String,
}

/// A mark's ends in a rendered message: `file("name")` renders as OPEN nonce `:` name
/// CLOSE, `files()` as OPEN nonce `*` CLOSE (private-use characters no prompt holds).
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// Adds `file(name)` and `files()` to `env`: each renders as a mark, cut out of the message
/// and turned into the case's file at that place once the message is rendered.
fn add_file_functions(env: &mut minijinja::Environment<'static>, nonce: &str) {
    let n = nonce.to_string();
    env.add_function(
        "file",
        move |name: String| -> Result<String, minijinja::Error> {
            if name.contains([OPEN, CLOSE]) {
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "a file's name holds a private-use character",
                ));
            }
            Ok(format!("{OPEN}{n}:{name}{CLOSE}"))
        },
    );
    let n = nonce.to_string();
    env.add_function("files", move || format!("{OPEN}{n}*{CLOSE}"));
}

/// A rendered message's text with its marks cut out, and each mark's files at its place:
/// `file(name)` the case's file of that name, `files()` every file of the case.
fn place(text: &str, nonce: &str, case: &Case) -> Result<(String, Vec<Placed>), String> {
    if !text.contains(OPEN) {
        return Ok((text.to_string(), Vec::new()));
    }
    let start = format!("{OPEN}{nonce}");
    let mut out = String::with_capacity(text.len());
    let mut placed = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&start) {
        out.push_str(&rest[..i]);
        let mark = &rest[i + start.len()..];
        let Some(end) = mark.find(CLOSE) else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let at = out.len();
        match &mark[..end] {
            "*" => placed.extend(case.files.iter().map(|f| Placed {
                at,
                file: f.clone(),
            })),
            name => {
                let name = name.strip_prefix(':').unwrap_or(name);
                let Some(file) = case.files.iter().find(|f| f.name == name) else {
                    let known: Vec<&str> = case.files.iter().map(|f| f.name.as_str()).collect();
                    return Err(format!(
                        "file(\"{name}\"): case `{}` has no file named `{name}` (its files: {})",
                        case.id,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ));
                };
                placed.push(Placed {
                    at,
                    file: file.clone(),
                });
            }
        }
        rest = &mark[end + CLOSE.len_utf8()..];
    }
    out.push_str(rest);
    if out.contains(OPEN) || out.contains(CLOSE) {
        return Err(
            "a file()/files() mark was changed by the template (a filter or a slice over it), so its file cannot be placed: write {{ file(\"name\") }} alone in its braces"
                .into(),
        );
    }
    Ok((out, placed))
}

/// A placement that failed, as the engine's error (what a template's other failures are).
fn placement_error(message: String) -> minijinja::Error {
    minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, message)
}

/// Collects a rendering, refusing to grow past [`MAX_RENDERED_BYTES`].
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_RENDERED_BYTES {
            return Err(std::io::Error::other(format!(
                "the rendered message would exceed {} MiB",
                MAX_RENDERED_BYTES >> 20
            )));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The environment every template renders in — a variant's messages and a judge's prompt
/// alike: undefined variables are errors, and each rendering runs on [`FUEL`].
pub fn strict_environment<'a>() -> minijinja::Environment<'a> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env
}

/// Renders one template within the fuel and size limits.
pub fn render_capped(
    template: &minijinja::Template<'_, '_>,
    context: impl Serialize,
) -> Result<String, minijinja::Error> {
    let mut out = Capped(Vec::new());
    template.render_captured_to(minijinja::value::Serde(context), &mut out)?;
    String::from_utf8(out.0).map_err(|_| {
        minijinja::Error::new(
            minijinja::ErrorKind::BadSerialization,
            "the rendered message is not UTF-8",
        )
    })
}

/// Errors that would repeat for every case: the template itself is at fault.
pub fn is_template_fault(err: &minijinja::Error) -> bool {
    matches!(
        err.kind(),
        minijinja::ErrorKind::OutOfFuel | minijinja::ErrorKind::WriteFailure
    )
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("names", &self.names)
            .finish()
    }
}

fn template_error(variant: &Variant, message: usize, err: &minijinja::Error) -> InputError {
    let base = variant.messages[message].line;
    // Block scalars start one line below their key; either way, point near the message.
    let line = match (base, err.line()) {
        (Some(b), Some(l)) => Some(b + l - 1),
        (b, _) => b,
    };
    let here = line.map_or_else(
        || FilePos::file(&variant.path),
        |l| FilePos::line(&variant.path, l),
    );
    let detail = err.detail().map(|d| format!(": {d}")).unwrap_or_default();
    InputError::new(
        here,
        format!(
            "template error in message {} ({}){detail}",
            message + 1,
            err.kind()
        ),
    )
    .fix("templates use Jinja syntax: {{ variable }}, {% if x %}…{% endif %}")
}

/// A filter or test message `message` of a variant applies that the engine does not have:
/// refused at load, taken or not by any case (the engine would say so only on rendering).
fn unknown_filter(variant: &Variant, message: usize, u: &super::jinja::UnknownName) -> InputError {
    let line = match (variant.messages[message].line, u.line) {
        (Some(b), Some(l)) => Some(b + l - 1),
        (b, _) => b,
    };
    let here = line.map_or_else(
        || FilePos::file(&variant.path),
        |l| FilePos::line(&variant.path, l),
    );
    InputError::new(here, format!("message {} uses an {u}", message + 1)).fix(
        "a template may use Jinja's builtin filters and tests (`upper`, `trim`, `length`, `default`, … `is defined`, `is string`, …)",
    )
}

/// A `file()` or `files()` whose mark a template would change (a filter, an index, an
/// attribute), or one in a variant that sends no files (`files: none`): the file would
/// not be placed, and the prompt would carry the mark's characters instead.
fn file_mark_misuse(variant: &Variant, message: usize) -> Option<InputError> {
    static MISUSE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"\bfiles?\(\s*(?:"[^"]*"|'[^']*')?\s*\)\s*[|\[.~+*%-]"#)
            .expect("a valid pattern")
    });
    let text = &variant.messages[message].content;
    let here = variant.messages[message].line.map_or_else(
        || FilePos::file(&variant.path),
        |l| FilePos::line(&variant.path, l),
    );
    let places = text.contains("file(") || text.contains("files(");
    if variant.no_files && places {
        return Some(
            InputError::new(
                here,
                format!(
                    "message {} places a case's files, but the variant says `files: none`",
                    message + 1
                ),
            )
            .fix("remove `files: none` to send them, or the file()/files() call to leave them out"),
        );
    }
    let found = MISUSE.find(text)?;
    Some(
        InputError::new(
            here,
            format!(
                "message {}: `{}` changes what file()/files() put there, so no file would be placed",
                message + 1,
                found.as_str().trim()
            ),
        )
        .fix("write {{ file(\"name\") }} or {{ files() }} alone in its braces, with no filter, index or operator"),
    )
}

impl Templates {
    /// Compiles every variant's messages; syntax errors name the prompt file and line.
    pub fn compile(variants: &[Variant]) -> Result<Self, InputErrors> {
        let mut env = strict_environment();
        let nonce = format!("{:016x}", rand::random::<u64>());
        add_file_functions(&mut env, &nonce);
        let globals = env.globals().map(|(name, _)| name.to_string()).collect();
        let places_files = variants
            .iter()
            .map(|v| {
                v.messages
                    .iter()
                    .any(|m| m.content.contains("file(") || m.content.contains("files("))
            })
            .collect();
        let mut names = Vec::new();
        let mut errors = Vec::new();
        for (v, variant) in variants.iter().enumerate() {
            let mut per = Vec::new();
            for (m, message) in variant.messages.iter().enumerate() {
                let name = format!("{v}/{m}");
                if message.history {
                    // No template: the case's turns are spliced here as written.
                    per.push(name);
                    continue;
                }
                if let Err(e) = env.add_template_owned(name.clone(), message.content.clone()) {
                    errors.push(template_error(variant, m, &e));
                } else if let Some(e) = file_mark_misuse(variant, m) {
                    errors.push(e);
                } else if let Ok(t) = env.get_template(&name) {
                    errors.extend(
                        super::jinja::unknown_in_template(&env, &t, &[])
                            .iter()
                            .map(|u| unknown_filter(variant, m, u)),
                    );
                }
                per.push(name);
            }
            names.push(per);
        }
        if !errors.is_empty() {
            return Err(InputErrors(errors));
        }
        Ok(Templates {
            env,
            names,
            globals,
            places_files,
            nonce,
        })
    }

    /// Renders every variant against every case; each failure names the prompt, the case and
    /// the missing variable (a variable no case has is named once, at the prompt).
    pub fn check(&self, variants: &[Variant], cases: &[Case]) -> Result<(), InputErrors> {
        let mut errors = Vec::new();
        for (v, variant) in variants.iter().enumerate() {
            errors.extend(history_nowhere(variant, cases));
            for (m, name) in self.names[v].iter().enumerate() {
                if variant.messages[m].history {
                    continue;
                }
                let Ok(template) = self.env.get_template(name) else {
                    continue;
                };
                self.check_message(&template, variant, m, cases, &mut errors);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(InputErrors(errors))
        }
    }

    /// Message `m` of a variant against every case: the variables it uses, then a render.
    fn check_message(
        &self,
        template: &minijinja::Template<'_, '_>,
        variant: &Variant,
        m: usize,
        cases: &[Case],
        errors: &mut Vec<InputError>,
    ) {
        let mut wanted: Vec<String> = template
            .undeclared_variables(false)
            .into_iter()
            .filter(|w| !self.globals.contains(w))
            .collect();
        wanted.sort();
        // A variable no case has is the template's mistake (usually a typo): said
        // once, at the template, not once per case.
        let nowhere: Vec<String> = wanted
            .iter()
            .filter(|w| !cases.iter().any(|c| c.vars.contains_key(w)))
            .cloned()
            .collect();
        for w in &nowhere {
            errors.push(unknown_variable(variant, m, w, cases));
        }
        if !nowhere.is_empty() {
            // Every case would fail to render the same way.
            return;
        }
        for case in cases {
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|w| !case.vars.contains_key(w))
                .collect();
            if !missing.is_empty() {
                errors.push(missing_variables(variant, m, case, &missing));
                continue;
            }
            let content = &variant.messages[m].content;
            if let Some(name) = ["file", "files"]
                .into_iter()
                .find(|n| case.vars.contains_key(n) && content.contains(&format!("{n}(")))
            {
                errors.push(
                    InputError::new(
                        case.location.clone(),
                        format!("case `{}` has a variable named `{name}`, which hides the function {name}() that message {} of variant `{}` places files with", case.id, m + 1, variant.name),
                    )
                    .fix(format!("rename the case's variable `{name}` (e.g. `{name}_name`)")),
                );
                continue;
            }
            let rendered = render_capped(template, &case.vars)
                .and_then(|text| place(&text, &self.nonce, case).map_err(placement_error));
            if let Err(e) = rendered {
                let runaway = is_template_fault(&e);
                let mut error = render_error(variant, m, case, &e);
                if e.detail().is_some_and(|d| d.contains("has no file named")) {
                    error = error.fix("give the case a file of that name (a map under `files:` names them: {\"receipt\": \"r.png\"}), or place one it has");
                }
                errors.push(error);
                if runaway {
                    // Every other case would fail the same way: say it once.
                    break;
                }
            }
        }
    }

    /// The chat messages for one variant and case.
    pub fn render(
        &self,
        variant: usize,
        case: &Case,
        roles: &Variant,
    ) -> Result<Vec<ChatMessage>, minijinja::Error> {
        let mut out = Vec::with_capacity(roles.messages.len() + case.messages.len());
        // The variant's own last user message (else its last message): where the case's
        // files go when its templates do not place them.
        let mut last_own = None;
        for (name, message) in self.names[variant].iter().zip(&roles.messages) {
            if message.history {
                out.extend(case.messages.iter().map(|m| match roles.no_files {
                    true => ChatMessage {
                        files: Vec::new(),
                        ..m.clone()
                    },
                    false => m.clone(),
                }));
                continue;
            }
            let text = render_capped(&self.env.get_template(name)?, &case.vars)?;
            let (content, files) = match roles.no_files {
                // Marks and all, nothing is placed: the text alone.
                true => (
                    place(&text, &self.nonce, case).map_err(placement_error)?.0,
                    Vec::new(),
                ),
                false => place(&text, &self.nonce, case).map_err(placement_error)?,
            };
            if message.role == "user" || last_own.is_none_or(|i: usize| out[i].role != "user") {
                last_own = Some(out.len());
            }
            let mut m = ChatMessage::new(message.role.clone(), content);
            m.files = files;
            out.push(m);
        }
        if !roles.no_files
            && !self.places_files[variant]
            && !case.files.is_empty()
            && let Some(m) = last_own.and_then(|i| out.get_mut(i))
        {
            let at = m.content.len();
            m.files.extend(case.files.iter().map(|f| Placed {
                at,
                file: f.clone(),
            }));
        }
        Ok(out)
    }
}

/// A case's earlier turns must go somewhere: silently dropping them would measure a
/// different prompt than the one the case describes. The first such case, when the
/// variant has no `- history` entry.
fn history_nowhere(variant: &Variant, cases: &[Case]) -> Option<InputError> {
    if variant.messages.iter().any(|m| m.history) {
        return None;
    }
    let case = cases.iter().find(|c| !c.messages.is_empty())?;
    Some(
        InputError::new(
            case.location.clone(),
            format!(
                "case `{}` has earlier turns (`messages`), but variant `{}` ({}) has no `- history` entry to put them in",
                case.id,
                variant.name,
                variant.path.display()
            ),
        )
        .fix("add `- history` to the variant's messages where the conversation goes (usually before the last user message)"),
    )
}

/// A case without variables message `m` of a variant uses.
fn missing_variables(variant: &Variant, m: usize, case: &Case, missing: &[&String]) -> InputError {
    let list = missing
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ");
    InputError::new(
        case.location.clone(),
        format!(
            "case `{}` has no variable {list}, used by message {} of variant `{}` ({})",
            case.id,
            m + 1,
            variant.name,
            variant.path.display()
        ),
    )
    .fix(format!(
        "add {list} to this case's vars, or remove it from the template"
    ))
}

/// Message `m` of a variant failed to render for a case; a runaway (out of fuel, too
/// long) says the limits and how to fix it.
fn render_error(variant: &Variant, m: usize, case: &Case, e: &minijinja::Error) -> InputError {
    let mut err = template_error(variant, m, e);
    err.message = format!(
        "{} when rendering case `{}` ({})",
        err.message, case.id, case.location
    );
    if is_template_fault(e) {
        err.message.push_str(&format!(
            "; a template may run at most {FUEL} steps and render at most {} MiB",
            MAX_RENDERED_BYTES >> 20
        ));
        err.fix = Some("remove the runaway loop or repetition from the template".into());
    }
    err
}

/// A template variable no case defines: where the template uses it, and the case variable
/// it was probably meant to be.
fn unknown_variable(variant: &Variant, message: usize, name: &str, cases: &[Case]) -> InputError {
    let mut known: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.vars.0.iter().map(|(k, _)| k.as_str()))
        .collect();
    known.sort_unstable();
    known.dedup();
    // The line of the prompt file that uses it, when the file can be read.
    let line = std::fs::read_to_string(&variant.path)
        .ok()
        .and_then(|text| {
            text.lines().position(|l| {
                l.match_indices(name).any(|(i, _)| {
                    let before = l[..i].chars().next_back();
                    let after = l[i + name.len()..].chars().next();
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(before) && !word(after)
                })
            })
        });
    let location = match line {
        Some(n) => super::FilePos::line(&variant.path, n + 1),
        None => super::FilePos::file(&variant.path),
    };
    let nearest = known
        .iter()
        .map(|&k| (strsim::jaro_winkler(name, k), k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score > 0.8);
    let fix = match nearest {
        Some((_, k)) => format!("did you mean `{k}`?"),
        None if known.is_empty() => "the cases have no `vars`: add it to them".to_string(),
        None => format!(
            "the cases have {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    InputError::new(
        location,
        format!(
            "message {} of variant `{}` uses `{name}`, which no case has",
            message + 1,
            variant.name
        ),
    )
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::MessageTemplate;
    use serde_json::json;
    use std::path::PathBuf;

    fn variant(content: &str) -> Variant {
        Variant {
            name: "v".into(),
            messages: vec![MessageTemplate {
                role: "user".into(),
                content: content.into(),
                line: Some(3),
                history: false,
            }],
            params: Default::default(),
            path: PathBuf::from("prompts/v.yaml"),
            no_files: false,
            extract: None,
        }
    }

    fn case(id: &str, vars: serde_json::Value, line: usize) -> Case {
        Case {
            id: id.into(),
            vars: vars.as_object().unwrap().clone().into(),
            expected: vec!["x".into()],
            location: FilePos::line(std::path::Path::new("cases/c.jsonl"), line),
            ..crate::testing::case()
        }
    }

    #[test]
    fn renders_variables() {
        let v = vec![variant("Q: {{ q }}{% if hint %} ({{ hint }}){% endif %}")];
        let t = Templates::compile(&v).unwrap();
        let c = case("a", json!({"q": "2+2", "hint": "small"}), 1);
        t.check(&v, std::slice::from_ref(&c)).unwrap();
        assert_eq!(t.render(0, &c, &v[0]).unwrap()[0].content, "Q: 2+2 (small)");
    }

    #[test]
    fn missing_variable_names_case_and_variable() {
        let v = vec![variant("Q: {{ question }}")];
        let t = Templates::compile(&v).unwrap();
        let cases = vec![
            case("a", json!({"question": "x"}), 1),
            case("b", json!({"q": "y"}), 37),
        ];
        let errs = t.check(&v, &cases).unwrap_err();
        assert_eq!(errs.0.len(), 1);
        let e = &errs.0[0];
        assert_eq!(e.location.to_string(), "cases/c.jsonl:37");
        assert!(
            e.message.contains("case `b` has no variable `question`"),
            "{e}"
        );
    }

    #[test]
    fn syntax_error_points_into_the_prompt_file() {
        let v = vec![variant("line one\n{{ q ")];
        let errs = Templates::compile(&v).unwrap_err();
        assert_eq!(errs.0[0].location.to_string(), "prompts/v.yaml:4");
        assert!(errs.0[0].message.contains("syntax error"), "{}", errs.0[0]);
    }

    #[test]
    fn strict_undefined_catches_missing_attributes() {
        let v = vec![variant("{{ user.name }}")];
        let t = Templates::compile(&v).unwrap();
        let errs = t
            .check(&v, &[case("a", json!({"user": {"id": 1}}), 2)])
            .unwrap_err();
        assert!(errs.0[0].message.contains("case `a`"), "{}", errs.0[0]);
    }

    #[test]
    fn loop_bombs_are_input_errors_naming_the_prompt_once() {
        let cases = vec![case("a", json!({"q": 1}), 1), case("b", json!({"q": 2}), 2)];
        for bomb in [
            // Nested loops over 10,000 items: 10^8 steps.
            "{% for a in 'x'*10000 %}{% for b in 'x'*10000 %}{% endfor %}{% endfor %}{{ q }}",
            // A two-deep emitting loop: 10^12 bytes.
            "{% for a in 'x'*10000 %}{% for b in 'x'*10000 %}{{ 'x'*10000 }}{% endfor %}{% endfor %}{{ q }}",
        ] {
            let v = vec![variant(bomb)];
            let t = Templates::compile(&v).unwrap();
            let errs = t.check(&v, &cases).unwrap_err();
            assert_eq!(errs.0.len(), 1, "said once, not per case: {errs}");
            let e = &errs.0[0];
            assert_eq!(e.location.to_string(), "prompts/v.yaml:3");
            assert!(e.message.contains("at most"), "{e}");
            assert!(t.render(0, &cases[0], &v[0]).is_err());
        }
    }

    #[test]
    fn engine_functions_are_not_case_variables() {
        let v = vec![variant(
            "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ q }}={{ ns.n }}",
        )];
        let t = Templates::compile(&v).unwrap();
        let c = case("a", json!({"q": "sum"}), 1);
        t.check(&v, std::slice::from_ref(&c)).unwrap();
        assert_eq!(t.render(0, &c, &v[0]).unwrap()[0].content, "sum=3");
    }

    #[test]
    fn a_case_history_is_spliced_where_the_variant_says() {
        let mut v = variant("{{ q }}");
        v.messages.insert(
            0,
            MessageTemplate {
                role: "system".into(),
                content: "Be brief.".into(),
                line: Some(2),
                history: false,
            },
        );
        v.messages.insert(
            1,
            MessageTemplate {
                role: String::new(),
                content: String::new(),
                line: Some(3),
                history: true,
            },
        );
        let variants = vec![v];
        let t = Templates::compile(&variants).unwrap();
        let mut c = case("a", json!({"q": "And in euros?"}), 1);
        c.messages = vec![
            ChatMessage::new("user", "What does it cost?"),
            ChatMessage::new("assistant", "$10."),
        ];
        t.check(&variants, std::slice::from_ref(&c)).unwrap();
        let got: Vec<(String, String)> = t
            .render(0, &c, &variants[0])
            .unwrap()
            .into_iter()
            .map(|m| (m.role, m.content))
            .collect();
        let want = [
            ("system", "Be brief."),
            ("user", "What does it cost?"),
            ("assistant", "$10."),
            ("user", "And in euros?"),
        ];
        assert_eq!(
            got,
            want.map(|(r, c)| (r.to_string(), c.to_string())).to_vec()
        );
        // A variant without `- history` refuses a case with earlier turns.
        let plain = vec![variant("{{ q }}")];
        let t = Templates::compile(&plain).unwrap();
        let e = t
            .check(&plain, std::slice::from_ref(&c))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no `- history` entry"), "{e}");
    }
}
