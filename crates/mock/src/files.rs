//! What the simulated model makes of the files a request carries: each protocol's parts
//! read as strictly as its provider reads them (a part of another protocol's shape, a bad
//! data URL, a media type that is not the bytes' is a 400), and each file's words — a
//! PNG's `tEXt` chunk, a PDF's text, a WAV's `INFO` comment, a text file whole — read into
//! the prompt, so a model that was sent the file can answer what only the file says, and
//! one that was not cannot. Which parts a protocol carries, and how each is read, is its
//! own file's (`Served::part`); the readers they share (data URLs, base64 checked against
//! its bytes, a file's words) are here.

use base64::Engine;
use serde_json::Value;

use super::served::{Carried, FilesRead, Seen, Served};
use promptgauge_client::attachment::Kind;

/// The text a message's `content` holds for the model: a string as it is; a list of parts
/// with each text part's text and each file's words, in order, every part read as
/// `protocol` reads it. The files it held are counted in `files`.
pub(crate) fn content_text(
    content: &Value,
    protocol: &dyn Served,
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
        text.push_str(&part_text(part, protocol, files)?);
    }
    Ok(text)
}

/// One part's text: its own, or the words of the file it carries.
fn part_text(part: &Value, protocol: &dyn Served, files: &mut FilesRead) -> Result<String, String> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    let (file, document) = match protocol.part(kind, part)? {
        Some(Carried::Text(text)) => return Ok(text),
        Some(Carried::Content(Some(c))) => return content_text(c, protocol, files),
        Some(Carried::Content(None)) => return Ok(String::new()),
        Some(Carried::File(file)) => (file, false),
        Some(Carried::Document(file)) => (file, true),
        None => {
            return Err(format!(
                "this endpoint takes no content part of type `{kind}`"
            ));
        }
    };
    files.count += 1;
    if matches!(file, Seen::Url(_)) && document {
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

/// A text part's text (`kind` names it when it has none).
pub(crate) fn text_part<'a>(kind: &str, part: &Value) -> Result<Option<Carried<'a>>, String> {
    part.get("text")
        .and_then(Value::as_str)
        .map(|t| Some(Carried::Text(t.to_string())))
        .ok_or_else(|| format!("a `{kind}` part needs its `text`"))
}

/// `data:MEDIA;base64,DATA`: its bytes, which must be what the media type says.
pub(crate) fn data_url(url: &str) -> Result<Seen, String> {
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
pub(crate) fn decoded(media: &str, data: &str) -> Result<Seen, String> {
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

/// The file, refused unless it is an image.
pub(crate) fn image_only(seen: Seen) -> Result<Seen, String> {
    match &seen {
        Seen::Bytes(kind, _)
            if !matches!(kind, Kind::Png | Kind::Jpeg | Kind::Webp | Kind::Gif) =>
        {
            Err(format!("an image part holds {}", kind.said()))
        }
        _ => Ok(seen),
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
    use crate::anthropic::ServedMessages;
    use crate::chat::ServedChat;
    use crate::responses::ServedResponses;
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
        let text = content_text(&chat, &ServedChat, &mut n).unwrap();
        assert_eq!(text, "Read it:\n[pdf: What is 2 + 3?]\n");
        assert_eq!(n.count, 1);
        // Another protocol's part, or bytes that are not what the media type says.
        let anthropic_block = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(pdf)}}]);
        assert!(content_text(&anthropic_block, &ServedChat, &mut n).is_err());
        let e = content_text(&anthropic_block, &ServedMessages, &mut n).unwrap_err();
        assert!(e.contains("not image/png"), "{e}");
        let url = json!([{"type": "input_image", "image_url": "https://example.com/a.png"}]);
        assert_eq!(
            content_text(&url, &ServedResponses, &mut n).unwrap(),
            "\n[a file at https://example.com/a.png]\n"
        );
    }
}
