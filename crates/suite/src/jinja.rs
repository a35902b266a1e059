//! The filters and tests a compiled template or expression applies, each looked up in its
//! engine when the bench loads. The engine resolves a filter only when it renders it, so a
//! misspelt one (`{{ answer|lenght }}`) in a branch no case takes, or in an `expr` that
//! runs only on answers, would pass `check` and fail a run after its requests were paid
//! for. Walking the compiled instructions finds every one, taken or not.

use minijinja::Environment;
use minijinja::machinery::{CodeGenerator, Instruction, Instructions, parse_expr};

/// The engine's own filters (minijinja's builtins), for the nearest name to a misspelt one.
const FILTERS: [&str; 47] = [
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "format",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
];

/// The engine's own tests, as [`FILTERS`].
const TESTS: [&str; 33] = [
    "boolean",
    "defined",
    "divisibleby",
    "endingwith",
    "eq",
    "equalto",
    "escaped",
    "even",
    "false",
    "filter",
    "float",
    "ge",
    "greaterthan",
    "gt",
    "in",
    "int",
    "integer",
    "iterable",
    "le",
    "lessthan",
    "lower",
    "lt",
    "mapping",
    "ne",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
    "startingwith",
    "string",
    "test",
];

/// A filter or a test the engine does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// `"filter"` or `"test"`.
    pub kind: &'static str,
    pub name: String,
    /// The line of the template or expression it is on (1 is the first).
    pub line: Option<usize>,
    /// The nearest name of that kind the engine has.
    pub nearest: Option<String>,
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown {} `{}`", self.kind, self.name)?;
        match &self.nearest {
            Some(n) => write!(f, " (did you mean `{n}`?)"),
            None => Ok(()),
        }
    }
}

/// Every filter and test `template` applies that `env` does not have, in the order written.
pub fn unknown_in_template(
    env: &Environment<'_>,
    template: &minijinja::Template<'_, '_>,
    own: &[&str],
) -> Vec<UnknownName> {
    let compiled = minijinja::machinery::get_compiled_template(template);
    let mut found = unknown_in(env, &compiled.instructions, own);
    for block in compiled.blocks.values() {
        found.extend(unknown_in(env, block, own));
    }
    found
}

/// Every filter and test the expression `text` applies that `env` does not have (none when
/// it does not parse: its syntax error is said elsewhere).
pub fn unknown_in_expression(env: &Environment<'_>, text: &str, own: &[&str]) -> Vec<UnknownName> {
    let Ok(ast) = parse_expr(text) else {
        return Vec::new();
    };
    let mut generator = CodeGenerator::new("<expression>", text);
    generator.compile_expr(&ast);
    let (instructions, _) = generator.finish();
    unknown_in(env, &instructions, own)
}

/// The unknown filters and tests of one instruction stream; `own` names the filters and
/// tests the environment adds to the builtins (offered as nearest names too).
fn unknown_in(env: &Environment<'_>, code: &Instructions<'_>, own: &[&str]) -> Vec<UnknownName> {
    let mut found: Vec<UnknownName> = Vec::new();
    let mut at = 0;
    while let Some(instruction) = code.get(at) {
        let named = match instruction {
            Instruction::ApplyFilter(name, ..) => Some(("filter", *name)),
            Instruction::PerformTest(name, ..) => Some(("test", *name)),
            _ => None,
        };
        if let Some((kind, name)) = named
            && !has(env, kind, name)
            && !found.iter().any(|u| u.kind == kind && u.name == name)
        {
            found.push(UnknownName {
                kind,
                name: name.to_string(),
                line: code.get_line(at),
                nearest: nearest(env, kind, name, own),
            });
        }
        at += 1;
    }
    found
}

/// Whether `env` has the filter (or test) `name`: the engine says so only by applying it,
/// so it is applied once to `none` (an error other than "unknown" means it is there).
fn has(env: &Environment<'_>, kind: &str, name: &str) -> bool {
    if !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return true;
    }
    let probe = match kind {
        "filter" => format!("{{{{ none|{name} }}}}"),
        _ => format!("{{{{ none is {name} }}}}"),
    };
    match env.render_str(&probe, ()) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            minijinja::ErrorKind::UnknownFilter | minijinja::ErrorKind::UnknownTest
        ),
    }
}

/// The name of that kind `env` has nearest to `name`, if one is near.
fn nearest(env: &Environment<'_>, kind: &str, name: &str, own: &[&str]) -> Option<String> {
    let builtins: &[&str] = if kind == "filter" { &FILTERS } else { &TESTS };
    builtins
        .iter()
        .chain(own)
        .filter(|c| has(env, kind, c))
        .map(|c| (strsim::jaro_winkler(name, c), *c))
        .filter(|(s, _)| *s > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment<'static> {
        let mut env = Environment::new();
        env.add_filter("wordcount", |s: &str| s.split_whitespace().count());
        env.add_template_owned(
            "t",
            "Hi {{ name|upper }}\n{% if false %}{{ name|lenght }}{% endif %}\n{{ name is strnig }}{{ name|lenght }}".to_string(),
        )
        .unwrap();
        env
    }

    #[test]
    fn an_unknown_filter_or_test_is_found_in_a_branch_no_render_takes_with_its_line() {
        let env = env();
        let t = env.get_template("t").unwrap();
        let found = unknown_in_template(&env, &t, &[]);
        assert_eq!(
            found,
            [
                UnknownName {
                    kind: "filter",
                    name: "lenght".into(),
                    line: Some(2),
                    nearest: Some("length".into())
                },
                UnknownName {
                    kind: "test",
                    name: "strnig".into(),
                    line: Some(3),
                    nearest: Some("string".into())
                },
            ]
        );
        assert_eq!(
            found[0].to_string(),
            "unknown filter `lenght` (did you mean `length`?)"
        );
    }

    #[test]
    fn in_an_expression_the_environment_s_own_filters_count_and_are_offered() {
        let env = env();
        assert!(
            unknown_in_expression(&env, "output|wordcount < 3 and output is string", &[])
                .is_empty()
        );
        let found = unknown_in_expression(
            &env,
            "'a' in output and\n output|wordcont < 3",
            &["wordcount"],
        );
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].line, found[0].nearest.as_deref()),
            (Some(2), Some("wordcount"))
        );
        // Nothing near: no guess.
        let found = unknown_in_expression(&env, "output|zzz", &[]);
        assert_eq!(found[0].nearest, None);
    }
}
