//! The JSON Schemas of the files a bench is written in, generated from the types that read
//! them (their doc comments are the descriptions editors show), so an editor checks and
//! completes a bench with the loader's own rules. The loader stays the judge: it also
//! checks what a schema cannot (files exist, templates compile, names are unique), and its
//! errors keep their file, line and fix. docs/schema/ holds each, as `promptgauge schema`
//! prints it (docs/guide/files.md, "Checking in the editor").

use schemars::generate::SchemaSettings;
use serde_json::Value;

/// Which file a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaOf {
    /// A bench file (`promptgauge.yaml` is the one `run` reads by default).
    Bench,
    /// One case (a line of a `.jsonl` case file), or a `.yaml` case file's list of them.
    Case,
    /// A `.yaml` prompt file: one variant.
    Variant,
    /// A bench's `endpoints:` list.
    Endpoints,
}

impl SchemaOf {
    /// Every schema, in the order docs/schema/ lists them.
    pub const ALL: [SchemaOf; 4] = [
        SchemaOf::Bench,
        SchemaOf::Case,
        SchemaOf::Variant,
        SchemaOf::Endpoints,
    ];

    /// Its file's name under docs/schema/ (and the release's).
    pub fn file_name(self) -> &'static str {
        match self {
            SchemaOf::Bench => "bench.schema.json",
            SchemaOf::Case => "case.schema.json",
            SchemaOf::Variant => "variant.schema.json",
            SchemaOf::Endpoints => "endpoints.schema.json",
        }
    }

    /// Where an editor fetches it: docs/schema/ at this version's tag, so a bench `init`
    /// wrote is checked by the rules of the version that wrote it.
    pub fn url(self) -> String {
        format!(
            "https://raw.githubusercontent.com/promptgauge/promptgauge/v{}/docs/schema/{}",
            env!("CARGO_PKG_VERSION"),
            self.file_name()
        )
    }

    /// The schema, as a JSON value (draft-07, which every editor's YAML and JSON support
    /// reads).
    pub fn schema(self) -> Value {
        let mut generator = SchemaSettings::draft07().into_generator();
        let (title, root) = match self {
            SchemaOf::Bench => (
                "promptgauge bench",
                generator.root_schema_for::<super::RawBench>(),
            ),
            SchemaOf::Case => {
                let one = generator.subschema_for::<super::cases::RawCase>();
                let root = schemars::json_schema!({
                    "description": "One case (a line of a .jsonl case file), or a .yaml case file's list of cases.",
                    "anyOf": [one, { "type": "array", "items": one }]
                });
                ("promptgauge case", root)
            }
            SchemaOf::Variant => (
                "promptgauge variant",
                generator.root_schema_for::<super::prompts::RawPrompt>(),
            ),
            SchemaOf::Endpoints => (
                "promptgauge endpoints",
                generator.root_schema_for::<Vec<super::endpoints::RawNamedEndpoint>>(),
            ),
        };
        let mut root = root.to_value();
        if let Value::Object(map) = &mut root {
            map.insert("title".into(), title.into());
            map.insert(
                "$schema".into(),
                "http://json-schema.org/draft-07/schema#".into(),
            );
            // A root built here rather than by schemars lacks the types it refers to.
            let definitions = generator.take_definitions(true);
            if !definitions.is_empty() {
                map.entry("definitions")
                    .or_insert(Value::Object(definitions));
            }
        }
        unwrap_descriptions(&mut root);
        root
    }

    /// The schema as the file docs/schema/ holds: pretty JSON and a final newline.
    pub fn text(self) -> String {
        let mut text = serde_json::to_string_pretty(&self.schema()).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Joins the lines a doc comment was wrapped at: an editor shows a description as one
/// paragraph (a blank line still parts two).
fn unwrap_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|p| p.replace('\n', " "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => unwrap_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}
