//! Files an imported bench's cases attach (docs/guide/attachments.md): promptfoo's image
//! variables (`image: file://photo.jpg`, or a URL, used in an `image_url` part) and an
//! OpenAI eval's `input_image` parts arrive as a case's `files:`, placed in the prompt
//! where the other tool placed them with `{{ file("NAME") }}`. A part this cannot place
//! is refused with the reason, never dropped.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use promptgauge_client::attachment::Kind;

/// A variable a prompt sends as a file, and how its part asked for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FileVar {
    /// `data:image/jpeg;base64,` when the part wrote `data:image/jpeg;base64,{{ var }}`:
    /// the variable then holds bare base64.
    pub(super) data_prefix: Option<String>,
    /// An image part's `detail`.
    pub(super) detail: Option<String>,
}

/// The variables prompts send as files, by name.
pub(super) type FileVars = BTreeMap<String, FileVar>;

/// The one variable `text` holds as `{{ name }}` (or `{{ item.name }}`), with what comes
/// before it.
fn only_var(text: &str) -> Option<(String, String)> {
    let re =
        regex::Regex::new(r"^(.*?)\{\{\s*(?:item\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$").ok()?;
    let c = re.captures(text.trim())?;
    Some((c[1].to_string(), c[2].to_string()))
}

/// A message's content as a promptgauge template: text parts made templates by `text`,
/// each file part that names a variable as `{{ file("var") }}` (the variable recorded in
/// `vars`). A part of another kind, or a file part with a fixed URL or bytes, is an error
/// that says so.
pub(super) fn content_template(
    content: &Value,
    vars: &mut FileVars,
    text_part: &dyn Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let parts = match content {
        Value::String(s) => return text_part(s),
        Value::Array(parts) => parts.as_slice(),
        Value::Object(_) => std::slice::from_ref(content),
        _ => return Err("has no content".into()),
    };
    let mut text = String::new();
    for part in parts {
        if let Some(t) = part.as_str() {
            text.push_str(&text_part(t)?);
            continue;
        }
        let kind = match part.get("type").and_then(Value::as_str) {
            Some(kind) => kind,
            None if part.get("text").is_some() => "text",
            // Bedrock's form, `{image: {source: …}}`: never read as an empty text.
            None => {
                let key = part.as_object().and_then(|o| o.keys().next());
                return Err(format!(
                    "holds a `{}` part without a `type` (Bedrock's form), which promptgauge cannot place: write it as an `image_url` part whose URL is a variable",
                    key.map_or("empty", String::as_str)
                ));
            }
        };
        let (url, detail) = match kind {
            "text" | "input_text" | "output_text" => {
                text.push_str(&text_part(
                    part.get("text").and_then(Value::as_str).unwrap_or(""),
                )?);
                continue;
            }
            // OpenAI chat's and Responses' images, an eval's `input_image`.
            "image_url" | "input_image" => {
                let image = part.get("image_url").unwrap_or(&Value::Null);
                let url = image
                    .as_str()
                    .or_else(|| image.get("url").and_then(Value::as_str));
                let detail = part
                    .get("detail")
                    .or_else(|| image.get("detail"))
                    .and_then(Value::as_str);
                (url, detail)
            }
            // Anthropic's image and document blocks.
            "image" | "document" => {
                let url = block_source(part);
                let Some(url) = url else {
                    return Err(format!("holds a `{kind}` block without a source"));
                };
                text.push_str(&file_marker(&url, None, vars, kind)?);
                continue;
            }
            other => {
                return Err(format!(
                    "holds `{other}` content, which promptgauge cannot place (text, images and documents it can)"
                ));
            }
        };
        let Some(url) = url else {
            return Err(format!("holds an `{kind}` part without a URL"));
        };
        text.push_str(&file_marker(url, detail, vars, kind)?);
    }
    Ok(text)
}

/// An Anthropic image or document block's source as a URL: its `url`, or its base64 `data`
/// (a variable's, given the block's media type as a data URL's prefix).
fn block_source(part: &Value) -> Option<String> {
    let source = part.get("source").unwrap_or(&Value::Null);
    let url = source
        .get("data")
        .or_else(|| source.get("url"))
        .and_then(Value::as_str);
    match (
        source.get("media_type").and_then(Value::as_str),
        source.get("type").and_then(Value::as_str),
    ) {
        (Some(media), Some("base64")) => url.map(|u| {
            // The block's data with its media type: a data URL's prefix.
            if u.trim_start().starts_with("{{") {
                format!("data:{media};base64,{u}")
            } else {
                u.to_string()
            }
        }),
        _ => url.map(String::from),
    }
}

/// `{{ file("var") }}` for a part whose URL is a variable.
fn file_marker(
    url: &str,
    detail: Option<&str>,
    vars: &mut FileVars,
    kind: &str,
) -> Result<String, String> {
    let Some((before, name)) = only_var(url) else {
        return Err(format!(
            "holds an `{kind}` part whose URL is fixed ({}), not a variable: give each case the file as a variable, or attach it to every case's `files:` by hand",
            shortened(url)
        ));
    };
    let data_prefix = before
        .starts_with("data:")
        .then(|| before.clone())
        .filter(|p| p.ends_with(";base64,"));
    if !before.is_empty() && data_prefix.is_none() {
        return Err(format!(
            "holds an `{kind}` part whose URL is `{}`: only a variable, or data:MEDIA;base64, and a variable, can be a case's file",
            shortened(url)
        ));
    }
    vars.insert(
        name.clone(),
        FileVar {
            data_prefix,
            detail: detail.filter(|d| *d != "auto").map(String::from),
        },
    );
    Ok(format!("{{{{ file(\"{}\") }}}}", file_name(&name)))
}

/// The name a file variable's file has in a case's `files:`: the variable's, unless that
/// is `path`, `url` or `data`, which would make the case's `files: {url: …}` one file
/// written as an object (docs/guide/attachments.md) instead of a file named `url`.
pub(super) fn file_name(var: &str) -> String {
    if matches!(var, "path" | "url" | "data") {
        format!("{var}_file")
    } else {
        var.to_string()
    }
}

fn shortened(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A promptfoo variable's `file://` reference, when it names a file promptgauge attaches
/// (an image, a PDF, audio — by its extension, as promptfoo reads it).
pub(super) fn attachable(reference: &str) -> bool {
    reference
        .strip_prefix("file://")
        .and_then(|p| p.rsplit_once('.'))
        .and_then(|(_, ext)| Kind::of_extension(ext))
        .is_some_and(|k| k != Kind::Text)
}

/// `{{ name }}` of a variable prompts send as a file, in a text prompt, as
/// `{{ file("name") }}`: promptfoo would have put the file's base64 there.
pub(super) fn place_in_text(text: &str, vars: &FileVars) -> String {
    let Ok(re) = regex::Regex::new(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}") else {
        return text.to_string();
    };
    re.replace_all(text, |c: &regex::Captures| {
        if vars.contains_key(&c[1]) {
            format!("{{{{ file(\"{}\") }}}}", file_name(&c[1]))
        } else {
            c[0].to_string()
        }
    })
    .into_owned()
}

/// A case's `files:` entry for the value `value` of the file variable `var`: a URL, a data
/// URL, bare base64 after the part's data URL prefix, or (already copied) a path; why not,
/// for any other value, or a URL whose name does not say what it holds (a bench must know
/// a file's kind before it sends it, and `check` reads nothing from the network).
pub(super) fn file_entry(value: &str, var: &FileVar) -> Result<Value, String> {
    let v = value.trim();
    let (key, text) = if v.starts_with("http://") || v.starts_with("https://") {
        let path = v.split(['?', '#']).next().unwrap_or(v);
        let known = path
            .rsplit('/')
            .next()
            .and_then(|last| last.rsplit_once('.'))
            .and_then(|(_, ext)| Kind::of_extension(ext))
            .is_some();
        if !known {
            return Err(format!(
                "the URL {} does not say by its name what it holds (png, jpeg, webp, gif, pdf, wav, mp3)",
                shortened(v)
            ));
        }
        ("url", v.to_string())
    } else if v.starts_with("data:") {
        ("data", v.to_string())
    } else if let Some(prefix) = &var.data_prefix {
        ("data", format!("{prefix}{v}"))
    } else {
        return Err("not a file://, a URL, a data URL or base64".into());
    };
    Ok(match &var.detail {
        Some(d) => json!({key: text, "detail": d}),
        None if key == "url" => json!(text),
        None => json!({"data": text}),
    })
}

/// Moves each case's file variables from `vars` into `files` (beside any the import
/// already put there). A case whose variable is no URL, data URL or base64 is an error.
pub(super) fn vars_to_files(case: &mut Map<String, Value>, vars: &FileVars) -> Result<(), String> {
    let id = case
        .get("id")
        .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
        .unwrap_or_default();
    let mut files = match case.remove("files") {
        Some(Value::Object(f)) => f,
        _ => Map::new(),
    };
    if let Some(Value::Object(case_vars)) = case.get_mut("vars") {
        for (name, var) in vars {
            if files.contains_key(&file_name(name)) {
                continue;
            }
            let Some(value) = case_vars.get(name) else {
                continue;
            };
            let entry = match value.as_str() {
                Some(v) => file_entry(v, var),
                None => Err("not a file://, a URL, a data URL or base64".into()),
            }
            .map_err(|why| {
                format!(
                    "case `{id}`: its `{name}` is sent as a file, but holds {}: {why}",
                    shortened(&value.to_string())
                )
            })?;
            case_vars.remove(name);
            files.insert(file_name(name), entry);
        }
    }
    if !files.is_empty() {
        case.insert("files".into(), Value::Object(files));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_parts_become_file_markers_and_their_variables_are_recorded() {
        let mut vars = FileVars::new();
        let content = json!([
            {"type": "text", "text": "What is the total? "},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,{{image}}", "detail": "low"}},
            {"type": "input_image", "image_url": "{{ item.chart }}"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "{{ scan }}"}}
        ]);
        let same = |t: &str| Ok(t.to_string());
        let text = content_template(&content, &mut vars, &same).unwrap();
        assert_eq!(
            text,
            r#"What is the total? {{ file("image") }}{{ file("chart") }}{{ file("scan") }}"#
        );
        assert_eq!(
            vars["image"],
            FileVar {
                data_prefix: Some("data:image/jpeg;base64,".into()),
                detail: Some("low".into())
            }
        );
        assert_eq!(vars["chart"], FileVar::default());
        assert_eq!(
            vars["scan"].data_prefix.as_deref(),
            Some("data:image/png;base64,")
        );
        // A fixed URL, or a kind with no place, is refused with its reason.
        for bad in [
            json!([{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]),
            json!([{"type": "input_audio", "input_audio": {"data": "{{a}}"}}]),
            json!([{"type": "image_url", "image_url": {"url": "https://x.test/{{a}}"}}]),
        ] {
            assert!(content_template(&bad, &mut vars, &same).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_case_s_file_variables_move_into_its_files() {
        let mut vars = FileVars::new();
        vars.insert(
            "image".into(),
            FileVar {
                data_prefix: Some("data:image/png;base64,".into()),
                detail: None,
            },
        );
        vars.insert(
            "chart".into(),
            FileVar {
                data_prefix: None,
                detail: Some("high".into()),
            },
        );
        let mut case = json!({"id": "c1", "vars": {"image": "iVBORw0KGgo=", "chart": "https://x.test/c.png", "q": "?"}})
            .as_object()
            .unwrap()
            .clone();
        vars_to_files(&mut case, &vars).unwrap();
        assert_eq!(case["vars"], json!({"q": "?"}));
        assert_eq!(
            case["files"],
            json!({"chart": {"url": "https://x.test/c.png", "detail": "high"}, "image": {"data": "data:image/png;base64,iVBORw0KGgo="}})
        );
        // A variable that is not a file is an error naming the case.
        let mut case = json!({"id": "c2", "vars": {"chart": "a chart"}})
            .as_object()
            .unwrap()
            .clone();
        let e = vars_to_files(&mut case, &vars).unwrap_err();
        assert!(e.contains("case `c2`") && e.contains("chart"), "{e}");
        assert!(attachable("file://photos/a.JPG") && !attachable("file://notes.txt"));
        assert_eq!(
            place_in_text("Look: {{image}} then {{ q }}", &vars),
            r#"Look: {{ file("image") }} then {{ q }}"#
        );
    }
}
