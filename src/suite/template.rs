//! Strict Jinja-style templates: compiled once, checked against every case before any request.

use serde::{Deserialize, Serialize};

use super::cases::Case;
use super::error::{InputError, InputErrors, Location};
use super::prompts::Variant;

/// A rendered chat message, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// Every variant's message templates, compiled with strict undefined variables.
pub struct Templates {
    env: minijinja::Environment<'static>,
    /// Template names per variant, one per message.
    names: Vec<Vec<String>>,
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
        || Location::file(&variant.path),
        |l| Location::line(&variant.path, l),
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

impl Templates {
    pub fn compile(variants: &[Variant]) -> Result<Self, InputErrors> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        let mut names = Vec::new();
        let mut errors = Vec::new();
        for (v, variant) in variants.iter().enumerate() {
            let mut per = Vec::new();
            for (m, message) in variant.messages.iter().enumerate() {
                let name = format!("{v}/{m}");
                if let Err(e) = env.add_template_owned(name.clone(), message.content.clone()) {
                    errors.push(template_error(variant, m, &e));
                }
                per.push(name);
            }
            names.push(per);
        }
        if !errors.is_empty() {
            return Err(InputErrors(errors));
        }
        Ok(Templates { env, names })
    }

    /// Renders every variant against every case; each failure names the prompt, the case and
    /// the missing variable.
    pub fn check(&self, variants: &[Variant], cases: &[Case]) -> Result<(), InputErrors> {
        let mut errors = Vec::new();
        for (v, variant) in variants.iter().enumerate() {
            for (m, name) in self.names[v].iter().enumerate() {
                let Ok(template) = self.env.get_template(name) else {
                    continue;
                };
                let mut wanted: Vec<String> =
                    template.undeclared_variables(false).into_iter().collect();
                wanted.sort();
                for case in cases {
                    let missing: Vec<&String> = wanted
                        .iter()
                        .filter(|w| !case.vars.contains_key(w))
                        .collect();
                    if !missing.is_empty() {
                        let list = missing
                            .iter()
                            .map(|w| format!("`{w}`"))
                            .collect::<Vec<_>>()
                            .join(", ");
                        errors.push(
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
                            )),
                        );
                        continue;
                    }
                    if let Err(e) = template.render(minijinja::value::Serde(&case.vars)) {
                        let mut err = template_error(variant, m, &e);
                        err.message = format!(
                            "{} when rendering case `{}` ({})",
                            err.message, case.id, case.location
                        );
                        errors.push(err);
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

    /// The chat messages for one variant and case.
    pub fn render(
        &self,
        variant: usize,
        case: &Case,
        roles: &Variant,
    ) -> Result<Vec<ChatMessage>, minijinja::Error> {
        self.names[variant]
            .iter()
            .zip(&roles.messages)
            .map(|(name, message)| {
                Ok(ChatMessage {
                    role: message.role.clone(),
                    content: self
                        .env
                        .get_template(name)?
                        .render(minijinja::value::Serde(&case.vars))?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::prompts::MessageTemplate;
    use serde_json::json;
    use std::path::PathBuf;

    fn variant(content: &str) -> Variant {
        Variant {
            name: "v".into(),
            messages: vec![MessageTemplate {
                role: "user".into(),
                content: content.into(),
                line: Some(3),
            }],
            params: Default::default(),
            path: PathBuf::from("prompts/v.yaml"),
        }
    }

    fn case(id: &str, vars: serde_json::Value, line: usize) -> Case {
        Case {
            id: id.into(),
            vars: vars.as_object().unwrap().clone().into(),
            expected: vec!["x".into()],
            grade: None,
            tags: vec![],
            location: Location::line(std::path::Path::new("cases/c.jsonl"), line),
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
}
