//! A case's files (docs/guide/attachments.md): `files:` as a case writes it — a path
//! relative to the case file, a URL, or a data URL, alone or as `{path | url | data,
//! detail, kind}`, one or many (a list, or names to files) — each read once when the bench
//! is loaded: its kind from its bytes (a name that promises another kind is an error), its
//! size and its SHA-256. A file's bytes are read again when its job's request is built
//! ([`loaded`]), and must still be what was loaded.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Map, Value};

use super::error::{FilePos, InputError};
use promptgauge_client::attachment::{
    Attachment, FileBytes, FileSource, FileTokens, Kind, Recent, sha256_hex,
};

/// The largest file a case may name at all: the endpoint's `limits.max_file_bytes` (or
/// its kind's default) is checked against each file once the endpoints are known.
pub const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// `file` with its bytes in hand, as a request carries it: a path's read again, and
/// refused when it is no longer what the bench loaded; a URL's or data URL's as it is.
pub fn loaded(file: &Arc<Attachment>) -> Result<Arc<Attachment>, String> {
    let Some(path) = &file.path else {
        return Ok(file.clone());
    };
    let held = match file.recent.get() {
        Some(held) => held,
        None => {
            let bytes = promptgauge_base::files::read_capped(path, MAX_FILE_BYTES)
                .map_err(|e| format!("the file {} cannot be read: {e}", file.origin))?;
            if file.sha256.as_deref() != Some(sha256_hex(&bytes).as_str()) {
                return Err(format!(
                    "the file {} changed since the bench was loaded: run again to send what it holds now",
                    file.origin
                ));
            }
            let held = FileBytes::new(bytes, file.kind);
            file.recent.set(&held);
            held
        }
    };
    let mut file = (**file).clone();
    file.source = Some(FileSource::Bytes(held));
    Ok(Arc::new(file))
}

/// Reads the bytes of every file `messages` carry from a path (a file placed twice is read
/// once).
pub fn load_files(messages: &mut [promptgauge_client::ChatMessage]) -> Result<(), String> {
    let mut read: Vec<(Arc<Attachment>, Arc<Attachment>)> = Vec::new();
    for placed in messages.iter_mut().flat_map(|m| m.files.iter_mut()) {
        if placed.file.path.is_none() || placed.file.bytes().is_some() {
            continue;
        }
        if let Some((_, done)) = read
            .iter()
            .find(|(from, _)| Arc::ptr_eq(from, &placed.file))
        {
            placed.file = done.clone();
            continue;
        }
        let done = loaded(&placed.file)?;
        read.push((placed.file.clone(), done.clone()));
        placed.file = done;
    }
    Ok(())
}

/// A case's `files:` (a list, a map of names to files, or one file), read.
pub(crate) fn files_of(
    value: &Value,
    id: &str,
    here: &FilePos,
) -> Result<Vec<Arc<Attachment>>, InputError> {
    let named: Vec<(Option<String>, &Value)> = match value {
        Value::Null => Vec::new(),
        Value::Array(list) => list.iter().map(|v| (None, v)).collect(),
        Value::Object(map) if is_spec(map) => vec![(None, value)],
        Value::Object(map) => map.iter().map(|(k, v)| (Some(k.clone()), v)).collect(),
        Value::String(_) => vec![(None, value)],
        _ => {
            return Err(bad(
                id,
                here,
                "`files` must be a file, a list of files, or names to files",
            ));
        }
    };
    let mut files: Vec<Arc<Attachment>> = Vec::with_capacity(named.len());
    for (name, spec) in named {
        let file = one_file(name, spec, id, here)?;
        if files.iter().any(|f| f.name == file.name) {
            return Err(bad(
                id,
                here,
                &format!("two files are named `{}`", file.name),
            )
            .fix("name each file: \"files\": {\"front\": \"a/photo.png\", \"back\": \"b/photo.png\"}"));
        }
        files.push(file);
    }
    Ok(files)
}

/// What [`files_of`] takes, for editors: a file, a list of files, or names to files.
pub(super) struct WrittenFiles;

/// One file as a case writes it: a path, a URL or a data URL, or an object with one of them.
struct WrittenFile;

impl schemars::JsonSchema for WrittenFiles {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Files".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let file = generator.subschema_for::<WrittenFile>();
        schemars::json_schema!({
            "description": "A file, a list of files, or names to files ({receipt: r-001.png}).",
            "anyOf": [
                file,
                { "type": "array", "items": file },
                // Names to files; an object with `path`, `url` or `data` is one file.
                {
                    "type": "object",
                    "additionalProperties": file,
                    "not": { "anyOf": [
                        { "required": ["path"] },
                        { "required": ["url"] },
                        { "required": ["data"] }
                    ] }
                },
                { "type": "null" }
            ]
        })
    }
}

impl schemars::JsonSchema for WrittenFile {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "File".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A path (relative to the case file), a URL or a data URL; or {path | url | data, detail, kind}.",
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "path": { "type": "string", "description": "Relative to the case file." },
                        "url": { "type": "string" },
                        "data": { "type": "string", "description": "A data URL." },
                        "detail": { "enum": ["low", "high", "auto"], "description": "An image's detail (OpenAI's)." },
                        "kind": { "type": "string", "description": "A media type (image/png) or a word (png, pdf), where a URL does not say it." }
                    },
                    "oneOf": [
                        { "required": ["path"] },
                        { "required": ["url"] },
                        { "required": ["data"] }
                    ]
                }
            ]
        })
    }
}

/// Whether an object is one file's spec rather than names to files.
fn is_spec(map: &Map<String, Value>) -> bool {
    ["path", "url", "data"].iter().any(|k| map.contains_key(*k))
}

fn bad(id: &str, here: &FilePos, what: &str) -> InputError {
    InputError::new(here.clone(), format!("case `{id}`: {what}")).fix(
        "write \"files\": [\"images/r-001.png\"], or {\"receipt\": \"images/r-001.png\"}, or {\"path\": \"…\", \"detail\": \"low\"}; paths are relative to the case file",
    )
}

/// One file: a path, a URL or a data URL, as a string or `{path | url | data, detail, kind}`.
fn one_file(
    name: Option<String>,
    spec: &Value,
    id: &str,
    here: &FilePos,
) -> Result<Arc<Attachment>, InputError> {
    let (text, detail, kind) = match spec {
        Value::String(s) => (s.clone(), None, None),
        Value::Object(map) => spec_fields(map, id, here)?,
        _ => {
            return Err(bad(
                id,
                here,
                "each file is a path, a URL, a data URL, or {\"path\": …}",
            ));
        }
    };
    let detail = match detail.as_deref() {
        None | Some("low" | "high" | "auto") => detail,
        Some(d) => {
            return Err(bad(id, here, &format!("`detail` is `{d}`"))
                .fix("an image's detail is low, high or auto (OpenAI's image detail)"));
        }
    };
    let mut file = if text.starts_with("data:") {
        from_data_url(&text, id, here)?
    } else if text.starts_with("https://") || text.starts_with("http://") {
        from_url(&text, kind, id, here)?
    } else if let Some((scheme, _)) = text.split_once("://") {
        return Err(bad(
            id,
            here,
            &format!("`{scheme}://` is not a place promptgauge reads files from"),
        )
        .fix("give a path (relative to the case file), an http(s) URL, or a data URL"));
    } else {
        from_path(&text, id, here)?
    };
    let attachment = Arc::make_mut(&mut file);
    if detail.as_deref() == Some("low") {
        // OpenAI counts a low-detail image at 85 tokens, whatever its size.
        attachment.tokens.openai = 85;
    }
    attachment.detail = detail;
    if let Some(name) = name {
        attachment.name = name;
    }
    Ok(file)
}

/// `{path | url | data, detail, kind}`: the file's text, its detail and its declared kind.
fn spec_fields(
    map: &Map<String, Value>,
    id: &str,
    here: &FilePos,
) -> Result<(String, Option<String>, Option<String>), InputError> {
    let text = |k: &str| map.get(k).and_then(Value::as_str).map(String::from);
    if let Some(unknown) = map
        .keys()
        .find(|k| !["path", "url", "data", "detail", "kind"].contains(&k.as_str()))
    {
        return Err(bad(
            id,
            here,
            &format!("a file has the unknown key `{unknown}`"),
        ));
    }
    let given: Vec<String> = ["path", "url", "data"]
        .iter()
        .filter_map(|k| text(k))
        .collect();
    match given.as_slice() {
        [one] => Ok((one.clone(), text("detail"), text("kind"))),
        _ => Err(bad(
            id,
            here,
            "a file needs exactly one of `path`, `url` and `data`",
        )),
    }
}

/// A file beside the case file: read, its kind sniffed and checked against its name.
fn from_path(written: &str, id: &str, here: &FilePos) -> Result<Arc<Attachment>, InputError> {
    let base = here.file.parent().unwrap_or(Path::new("."));
    let path = base.join(written);
    let bytes = promptgauge_base::files::read_capped(&path, MAX_FILE_BYTES).map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::NotFound => {
                "check the path: it is relative to the case file's folder"
            }
            _ => "check the file (a regular file of at most 512 MiB) and its permissions",
        };
        InputError::new(
            here.clone(),
            format!("case `{id}`: the file {written} cannot be read: {e}"),
        )
        .fix(fix)
    })?;
    let kind = kind_of(&bytes, id, here, written)?;
    let ext = Path::new(written)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    if let Some(promised) = Kind::of_extension(ext).filter(|p| *p != kind) {
        return Err(InputError::new(
            here.clone(),
            format!(
                "case `{id}`: {written} is named as {} but its bytes are {}",
                promised.said(),
                kind.said()
            ),
        )
        .fix(format!(
            "rename it to end in .{} (what it holds), or convert it",
            kind.word()
        )));
    }
    check_readable(kind, &bytes, id, here, written)?;
    let name = Path::new(written)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(written);
    Ok(Arc::new(Attachment {
        name: name.to_string(),
        kind,
        origin: written.to_string(),
        size: bytes.len() as u64,
        sha256: Some(sha256_hex(&bytes)),
        detail: None,
        source: None,
        // Whole, so the reports find it from wherever they are made.
        path: Some(std::fs::canonicalize(&path).unwrap_or(path)),
        recent: Recent::default(),
        tokens: FileTokens::of(kind, Some(&bytes), None),
    }))
}

/// The kind `bytes` are (`client::attachment::Kind::of_file`, the one sniffer), or the
/// error that names the file, what it is and what to attach instead.
fn kind_of(bytes: &[u8], id: &str, here: &FilePos, written: &str) -> Result<Kind, InputError> {
    Kind::of_file(bytes, None).map_err(|not| {
        InputError::new(here.clone(), format!("case `{id}`: {written} {not}")).fix(not.fix())
    })
}

/// An image whose header gives no size is cut short or corrupt: a provider refuses it
/// after it is paid for, so it is refused at load.
fn check_readable(
    kind: Kind,
    bytes: &[u8],
    id: &str,
    here: &FilePos,
    written: &str,
) -> Result<(), InputError> {
    let unreadable = kind.family() == promptgauge_client::attachment::FileFamily::Image
        && !imagesize::blob_size(bytes).is_ok_and(|s| s.width > 0 && s.height > 0);
    if unreadable {
        return Err(InputError::new(
            here.clone(),
            format!(
                "case `{id}`: {written} starts as {} but its size cannot be read from it (cut short, or corrupt)",
                kind.said()
            ),
        )
        .fix("export the image again"));
    }
    Ok(())
}

/// `data:MEDIA;base64,DATA`: decoded, and its bytes must be what its media type says.
fn from_data_url(url: &str, id: &str, here: &FilePos) -> Result<Arc<Attachment>, InputError> {
    let shape = || {
        InputError::new(
            here.clone(),
            format!("case `{id}`: a data URL must read data:MEDIA;base64,DATA"),
        )
        .fix("e.g. data:image/png;base64,iVBORw0KGgo…")
    };
    let (head, data) = url
        .strip_prefix("data:")
        .and_then(|r| r.split_once(','))
        .ok_or_else(shape)?;
    let media = head.strip_suffix(";base64").ok_or_else(shape)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| {
            InputError::new(
                here.clone(),
                format!("case `{id}`: a data URL's base64 is invalid: {e}"),
            )
            .fix("encode the file's bytes in standard base64")
        })?;
    let kind = kind_of(&bytes, id, here, "a data URL")?;
    if Kind::of_media_type(media) != Some(kind) {
        return Err(InputError::new(
            here.clone(),
            format!(
                "case `{id}`: a data URL says {media} but its bytes are {}",
                kind.said()
            ),
        )
        .fix(format!("write data:{};base64,…", kind.media_type())));
    }
    check_readable(kind, &bytes, id, here, "a data URL")?;
    Ok(Arc::new(Attachment {
        name: "data".into(),
        kind,
        origin: format!("data:{media}"),
        size: bytes.len() as u64,
        sha256: Some(sha256_hex(&bytes)),
        detail: None,
        tokens: FileTokens::of(kind, Some(&bytes), None),
        source: Some(FileSource::Bytes(FileBytes::new(bytes, kind))),
        path: None,
        recent: Recent::default(),
    }))
}

/// A URL the provider is given (not fetched): its kind from `kind:`, or its path's
/// extension.
fn from_url(
    url: &str,
    kind: Option<String>,
    id: &str,
    here: &FilePos,
) -> Result<Arc<Attachment>, InputError> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let ext = path
        .rsplit('/')
        .next()
        .and_then(|last| last.rsplit_once('.'))
        .map(|(_, e)| e);
    // What is shown and kept of the URL: no password, no query value (a signed URL's
    // signature is a credential).
    let shown = promptgauge_client::secrets::redact_url(url);
    let kind = match kind.as_deref() {
        Some(k) => Some(Kind::of_media_type(k).ok_or_else(|| {
            InputError::new(
                here.clone(),
                format!("case `{id}`: `kind: {k}` on {shown} is not a kind promptgauge sends"),
            )
            .fix("write one of png, jpeg, webp, gif, pdf, text, wav, mp3 (or a media type such as image/png)")
        })?),
        None => ext.and_then(Kind::of_extension),
    }
    .ok_or_else(|| {
        InputError::new(here.clone(), format!("case `{id}`: what {shown} holds is not known"))
            .fix("say it: {\"url\": \"…\", \"kind\": \"png\"} (png, jpeg, webp, gif, pdf, text, wav or mp3); the cases are read before --fetch-urls downloads anything")
    })?;
    let name = path
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("url");
    Ok(Arc::new(Attachment {
        name: name.to_string(),
        kind,
        origin: shown,
        size: 0,
        sha256: None,
        detail: None,
        source: Some(FileSource::Url(url.to_string())),
        path: None,
        recent: Recent::default(),
        tokens: FileTokens::of(kind, None, None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &[u8] = include_bytes!("../../../examples/receipts/receipts/r-001.png");

    #[test]
    fn files_are_read_named_and_checked_against_their_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r.png"), PNG).unwrap();
        std::fs::write(dir.path().join("fake.png"), b"%PDF-1.4\n").unwrap();
        let here = FilePos::line(&dir.path().join("cases.jsonl"), 3);
        let files = files_of(
            &json!({"receipt": "r.png", "spec": "https://x.test/s.pdf"}),
            "c1",
            &here,
        )
        .unwrap();
        assert_eq!(files[0].name, "receipt");
        assert_eq!(files[0].kind, Kind::Png);
        assert_eq!(files[0].size, PNG.len() as u64);
        assert_eq!(files[1].url(), Some("https://x.test/s.pdf"));
        assert_eq!(files[1].kind, Kind::Pdf);
        // Read when sent: while a job holds the bytes, another job of the case shares
        // them (one read, one hash check, one encoding); once none does, they are freed
        // and read again — refused once changed.
        let first = loaded(&files[0]).unwrap();
        let second = loaded(&files[0]).unwrap();
        let held = |f: &Attachment| match &f.source {
            Some(FileSource::Bytes(h)) => h.clone(),
            _ => panic!("no bytes"),
        };
        assert!(Arc::ptr_eq(&held(&first), &held(&second)));
        assert!(std::ptr::eq(first.data_url(), second.data_url()));
        std::fs::write(dir.path().join("r.png"), [PNG, b"x"].concat()).unwrap();
        assert!(loaded(&files[0]).is_ok(), "still held: not read again");
        drop((first, second));
        assert!(loaded(&files[0]).unwrap_err().contains("changed since"));

        let e = files_of(&json!(["fake.png"]), "c1", &here)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("named as a PNG image but its bytes are a PDF document"),
            "{e}"
        );
        let e = files_of(&json!(["gone.png"]), "c1", &here)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot be read") && e.contains("cases.jsonl:3"),
            "{e}"
        );
        let e = files_of(&json!(["https://x.test/blob"]), "c1", &here)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not known"), "{e}");
        let data = format!(
            "data:image/jpeg;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(PNG)
        );
        let e = files_of(&json!([data]), "c1", &here)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("says image/jpeg but its bytes are a PNG image"),
            "{e}"
        );
        let e = files_of(
            &json!(["r.png", {"path": "r.png", "detail": "low"}]),
            "c1",
            &here,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("two files are named `r.png`"), "{e}");
        let svg = b"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        std::fs::write(dir.path().join("logo.svg"), svg).unwrap();
        let e = files_of(&json!(["logo.svg"]), "c1", &here)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is an SVG image, which no provider takes"),
            "{e}"
        );
    }
}
