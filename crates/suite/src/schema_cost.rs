//! What checking a call's arguments against a tool's JSON Schema may cost, bounded when the
//! schema is loaded (docs/guide/tools.md, "The loop"). A validator follows each `$ref` where
//! it stands, so a schema whose `$ref`s name the same definition twice, level after level,
//! makes each check visit 2^levels schemas: 31 levels take most of a minute, 40 take hours.
//! The bounds: the schema's JSON text, the nesting of its schemas with every `$ref`
//! followed, and the number of schemas a check may visit at one place of the arguments,
//! every `$ref` followed where it stands (each counted once per path, as a validator visits
//! it). A `$ref` back to a schema it stands in is recursion, counted once: what it costs
//! grows with the arguments' depth, which the loop's deadline bounds.

use std::collections::{HashMap, HashSet};

use referencing::{Draft, Registry, Resolver};
use serde_json::Value;

/// The most JSON text a tool's schema may take.
const MOST_BYTES: usize = 1024 * 1024;

/// The deepest nesting of schemas, `$ref`s followed.
const MOST_DEPTH: usize = 128;

/// The most schemas one place of a call's arguments may be checked against, `$ref`s
/// followed: a check of a few milliseconds.
const MOST_EXPANDED: u64 = 50_000;

/// Where a schema's `$ref`s are resolved from when it names no `$id` (as the validator
/// resolves them).
const BASE: &str = "json-schema:///";

/// Why a tool's `parameters` cannot be the schema its calls are checked against: what is
/// wrong (its words follow "the parameters of `tool`"), and the fix.
#[derive(Debug)]
pub struct SchemaError {
    pub message: String,
    pub fix: &'static str,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why checking calls against `schema` would cost too much.
pub(super) fn check(schema: &Value) -> Result<(), SchemaError> {
    let bytes = serde_json::to_vec(schema).map_or(0, |text| text.len());
    if bytes > MOST_BYTES {
        return Err(SchemaError {
            message: format!(
                "take {bytes} bytes of JSON, more than a tool's schema may ({MOST_BYTES}): it goes out with every request, and each call is checked against it"
            ),
            fix: "describe the arguments the tool takes, not every value they may hold (a long `enum` is better a string the tool checks)",
        });
    }
    let draft = Draft::default().detect(schema);
    let registry = Registry::new()
        .draft(draft)
        .retrieve_known_draft_meta_schemas(true)
        .add(BASE, schema)
        .and_then(|r| r.prepare())
        .map_err(|e| Over::Ref(String::new(), e.to_string()).said())?;
    let base = referencing::uri::from_str(BASE)
        .map_err(|e| Over::Ref(BASE.into(), e.to_string()).said())?;
    let mut walk = Walk::default();
    walk.size(schema, draft, &registry.resolver(base), 0)
        .map(drop)
        .map_err(Over::said)
}

/// Why a walk stopped.
enum Over {
    Depth,
    Expanded,
    /// A `$ref` the walk could not follow, and why.
    Ref(String, String),
}

impl Over {
    fn said(self) -> SchemaError {
        match self {
            Over::Depth => SchemaError {
                message: format!("nest schemas more than {MOST_DEPTH} deep, `$ref`s followed"),
                fix: "write the schema flatter: a call's arguments are rarely more than a few levels deep",
            },
            Over::Expanded => SchemaError {
                message: format!(
                    "expand to more than {MOST_EXPANDED} schemas for one value, `$ref`s followed: checking each call would visit every one (a definition that names the one below it twice doubles them, level after level)"
                ),
                fix: "name each definition once where a value is checked against it (`$ref: \"#/$defs/x\"` once, not twice under `allOf` or `anyOf`)",
            },
            Over::Ref(reference, e) => SchemaError {
                message: format!("have a `$ref` that cannot be followed, `{reference}`: {e}"),
                fix: "a `$ref` names a schema in the same document (`#/$defs/NAME`) or an `$id` it declares",
            },
        }
    }
}

/// How many schemas one value is checked against, each schema's count kept (a schema is
/// counted once however many `$ref`s name it, so the walk is as long as the schema).
#[derive(Default)]
struct Walk {
    /// Each schema's count, by where it is in memory.
    counted: HashMap<*const Value, u64>,
    /// The schemas being counted: a `$ref` to one of them is recursion.
    open: HashSet<*const Value>,
}

impl Walk {
    /// The schemas `node` (at `depth`, resolved from `resolver`) applies to a value: itself,
    /// its subschemas, and what its `$ref`s name.
    fn size<'r>(
        &mut self,
        node: &'r Value,
        draft: Draft,
        resolver: &Resolver<'r>,
        depth: usize,
    ) -> Result<u64, Over> {
        if depth > MOST_DEPTH {
            return Err(Over::Depth);
        }
        let at = std::ptr::from_ref(node);
        if let Some(n) = self.counted.get(&at) {
            return Ok(*n);
        }
        if !self.open.insert(at) {
            return Ok(1);
        }
        let resolver = resolver
            .in_subresource(draft.create_resource_ref(node))
            .map_err(|e| Over::Ref("$id".into(), e.to_string()))?;
        let mut total: u64 = 1;
        for sub in draft.subresources_of(node) {
            total = total.saturating_add(self.size(sub, draft, &resolver, depth + 1)?);
            if total > MOST_EXPANDED {
                return Err(Over::Expanded);
            }
        }
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            let Some(Value::String(reference)) = node.get(keyword) else {
                continue;
            };
            let (named, inner, inner_draft) = resolver
                .lookup(reference)
                .map_err(|e| Over::Ref(reference.clone(), e.to_string()))?
                .into_inner();
            total = total.saturating_add(self.size(named, inner_draft, &inner, depth + 1)?);
            if total > MOST_EXPANDED {
                return Err(Over::Expanded);
            }
        }
        self.open.remove(&at);
        self.counted.insert(at, total);
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `levels` levels of definitions, each naming the one below twice.
    fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=levels {
            let below = json!({"$ref": format!("#/$defs/d{}", i - 1)});
            defs.insert(format!("d{i}"), json!({"allOf": [below, below]}));
        }
        json!({"type": "object", "properties": {"x": {"$ref": format!("#/$defs/d{levels}")}}, "$defs": defs})
    }

    #[test]
    fn refs_that_double_level_after_level_are_refused_and_ordinary_schemas_pass() {
        // 2^10 paths: fine; 2^31: each check would take most of a minute.
        assert!(check(&doubling(10)).is_ok());
        let refused = check(&doubling(31)).unwrap_err();
        assert!(
            refused.message.contains("more than 50000 schemas"),
            "{refused}"
        );
        // Counted once per definition however often it is named: a long walk is not needed
        // to refuse it.
        assert!(check(&doubling(4000)).is_err());
        // Recursion (a tree of itself), definitions named by several fields, `$id`s, and a
        // meta-schema are ordinary.
        let tree = json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}, "left": {"$ref": "#"}}});
        assert!(check(&tree).is_ok());
        let shared = json!({"$defs": {"city": {"type": "string"}}, "properties": {"from": {"$ref": "#/$defs/city"}, "to": {"$ref": "#/$defs/city"}}});
        assert!(check(&shared).is_ok());
        let ids = json!({"$defs": {"a": {"$id": "http://x.test/a.json", "type": "string"}}, "properties": {"q": {"$ref": "http://x.test/a.json"}}});
        assert!(check(&ids).is_ok());
        assert!(check(&json!({"$ref": "https://json-schema.org/draft/2020-12/schema"})).is_ok());
    }

    #[test]
    fn a_schema_too_deep_or_too_large_is_refused_with_the_bound() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"properties": {"a": deep}});
        }
        let refused = check(&deep).unwrap_err();
        assert!(refused.message.contains("more than 128 deep"), "{refused}");
        let large = json!({"enum": vec!["x".repeat(1000); 2000]});
        let refused = check(&large).unwrap_err();
        assert!(refused.message.contains("bytes of JSON"), "{refused}");
        let missing = check(&json!({"$ref": "#/$defs/none"})).unwrap_err();
        assert!(
            missing
                .message
                .contains("cannot be followed, `#/$defs/none`"),
            "{missing}"
        );
    }
}
