//! What the simulated model makes of the files a request carries: each protocol's parts
//! read as strictly as its provider reads them (a part of another protocol's shape, a bad
//! data URL, a media type that is not the bytes' is a 400), and each file's words — a
//! PNG's `tEXt` chunk, a PDF's text, a WAV's `INFO` comment, a text file whole — read into
//! the prompt, so a model that was sent the file can answer what only the file says, and
//! one that was not cannot.

use base64::Engine;
use serde_json::Value;

use super::wire::Wire;
use promptgauge_client::attachment::Kind;

/// The text a message's `content` holds for the model: a string as it is; a list of parts
/// with each text part's text and each file's words, in order. The files it held are
/// counted in `files`.
pub(super) fn content_text(
    content: &Value,
    wire: Wire,
    files: &mut FilesRead,
) -> Result<String, String> {
    let parts = match content {
        Value::String(s) => return Ok(s.clone()),
        Value::Null => return Ok(String::new()),
        Value::Array(parts) => parts,
        _ => return Err("`content` must be text or a list of parts".into()),
    };
    let mut text = String::new();
    for part in parts {
        text.push_str(&part_text(part, wire, files)?);
    }
    Ok(text)
}

/// The files a request's parts carried, as the simulator read them.
#[derive(Debug, Default)]
pub(super) struct FilesRead {
    pub count: u64,
    /// Documents (PDFs) given by URL: not read here, but billed by their pages.
    pub url_documents: u64,
    /// The largest image's bytes (decoded).
    pub largest_image: usize,
}

/// One part's text: its own, or the words of the file it carries.
fn part_text(part: &Value, wire: Wire, files: &mut FilesRead) -> Result<String, String> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |key: &str| part.get(key).and_then(Value::as_str).map(String::from);
    let file = match (wire, kind) {
        // A call in an earlier assistant turn says nothing the model reads here.
        (Wire::Anthropic, "tool_use") => return Ok(String::new()),
        (Wire::Chat, "text")
        | (Wire::Anthropic, "text")
        | (Wire::Responses, "input_text" | "output_text") => {
            return text("text").ok_or_else(|| format!("a `{kind}` part needs its `text`"));
        }
        (Wire::Anthropic, "tool_result") => {
            return Ok(match part.get("content") {
                Some(c) => content_text(c, wire, files)?,
                None => String::new(),
            });
        }
        (Wire::Chat, "image_url") => chat_image(part)?,
        (Wire::Chat, "input_audio") => chat_audio(part)?,
        (Wire::Chat, "file") => chat_file(part)?,
        (Wire::Responses, "input_image") => responses_image(part)?,
        (Wire::Responses, "input_file") => responses_file(part)?,
        (Wire::Anthropic, "image") => {
            anthropic_source(part, &[Kind::Png, Kind::Jpeg, Kind::Gif, Kind::Webp])?
        }
        (Wire::Anthropic, "document") => anthropic_source(part, &[Kind::Pdf, Kind::Text])?,
        _ => {
            return Err(format!(
                "this endpoint takes no content part of type `{kind}`"
            ));
        }
    };
    files.count += 1;
    if matches!(file, Seen::Url(_))
        && matches!(
            (wire, kind),
            (Wire::Responses, "input_file") | (Wire::Anthropic, "document")
        )
    {
        files.url_documents += 1;
    }
    if let Seen::Bytes(kind, bytes) = &file
        && kind.family() == promptgauge_client::attachment::FileFamily::Image
    {
        files.largest_image = files.largest_image.max(bytes.len());
    }
    Ok(match file {
        Seen::Bytes(kind, bytes) => format!("\n[{}: {}]\n", kind.word(), words(kind, &bytes)),
        // A URL is not fetched: the model is told only that it was given one.
        Seen::Url(url) => format!("\n[a file at {url}]\n"),
    })
}

/// A file a part carries.
enum Seen {
    Bytes(Kind, Vec<u8>),
    Url(String),
}

/// `data:MEDIA;base64,DATA`: its bytes, which must be what the media type says.
fn data_url(url: &str) -> Result<Seen, String> {
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(Seen::Url(url.to_string()));
    }
    let Some((head, data)) = url.strip_prefix("data:").and_then(|r| r.split_once(',')) else {
        return Err("a file's URL must be a data URL (data:…;base64,…) or an http(s) URL".into());
    };
    let Some(media) = head.strip_suffix(";base64") else {
        return Err("a data URL must be base64 (data:MEDIA;base64,…)".into());
    };
    decoded(media, data)
}

/// Base64 `data` of media type `media`, checked against its bytes.
fn decoded(media: &str, data: &str) -> Result<Seen, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("invalid base64 data: {e}"))?;
    let said =
        Kind::of_media_type(media).ok_or_else(|| format!("unsupported media type `{media}`"))?;
    match Kind::sniff(&bytes) {
        Some(kind) if kind == said => Ok(Seen::Bytes(kind, bytes)),
        found => Err(format!(
            "the data is not {media}: its bytes are {}",
            found.map_or("of no supported kind", Kind::said)
        )),
    }
}

fn chat_image(part: &Value) -> Result<Seen, String> {
    let image = part
        .get("image_url")
        .ok_or("an `image_url` part needs its `image_url`")?;
    if let Some(d) = image.get("detail").and_then(Value::as_str)
        && !["low", "high", "auto"].contains(&d)
    {
        return Err(format!(
            "image_url.detail must be low, high or auto, not `{d}`"
        ));
    }
    let url = image
        .get("url")
        .and_then(Value::as_str)
        .ok_or("image_url.url is required")?;
    image_only(data_url(url)?)
}

fn image_only(seen: Seen) -> Result<Seen, String> {
    match &seen {
        Seen::Bytes(kind, _)
            if !matches!(kind, Kind::Png | Kind::Jpeg | Kind::Webp | Kind::Gif) =>
        {
            Err(format!("an image part holds {}", kind.said()))
        }
        _ => Ok(seen),
    }
}

fn chat_audio(part: &Value) -> Result<Seen, String> {
    let audio = part
        .get("input_audio")
        .ok_or("an `input_audio` part needs its `input_audio`")?;
    let format = audio.get("format").and_then(Value::as_str).unwrap_or("");
    let media = match format {
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        other => {
            return Err(format!(
                "input_audio.format must be wav or mp3, not `{other}`"
            ));
        }
    };
    let data = audio
        .get("data")
        .and_then(Value::as_str)
        .ok_or("input_audio.data is required")?;
    decoded(media, data)
}

fn chat_file(part: &Value) -> Result<Seen, String> {
    let file = part.get("file").ok_or("a `file` part needs its `file`")?;
    let data = file
        .get("file_data")
        .and_then(Value::as_str)
        .ok_or("file.file_data is required (a file_id is not known here)")?;
    if file
        .get("filename")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("file.filename is required with file_data".into());
    }
    match data_url(data)? {
        Seen::Url(_) => Err("file.file_data must be a data URL".into()),
        seen => Ok(seen),
    }
}

fn responses_image(part: &Value) -> Result<Seen, String> {
    let url = part
        .get("image_url")
        .and_then(Value::as_str)
        .ok_or("input_image.image_url is required")?;
    image_only(data_url(url)?)
}

fn responses_file(part: &Value) -> Result<Seen, String> {
    if let Some(url) = part.get("file_url").and_then(Value::as_str) {
        return Ok(Seen::Url(url.to_string()));
    }
    let data = part
        .get("file_data")
        .and_then(Value::as_str)
        .ok_or("input_file needs file_data or file_url")?;
    if part
        .get("filename")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("input_file.filename is required with file_data".into());
    }
    data_url(data)
}

/// An Anthropic `image` or `document` block's source: base64 of an allowed media type, a
/// URL, or (a document's) text.
fn anthropic_source(part: &Value, allowed: &[Kind]) -> Result<Seen, String> {
    let source = part.get("source").ok_or("a block needs its `source`")?;
    let field = |k: &str| source.get(k).and_then(Value::as_str);
    match field("type") {
        Some("base64") => {
            let media = field("media_type").ok_or("source.media_type: Field required")?;
            let seen = decoded(media, field("data").ok_or("source.data: Field required")?)?;
            match &seen {
                Seen::Bytes(kind, _) if !allowed.contains(kind) => Err(format!(
                    "source.media_type: {media} is not allowed in this block"
                )),
                _ => Ok(seen),
            }
        }
        Some("url") => Ok(Seen::Url(
            field("url")
                .ok_or("source.url: Field required")?
                .to_string(),
        )),
        Some("text") if allowed.contains(&Kind::Text) => Ok(Seen::Bytes(
            Kind::Text,
            field("data").unwrap_or("").as_bytes().to_vec(),
        )),
        other => Err(format!(
            "source.type `{}` is not accepted here",
            other.unwrap_or("")
        )),
    }
}

/// What the simulated model reads in a file.
pub(super) fn words(kind: Kind, bytes: &[u8]) -> String {
    let found = match kind {
        Kind::Png => png_text(bytes),
        Kind::Pdf => pdf_text(bytes),
        Kind::Wav => wav_comment(bytes),
        Kind::Text => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    found.unwrap_or_else(|| format!("{} of {} bytes", kind.said(), bytes.len()))
}

/// A PNG's `tEXt` chunks' text, joined.
fn png_text(bytes: &[u8]) -> Option<String> {
    let mut at = 8;
    let mut out = Vec::new();
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().ok()?) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = bytes.get(at + 8..at + 8 + len)?;
        if kind == b"tEXt" {
            let text = data.splitn(2, |b| *b == 0).nth(1).unwrap_or_default();
            out.push(String::from_utf8_lossy(text).into_owned());
        }
        at += 12 + len;
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// A PDF's text: the strings of its uncompressed content streams' `Tj` operators.
fn pdf_text(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let re = regex::Regex::new(r"\(((?:[^()\\]|\\.)*)\)\s*Tj").ok()?;
    let found: Vec<String> = re
        .captures_iter(&text)
        .map(|c| c[1].replace("\\(", "(").replace("\\)", ")"))
        .collect();
    (!found.is_empty()).then(|| found.join(" "))
}

/// A WAV's `LIST`/`INFO` `ICMT` comment (where the simulator's test clips keep what they
/// say).
fn wav_comment(bytes: &[u8]) -> Option<String> {
    let at = memchr::memmem::find(bytes, b"ICMT")?;
    let len = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
    let data = bytes.get(at + 8..at + 8 + len)?;
    Some(
        String::from_utf8_lossy(data)
            .trim_end_matches('\0')
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_protocol_s_parts_are_read_and_others_refused() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let pdf = b"%PDF-1.4\nBT (What is 2 + 3?) Tj ET\n";
        let mut n = FilesRead::default();
        let chat = json!([
            {"type": "text", "text": "Read it:"},
            {"type": "file", "file": {"filename": "q.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(pdf))}},
        ]);
        let text = content_text(&chat, Wire::Chat, &mut n).unwrap();
        assert_eq!(text, "Read it:\n[pdf: What is 2 + 3?]\n");
        assert_eq!(n.count, 1);
        // Another protocol's part, or bytes that are not what the media type says.
        let anthropic_block = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(pdf)}}]);
        assert!(content_text(&anthropic_block, Wire::Chat, &mut n).is_err());
        let e = content_text(&anthropic_block, Wire::Anthropic, &mut n).unwrap_err();
        assert!(e.contains("not image/png"), "{e}");
        let url = json!([{"type": "input_image", "image_url": "https://example.com/a.png"}]);
        assert_eq!(
            content_text(&url, Wire::Responses, &mut n).unwrap(),
            "\n[a file at https://example.com/a.png]\n"
        );
    }
}
