//! Tools a bench declares for an agent loop (docs/guide/tools.md): `tools:` names each one
//! (its description and the JSON Schema of its arguments) and `loop:` bounds a job's turns
//! and calls; a case's `tool_results:` scripts what each call returns. What the model is
//! offered is the tools' OpenAI function form, which every protocol translates; what a
//! call gets back is [`reply`]'s.

use std::sync::Arc;

pub use super::schema_cost::SchemaError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A tool the model is offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// What the model calls it: letters, digits, `_` and `-`, at most 64 (every provider's
    /// rule).
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments [default: any object].
    #[serde(default = "any_object")]
    pub parameters: Value,
    /// What a call no line of the case's script matches returns [default: none — the job
    /// fails with the cause "unscripted tool call"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// A program that answers every call instead of a script: the call as one JSON line
    /// on its stdin, its result as one JSON object on its stdout (`{"result": …}`, or
    /// `{"error": …}` given back to the model), run in the bench's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<String>,
    /// Variables of promptgauge's environment the program sees beside PATH, HOME, LANG and
    /// TMPDIR.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long one call may take (`10s`) [default: 30s].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The bench's `mcp:` server (by position) that lists this tool and answers its calls;
    /// never written in a bench: a run fills it from each server's list.
    #[serde(skip)]
    pub served_by: Option<usize>,
}

/// An MCP server (`mcp:`, docs/guide/tools.md): a program speaking the Model Context
/// Protocol over its stdin and stdout, started once a run; the tools it lists are offered
/// to the model and their calls forwarded to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// What reports and errors call it [default: its program's name].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The program and its arguments, run in the bench's folder.
    pub run: Vec<String>,
    /// Variables of promptgauge's environment it sees beside PATH, HOME, LANG and TMPDIR.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long starting it, and each call, may take (`10s`) [default: 30s].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Offer only these of the tools it lists [default: all].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

impl McpServerSpec {
    /// What reports and errors call it.
    pub fn label(&self) -> String {
        // `[python3, server.py]` is `server.py`; `[npx, -y, @scope/server-x]` is
        // `@scope/server-x`; a program alone is its own name.
        self.name.clone().unwrap_or_else(|| {
            let named = self.run.iter().skip(1).find(|a| !a.starts_with('-'));
            match named.or(self.run.first()) {
                Some(p) if p.contains(".") || !p.starts_with('@') => std::path::Path::new(p)
                    .file_name()
                    .map_or(p.clone(), |n| n.to_string_lossy().into_owned()),
                Some(p) => p.clone(),
                None => String::new(),
            }
        })
    }
}

/// Each tool's JSON Schema, compiled once: a call's arguments are checked against it
/// before anything answers the call. What a check may cost is bounded when the schema is
/// compiled (`schema_cost`): its size, its nesting, and how far its `$ref`s expand.
#[derive(Debug, Default)]
pub struct ArgumentChecks(Vec<(String, Arc<jsonschema::Validator>)>);

impl ArgumentChecks {
    /// The checks of `tools`; why a tool's `parameters` is no JSON Schema, or one that would
    /// cost too much to check a call against (the tool named).
    pub fn of(tools: &[ToolSpec]) -> Result<ArgumentChecks, (String, SchemaError)> {
        tools
            .iter()
            .map(|t| {
                let compiled = jsonschema::validator_for(&t.parameters).map_err(|e| SchemaError {
                    message: format!("are not a JSON Schema: {e}"),
                    fix: "parameters: is a JSON Schema: { type: object, properties: { city: { type: string } } }",
                });
                compiled
                    .and_then(|c| super::schema_cost::check(&t.parameters).map(|()| c))
                    .map(|c| (t.name.clone(), Arc::new(c)))
                    .map_err(|e| (t.name.clone(), e))
            })
            .collect::<Result<_, _>>()
            .map(ArgumentChecks)
    }

    /// The check of the call `name(arguments)`, to run; why the call is refused before
    /// any check, as the model is told: a tool that is not offered, or arguments that are
    /// no JSON object.
    pub fn check_of(
        &self,
        tools: &[ToolSpec],
        name: &str,
        arguments: &str,
    ) -> Result<ArgumentCheck, String> {
        let Some((_, schema)) = self.0.iter().find(|(n, _)| n == name) else {
            let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "error: there is no tool `{name}`; the tools are: {}",
                known.join(", ")
            ));
        };
        Ok(ArgumentCheck {
            name: name.to_string(),
            arguments: object_of(name, arguments)?,
            schema: schema.clone(),
        })
    }
}

impl ArgumentChecks {
    /// These checks and `more` (of other tools).
    pub fn extend(&mut self, more: ArgumentChecks) {
        self.0.extend(more.0);
    }
}

/// The tools a bench's MCP servers list, ready to offer: each marked with the server that
/// answers it, their schemas compiled (once, as the bench's own are when it loads).
#[derive(Debug, Default)]
pub struct ServedTools {
    pub tools: Vec<ToolSpec>,
    pub checks: ArgumentChecks,
}

/// A call's arguments and the schema they must match: [`ArgumentCheck::run`] is the work
/// (a thread's, apart from the loop's, so a deadline is not held up by it).
pub struct ArgumentCheck {
    name: String,
    arguments: Value,
    schema: Arc<jsonschema::Validator>,
}

impl ArgumentCheck {
    /// The arguments, when they match the tool's schema; the error the model is given back
    /// otherwise.
    pub fn run(self) -> Result<Value, String> {
        let refused = self.schema.iter_errors(&self.arguments).next().map(|e| {
            format!(
                "error: the arguments of `{}` do not match its schema: {}{}",
                self.name,
                shortened(&e.to_string()),
                match e.instance_path().as_str() {
                    "" => String::new(),
                    at => format!(" (at {at})"),
                }
            )
        });
        match refused {
            None => Ok(self.arguments),
            Some(e) => Err(e),
        }
    }
}

/// A call's arguments as the JSON object they must be (none written: `{}`); the error the
/// model is given back otherwise.
fn object_of(name: &str, arguments: &str) -> Result<Value, String> {
    match serde_json::from_str(if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    }) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) | Err(_) => Err(format!(
            "error: the arguments of `{name}` must be a JSON object; got {}",
            shortened(arguments)
        )),
    }
}

fn any_object() -> Value {
    json!({"type": "object"})
}

/// `loop:` — how far one job's loop may go; each limit reached is a named outcome, never a
/// graded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopLimits {
    /// Requests to the model, the first included (at least 1).
    #[serde(default = "default_turns")]
    #[schemars(range(min = 1))]
    pub max_turns: u32,
    /// Tool calls over the whole loop (at least 1).
    #[serde(default = "default_calls")]
    #[schemars(range(min = 1))]
    pub max_tool_calls: u32,
    /// How long the whole loop may take, its requests and tools together (`5m`) [default:
    /// none — each request has its own total timeout, each tool its own].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

impl LoopLimits {
    /// `deadline`, read (checked when the bench was loaded).
    pub fn deadline(&self) -> Option<std::time::Duration> {
        self.deadline
            .as_deref()
            .and_then(|d| super::parse_duration(d).ok())
    }
}

fn default_turns() -> u32 {
    8
}

fn default_calls() -> u32 {
    16
}

impl Default for LoopLimits {
    fn default() -> Self {
        LoopLimits {
            max_turns: default_turns(),
            max_tool_calls: default_calls(),
            deadline: None,
        }
    }
}

/// How a scripted line's `args` are compared with a call's arguments.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ArgsMatch {
    /// The same JSON value.
    #[default]
    Exact,
    /// Every field `args` names, with its value (nested objects alike); others may be
    /// there too.
    Subset,
    /// `args` is a regular expression the arguments' JSON text must match.
    Pattern,
}

/// One line of a case's script: a call of `tool` whose arguments match `args` (any, when
/// absent) returns `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    #[serde(default, rename = "match")]
    pub matching: ArgsMatch,
    pub result: Value,
}

/// One tool call of an agent loop, and what it got back: the loop's trajectory, as the
/// journal keeps it and the trajectory scorers read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStep {
    /// The request (0 the first) whose answer made the call.
    pub turn: u32,
    pub tool: String,
    /// As the model wrote them: JSON text, possibly invalid.
    pub arguments: String,
    /// What the model was given back.
    pub result: String,
    /// The call was refused (an unknown tool, arguments that are no JSON object) and the
    /// model told why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub error: bool,
    /// The call's id, as the tool's program or MCP server was given it (none for a
    /// scripted tool, or a call refused before anything answered it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call_id: String,
}

/// What a call gets back.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// The script's (or the tool's default) result, as the text the model reads.
    Result(String),
    /// Given back to the model as the protocol expects, and counted: an unknown tool, or
    /// arguments that are not a JSON object.
    Error(String),
    /// The job fails with this cause: no line matches and the tool has no default, or a
    /// tool's program could not answer.
    Failed(String),
}

/// The OpenAI function form of `tools`, which each protocol translates into its own.
pub fn offered(tools: &[ToolSpec]) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect(),
    )
}

/// What the call `name(arguments)` returns: the first line of `script` that matches it,
/// else the tool's default.
pub fn reply(
    tools: &[ToolSpec],
    script: &[ScriptedCall],
    name: &str,
    arguments: &str,
) -> ToolReply {
    let Some(tool) = tools.iter().find(|t| t.name == name) else {
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return ToolReply::Error(format!(
            "error: there is no tool `{name}`; the tools are: {}",
            known.join(", ")
        ));
    };
    let args = match object_of(name, arguments) {
        Ok(args) => args,
        Err(e) => return ToolReply::Error(e),
    };
    let found = script
        .iter()
        .filter(|line| line.tool == name)
        .find(|line| matches(line, &args, arguments));
    match found.map(|line| &line.result).or(tool.default.as_ref()) {
        Some(result) => ToolReply::Result(as_text(result)),
        None => ToolReply::Failed(format!(
            "unscripted tool call: {name}({}) matches no line of the case's tool_results, and the tool has no default",
            shortened(arguments)
        )),
    }
}

/// Whether `line` matches a call with these arguments.
fn matches(line: &ScriptedCall, args: &Value, text: &str) -> bool {
    let Some(want) = &line.args else {
        return true;
    };
    match line.matching {
        ArgsMatch::Exact => want == args,
        ArgsMatch::Subset => subset(want, args),
        ArgsMatch::Pattern => want
            .as_str()
            .and_then(|p| regex::Regex::new(p).ok())
            .is_some_and(|re| re.is_match(text)),
    }
}

/// Whether every field of `want` is in `got` with its value (objects compared alike).
pub(crate) fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        _ => want == got,
    }
}

/// Whether a call's arguments `got` hold `want` (`tool_args`'): each key of `want` names a
/// field of `got` — a name, a JSON Pointer (`/address/city`) or a JSONPath (`$.items[0].sku`)
/// — whose value holds the wanted one as [`subset`] says.
pub fn args_hold(want: &Value, got: &Value) -> bool {
    let Value::Object(fields) = want else {
        return want == got;
    };
    fields.iter().all(|(key, value)| {
        let found = match pointer_of(key) {
            Some(pointer) => got.pointer(&pointer),
            None => got.get(key),
        };
        found.is_some_and(|f| subset(value, f))
    })
}

/// `tool_args`' arguments as a call would carry them: its paths (`$.a.b`, `/a/b`) spelled
/// as nested objects (a path through an array is left out). What the simulator's agent
/// sends.
pub fn args_of(want: &Value) -> Value {
    let Value::Object(fields) = want else {
        return want.clone();
    };
    let mut out = Map::new();
    for (key, value) in fields {
        let Some(pointer) = pointer_of(key) else {
            out.insert(key.clone(), value.clone());
            continue;
        };
        let names: Vec<String> = pointer
            .split('/')
            .skip(1)
            .map(|n| n.replace("~1", "/").replace("~0", "~"))
            .collect();
        if names.is_empty() || names.iter().any(|n| n.parse::<usize>().is_ok()) {
            continue;
        }
        put(&mut out, &names, value.clone());
    }
    Value::Object(out)
}

/// Sets `value` at the path `names` of `map`, making the objects on the way.
fn put(map: &mut Map<String, Value>, names: &[String], value: Value) {
    match names {
        [] => {}
        [last] => {
            map.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let next = map
                .entry(first.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            if let Value::Object(next) = next {
                put(next, rest, value);
            }
        }
    }
}

/// The JSON Pointer a `tool_args` key names, when it is a path: `/a/b` as it is, `$.a.b[0]`
/// or `$['a']` turned into one; `None` for a plain field name.
pub(crate) fn pointer_of(key: &str) -> Option<String> {
    if key.starts_with('/') {
        return Some(key.to_string());
    }
    let mut rest = key.strip_prefix('$')?;
    let mut pointer = String::new();
    let escape = |n: &str| n.replace('~', "~0").replace('/', "~1");
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            pointer.push('/');
            pointer.push_str(&escape(&r[..end]));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inside = r[..end].trim_matches(|c| c == '\'' || c == '"');
            pointer.push('/');
            pointer.push_str(&escape(inside));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(pointer)
}

/// A result as the model reads it: text as it is, anything else as JSON.
fn as_text(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn shortened(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Checks the declared tools: names every provider takes, each once, schemas that are
/// objects; a pattern line's `args` a regular expression. Returns why not.
pub fn check(tools: &[ToolSpec]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for t in tools {
        let valid = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "the tool name `{}` is not 1 to 64 letters, digits, `_` or `-` (what every provider takes)",
                t.name
            ));
        }
        if !seen.insert(&t.name) {
            return Err(format!("two tools are named `{}`", t.name));
        }
        if t.parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "the parameters of `{}` must be a JSON Schema of `type: object`",
                t.name
            ));
        }
    }
    Ok(())
}

/// Checks the `mcp:` servers: each names a program, a deadline that reads, and names apart.
pub(crate) fn check_servers(servers: &[McpServerSpec]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (i, server) in servers.iter().enumerate() {
        if server.run.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(format!("MCP server {} names no program (`run:`)", i + 1));
        }
        if let Some(t) = &server.timeout {
            super::parse_duration(t)
                .map_err(|e| format!("MCP server `{}`: {e}", server.label()))?;
        }
        if !seen.insert(server.label()) {
            return Err(format!(
                "two MCP servers are called `{}`: give each a `name:`",
                server.label()
            ));
        }
    }
    Ok(())
}

/// Checks a case's script against the declared tools: each line names one, and a pattern
/// is a regular expression.
pub(crate) fn check_script(tools: &[ToolSpec], script: &[ScriptedCall]) -> Result<(), String> {
    for line in script {
        let Some(tool) = tools.iter().find(|t| t.name == line.tool) else {
            return Err(format!(
                "its tool_results script `{}`, which the bench's `tools:` does not declare",
                line.tool
            ));
        };
        if !tool.run.is_empty() {
            return Err(format!(
                "its tool_results script `{}`, which a program answers (`run:`)",
                line.tool
            ));
        }
        if line.matching == ArgsMatch::Pattern {
            let pattern = line.args.as_ref().and_then(Value::as_str).ok_or_else(|| {
                format!(
                    "a `match: pattern` line for `{}` needs `args` to be a regular expression",
                    line.tool
                )
            })?;
            regex::Regex::new(pattern).map_err(|e| {
                format!(
                    "the pattern for `{}` is not a regular expression: {e}",
                    line.tool
                )
            })?;
        }
    }
    Ok(())
}

/// `params` with the declared tools offered (`params.tools`); a bench that also lists
/// `params.tools` by hand is refused (which would the model see?).
pub(crate) fn with_tools(
    mut params: Map<String, Value>,
    tools: &[ToolSpec],
) -> Result<Map<String, Value>, String> {
    if tools.is_empty() {
        return Ok(params);
    }
    if params.contains_key("tools") {
        return Err(
            "the bench declares `tools:` and also `params.tools`: keep one (`tools:`, which scripts what each call returns)"
                .into(),
        );
    }
    params.insert("tools".into(), offered(tools));
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolSpec> {
        serde_json::from_value(json!([
            {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"name": "search", "default": "no results"}
        ]))
        .unwrap()
    }

    #[test]
    fn tool_args_paths_read_as_json_pointers_and_spell_out_as_objects() {
        assert_eq!(
            pointer_of("$.items[0].sku").as_deref(),
            Some("/items/0/sku")
        );
        assert_eq!(pointer_of("$['a/b'].c").as_deref(), Some("/a~1b/c"));
        assert_eq!(
            pointer_of("/address/city").as_deref(),
            Some("/address/city")
        );
        assert_eq!(pointer_of("city"), None);
        let got = json!({"address": {"city": "Oslo", "zip": "0150"}, "items": [{"sku": "A1"}]});
        assert!(args_hold(
            &json!({"$.address.city": "Oslo", "/items/0/sku": "A1"}),
            &got
        ));
        assert!(!args_hold(&json!({"$.address.city": "Lima"}), &got));
        assert!(!args_hold(&json!({"$.nowhere": "Oslo"}), &got));
        assert_eq!(
            args_of(&json!({"$.address.city": "Oslo", "q": 1, "$.items[0].sku": "A1"})),
            json!({"address": {"city": "Oslo"}, "q": 1})
        );
    }

    #[test]
    fn a_call_gets_the_first_matching_line_then_the_default() {
        let script: Vec<ScriptedCall> = serde_json::from_value(json!([
            {"tool": "get_weather", "args": {"city": "Oslo"}, "result": "3 °C, rain"},
            {"tool": "get_weather", "args": {"city": "Lima"}, "match": "subset", "result": {"c": 19}},
            {"tool": "search", "args": "refund.*polic", "match": "pattern", "result": "30 days"}
        ]))
        .unwrap();
        let t = tools();
        let r = |name: &str, args: &str| reply(&t, &script, name, args);
        assert_eq!(
            r("get_weather", r#"{"city": "Oslo"}"#),
            ToolReply::Result("3 °C, rain".into())
        );
        // Exact: one more field is another call.
        assert!(matches!(
            r("get_weather", r#"{"city": "Oslo", "unit": "c"}"#),
            ToolReply::Failed(e) if e.starts_with("unscripted tool call: get_weather(")
        ));
        // Subset: the fields named, others free; a result that is not text is its JSON.
        assert_eq!(
            r("get_weather", r#"{"unit": "c", "city": "Lima"}"#),
            ToolReply::Result(r#"{"c":19}"#.into())
        );
        assert_eq!(
            r("search", r#"{"q": "refund policy"}"#),
            ToolReply::Result("30 days".into())
        );
        // No line: the tool's default.
        assert_eq!(
            r("search", r#"{"q": "shipping"}"#),
            ToolReply::Result("no results".into())
        );
        // Given back, not failed: an unknown tool, arguments that are no object.
        assert!(
            matches!(r("book_flight", "{}"), ToolReply::Error(e) if e.contains("get_weather, search"))
        );
        assert!(
            matches!(r("get_weather", "{city: Oslo"), ToolReply::Error(e) if e.contains("JSON object"))
        );
        assert!(matches!(r("get_weather", "[1]"), ToolReply::Error(_)));
        // No arguments at all read as `{}`.
        assert_eq!(r("search", ""), ToolReply::Result("no results".into()));
    }

    #[test]
    fn declared_tools_and_scripts_are_checked() {
        assert!(check(&tools()).is_ok());
        let mut bad = tools();
        bad[1].name = "get weather".into();
        assert!(check(&bad).unwrap_err().contains("letters, digits"));
        let mut twice = tools();
        twice[1].name = "get_weather".into();
        assert!(check(&twice).unwrap_err().contains("two tools"));
        let mut schema = tools();
        schema[0].parameters = json!({"type": "string"});
        assert!(check(&schema).unwrap_err().contains("type: object"));
        let script: Vec<ScriptedCall> =
            serde_json::from_value(json!([{"tool": "book", "result": 1}])).unwrap();
        assert!(
            check_script(&tools(), &script)
                .unwrap_err()
                .contains("`book`")
        );
        let script: Vec<ScriptedCall> = serde_json::from_value(
            json!([{"tool": "search", "args": "(", "match": "pattern", "result": 1}]),
        )
        .unwrap();
        assert!(
            check_script(&tools(), &script)
                .unwrap_err()
                .contains("regular expression")
        );
        // Offered in OpenAI's function form, and never beside a hand-written list.
        let params = with_tools(Map::new(), &tools()).unwrap();
        assert_eq!(params["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(
            params["tools"][1]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert!(with_tools(params, &tools()).is_err());
    }
}
