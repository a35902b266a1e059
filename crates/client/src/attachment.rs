//! Files a message carries — images, documents, audio — as promptgauge sends them
//! (docs/guide/attachments.md). Each one's kind is read from its bytes, never from its
//! name; its size and SHA-256 are known from the bench's load on, and where it sits in its
//! message's text is a byte offset. What each protocol makes of a kind is the protocol's
//! (`Protocol::accepts`, and the parts its body writes); a kind, or a place, a protocol
//! has no part for is refused when the bench is loaded, never dropped.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::transport::RequestBody;

/// What a file is, as its bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Png,
    Jpeg,
    Webp,
    Gif,
    Pdf,
    /// Plain text (UTF-8): sent as text wherever a protocol takes text.
    Text,
    Wav,
    Mp3,
}

/// The families the protocols tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFamily {
    Image,
    Document,
    Audio,
}

impl Kind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [Kind; 8] = [
        Kind::Png,
        Kind::Jpeg,
        Kind::Webp,
        Kind::Gif,
        Kind::Pdf,
        Kind::Text,
        Kind::Wav,
        Kind::Mp3,
    ];

    /// The kind `bytes` are, from their first bytes; `None` for anything else (an SVG, an
    /// executable, a Word file, binary data).
    pub fn sniff(bytes: &[u8]) -> Option<Kind> {
        let at =
            |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
        if at(0, b"\x89PNG\r\n\x1a\n") {
            Some(Kind::Png)
        } else if at(0, b"\xff\xd8\xff") {
            Some(Kind::Jpeg)
        } else if at(0, b"RIFF") && at(8, b"WEBP") {
            Some(Kind::Webp)
        } else if at(0, b"GIF87a") || at(0, b"GIF89a") {
            Some(Kind::Gif)
        } else if at(0, b"%PDF-") {
            Some(Kind::Pdf)
        } else if at(0, b"RIFF") && at(8, b"WAVE") {
            Some(Kind::Wav)
        } else if at(0, b"ID3") || mp3_frame(bytes) {
            Some(Kind::Mp3)
        } else if is_text(bytes) {
            Some(Kind::Text)
        } else {
            None
        }
    }

    /// What a file is — a case's file by its path, a data URL's bytes, a URL `--fetch-urls`
    /// downloaded (`served_as`: its `Content-Type`) — or why it is no file promptgauge
    /// sends: empty, an HTML page or an SVG image (by what a server said it served, or by
    /// the first element of bytes that are text), or none of the kinds. The one sniffer
    /// every file goes through.
    pub fn of_file(bytes: &[u8], served_as: Option<&str>) -> Result<Kind, NotAFile> {
        if let Some(not) = served_as.and_then(NotAFile::served) {
            return Err(not);
        }
        if bytes.is_empty() {
            return Err(NotAFile::Empty);
        }
        let sniffed = Kind::sniff(bytes);
        // Markup is text (or nearly: a page in Latin-1); a file with another kind's magic
        // bytes is that kind.
        if matches!(sniffed, None | Some(Kind::Text)) {
            match markup(bytes) {
                Some(Markup::Svg) => return Err(NotAFile::Svg),
                Some(Markup::Html) => return Err(NotAFile::Html),
                None => {}
            }
        }
        sniffed.ok_or_else(|| NotAFile::Unknown(why_not_text(bytes)))
    }

    /// The kind a file name's extension promises, when it names one of ours.
    pub fn of_extension(ext: &str) -> Option<Kind> {
        Some(match ext.to_ascii_lowercase().as_str() {
            "png" => Kind::Png,
            "jpg" | "jpeg" => Kind::Jpeg,
            "webp" => Kind::Webp,
            "gif" => Kind::Gif,
            "pdf" => Kind::Pdf,
            "txt" | "md" | "text" => Kind::Text,
            "wav" => Kind::Wav,
            "mp3" => Kind::Mp3,
            _ => return None,
        })
    }

    /// The kind of a media type (a data URL's, or `kind:` as a case writes it).
    pub fn of_media_type(media: &str) -> Option<Kind> {
        let media = media.trim().to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|k| k.media_type() == media || k.word() == media)
            .or(match media.as_str() {
                "image/jpg" => Some(Kind::Jpeg),
                "audio/wave" | "audio/x-wav" => Some(Kind::Wav),
                "audio/mp3" => Some(Kind::Mp3),
                "jpg" => Some(Kind::Jpeg),
                _ => None,
            })
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Kind::Png => "image/png",
            Kind::Jpeg => "image/jpeg",
            Kind::Webp => "image/webp",
            Kind::Gif => "image/gif",
            Kind::Pdf => "application/pdf",
            Kind::Text => "text/plain",
            Kind::Wav => "audio/wav",
            Kind::Mp3 => "audio/mpeg",
        }
    }

    /// Its short name, as `kind:` takes it and the journal writes it.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Png => "png",
            Kind::Jpeg => "jpeg",
            Kind::Webp => "webp",
            Kind::Gif => "gif",
            Kind::Pdf => "pdf",
            Kind::Text => "text",
            Kind::Wav => "wav",
            Kind::Mp3 => "mp3",
        }
    }

    /// As a sentence says it: "a PNG image".
    pub fn said(self) -> &'static str {
        match self {
            Kind::Png => "a PNG image",
            Kind::Jpeg => "a JPEG image",
            Kind::Webp => "a WebP image",
            Kind::Gif => "a GIF image",
            Kind::Pdf => "a PDF document",
            Kind::Text => "a plain-text document",
            Kind::Wav => "WAV audio",
            Kind::Mp3 => "MP3 audio",
        }
    }

    pub fn family(self) -> FileFamily {
        match self {
            Kind::Png | Kind::Jpeg | Kind::Webp | Kind::Gif => FileFamily::Image,
            Kind::Pdf | Kind::Text => FileFamily::Document,
            Kind::Wav | Kind::Mp3 => FileFamily::Audio,
        }
    }

    /// The largest file of this kind the strictest of the major providers takes (bytes,
    /// before base64): Anthropic's 5 MB an image, 32 MB a request for a PDF, OpenAI's
    /// 25 MB for audio; 1 MiB of plain text. `limits.attachment_bytes` overrides it.
    pub fn default_limit(self) -> u64 {
        match self.family() {
            FileFamily::Image => 5 * 1024 * 1024,
            FileFamily::Audio => 25 * 1024 * 1024,
            FileFamily::Document if self == Kind::Text => 1024 * 1024,
            FileFamily::Document => 32 * 1024 * 1024,
        }
    }
}

/// Why bytes are no file promptgauge sends ([`Kind::of_file`]): each says what it found,
/// and [`NotAFile::fix`] what to attach instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAFile {
    Empty,
    /// An SVG image: text to a byte sniffer, but an image no provider takes.
    Svg,
    /// An HTML page: a sign-in or error page where a file should be, or a page that a
    /// model would read as its markup, not as a browser shows it.
    Html,
    /// A server said it served this media type (an HTML page, an SVG image): never sent,
    /// whatever the bytes look like.
    ServedAs(String),
    /// None of the kinds; for bytes that are nearly text, why they are not (", which …").
    Unknown(String),
}

impl std::fmt::Display for NotAFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAFile::Empty => f.write_str("is empty: it is not a file promptgauge can send"),
            NotAFile::Svg => f.write_str("is an SVG image, which no provider takes"),
            NotAFile::Html => f.write_str(
                "is an HTML page, which promptgauge does not attach (a page is not shown to the model as a browser would show it)",
            ),
            NotAFile::ServedAs(media) => write!(
                f,
                "is served as {media} ({}), which promptgauge does not send",
                if media.contains("svg") {
                    "an SVG image"
                } else {
                    "a web page: often a sign-in or error page where the file should be"
                }
            ),
            NotAFile::Unknown(why) => write!(f, "is not a file promptgauge can send{why}"),
        }
    }
}

impl NotAFile {
    /// A response served as `content_type` (an HTML page, an SVG image): refused whatever
    /// its bytes, before they are read.
    pub fn served(content_type: &str) -> Option<NotAFile> {
        let media = content_type.split(';').next()?.trim().to_ascii_lowercase();
        matches!(
            media.as_str(),
            "text/html" | "application/xhtml+xml" | "image/svg+xml"
        )
        .then_some(NotAFile::ServedAs(media))
    }

    /// What to attach instead.
    pub fn fix(&self) -> &'static str {
        match self {
            NotAFile::Empty => "give the file its content, or leave it out of the case",
            NotAFile::Svg => "convert it to PNG (e.g. rsvg-convert in.svg -o out.png)",
            NotAFile::Html | NotAFile::ServedAs(_) => {
                "attach what the page shows (a PDF or a PNG of it), or its text as a .txt file; for a URL, check that it serves the file itself"
            }
            NotAFile::Unknown(_) => {
                "attach PNG, JPEG, WebP or GIF images, PDF or plain-text (UTF-8) documents, WAV or MP3 audio"
            }
        }
    }
}

/// Markup a byte sniffer would take for plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Markup {
    Svg,
    Html,
}

/// The elements whose tag, first in a file, make it an HTML page (the WHATWG MIME
/// Sniffing Standard's list for `text/html`).
const HTML_TAGS: [&str; 15] = [
    "html", "head", "script", "iframe", "h1", "div", "font", "table", "a", "style", "title", "b",
    "body", "br", "p",
];

/// Whether `bytes` are an SVG image or an HTML page: what their first element is, after
/// a byte-order mark, white space, the XML declaration, processing instructions, comments
/// and the doctype, however long these are (an SVG whose tag comes after kilobytes of
/// comments is still an SVG). Text that only mentions `<svg` further on is text.
fn markup(bytes: &[u8]) -> Option<Markup> {
    let mut rest = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    loop {
        rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
        let starts = |p: &[u8]| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
        let past = |end: &[u8]| memchr::memmem::find(rest, end).map(|at| &rest[at + end.len()..]);
        if starts(b"<!--") {
            rest = past(b"-->")?;
        } else if starts(b"<?") {
            rest = past(b"?>")?;
        } else if starts(b"<!doctype") {
            let end = memchr::memchr(b'>', rest).unwrap_or(rest.len());
            let doctype = String::from_utf8_lossy(&rest[9..end]).to_ascii_lowercase();
            match doctype.split_whitespace().next() {
                Some("html") => return Some(Markup::Html),
                Some("svg") => return Some(Markup::Svg),
                _ => rest = rest.get(end + 1..)?,
            }
        } else {
            break;
        }
    }
    let name = rest.strip_prefix(b"<")?;
    let len = name
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'))
        .count();
    // A tag ends its name with white space, `>` or `/` (`<a>`, not `<abc`).
    if !matches!(name.get(len), Some(b) if b.is_ascii_whitespace() || matches!(b, b'>' | b'/')) {
        return None;
    }
    let name = String::from_utf8_lossy(&name[..len]).to_ascii_lowercase();
    let local = name.rsplit(':').next().unwrap_or(&name);
    if local == "svg" {
        Some(Markup::Svg)
    } else if HTML_TAGS.contains(&name.as_str()) {
        Some(Markup::Html)
    } else {
        None
    }
}

/// Whether `bytes` start with an MPEG audio frame header (sync, layer III).
fn mp3_frame(bytes: &[u8]) -> bool {
    matches!(bytes, [0xff, b, ..] if b & 0xe0 == 0xe0 && b & 0x06 == 0x02)
}

/// UTF-8 with no NUL nor other control character but whitespace: text a person wrote.
fn is_text(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    text.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
}

/// Why bytes that are not a known kind are not text either: not UTF-8, or a control
/// character (" (as text: …)" for the message; empty for bytes that are plainly binary).
fn why_not_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Err(e) if !bytes[..bytes.len().min(1024)].contains(&0) => {
            format!(" (as text: not UTF-8 at byte {})", e.valid_up_to())
        }
        Err(_) => String::new(),
        Ok(text) => text
            .char_indices()
            .find(|(_, c)| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
            .map(|(at, c)| {
                format!(
                    " (as text: it holds the control character U+{:04X} at byte {at})",
                    c as u32
                )
            })
            .unwrap_or_default(),
    }
}

/// A file's bytes in hand, with their data URL made once: a run encodes a file once,
/// however many variants, repeats and attempts send it, and each request's body carries
/// that one encoding as a piece of its own ([`body_of`]), not a copy.
pub struct FileBytes {
    /// A text file's bytes (sent as text, never encoded).
    text: Option<Box<[u8]>>,
    media_type: &'static str,
    data_url: OnceLock<bytes::Bytes>,
}

impl FileBytes {
    /// FileBytes bytes: a text file as it is, any other as its data URL alone (encoded now; the
    /// raw bytes are not kept beside it).
    pub fn new(bytes: impl Into<Box<[u8]>>, kind: Kind) -> Arc<FileBytes> {
        let bytes: Box<[u8]> = bytes.into();
        let held = FileBytes {
            text: None,
            media_type: kind.media_type(),
            data_url: OnceLock::new(),
        };
        if kind == Kind::Text {
            return Arc::new(FileBytes {
                text: Some(bytes),
                ..held
            });
        }
        let _ = held.data_url.set(encode(kind.media_type(), &bytes));
        Arc::new(held)
    }

    /// Its bytes: a text file's as held, any other's decoded from its base64 (a copy).
    pub fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.text {
            Some(t) => std::borrow::Cow::Borrowed(t),
            None => std::borrow::Cow::Owned(
                base64::engine::general_purpose::STANDARD
                    .decode(self.base64())
                    .unwrap_or_default(),
            ),
        }
    }

    /// `data:{media type};base64,{bytes}`.
    fn encoded(&self) -> &bytes::Bytes {
        self.data_url
            .get_or_init(|| encode(self.media_type, self.text.as_deref().unwrap_or_default()))
    }

    /// Where the base64 starts in the data URL.
    fn prefix_len(&self) -> usize {
        "data:;base64,".len() + self.media_type.len()
    }

    pub fn data_url(&self) -> &str {
        std::str::from_utf8(self.encoded()).unwrap_or_default()
    }

    /// The bytes in base64 (the data URL's tail).
    pub fn base64(&self) -> &str {
        &self.data_url()[self.prefix_len()..]
    }

    /// The data URL (`whole`) or its base64, as a piece of a body: shared, not copied.
    fn piece(&self, whole: bool) -> bytes::Bytes {
        let url = self.encoded();
        if whole {
            url.clone()
        } else {
            url.slice(self.prefix_len()..)
        }
    }
}

/// `bytes` as a data URL of `media_type`.
fn encode(media_type: &str, bytes: &[u8]) -> bytes::Bytes {
    let prefix = format!("data:{media_type};base64,");
    let mut url = String::with_capacity(prefix.len() + bytes.len().div_ceil(3) * 4);
    url.push_str(&prefix);
    base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut url);
    bytes::Bytes::from(url)
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileBytes({} encoded bytes of {})",
            self.encoded().len(),
            self.media_type
        )
    }
}

impl PartialEq for FileBytes {
    fn eq(&self, other: &FileBytes) -> bool {
        self.text == other.text && self.encoded() == other.encoded()
    }
}

impl Eq for FileBytes {}

/// The bytes a bench's file was last read into, while a job still holds them: the jobs of
/// a case are sent close together (case-major order), so its variants and repeats share
/// one read, one hash check and one encoding; once none holds them, they are freed.
#[derive(Default, Clone)]
pub struct Recent(Arc<Mutex<Weak<FileBytes>>>);

impl Recent {
    pub fn get(&self) -> Option<Arc<FileBytes>> {
        self.0.lock().ok()?.upgrade()
    }

    pub fn set(&self, held: &Arc<FileBytes>) {
        if let Ok(mut w) = self.0.lock() {
            *w = Arc::downgrade(held);
        }
    }
}

impl std::fmt::Debug for Recent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recent")
    }
}

/// Two attachments are the same whatever was last read for them.
impl PartialEq for Recent {
    fn eq(&self, _: &Recent) -> bool {
        true
    }
}

impl Eq for Recent {}

/// Where an attachment's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// In hand: read from a file (verified against its hash when the request is built) or
    /// decoded from a data URL.
    Bytes(Arc<FileBytes>),
    /// Not fetched: the provider is given the URL.
    Url(String),
}

/// One file a case attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The case's name for it (what a template's `file("…")` names).
    pub name: String,
    pub kind: Kind,
    /// Where it came from, as the case wrote it: a path (relative to the case file), a
    /// URL, or `data:` for a data URL.
    pub origin: String,
    /// Its size in bytes; 0 for a URL not fetched.
    pub size: u64,
    /// SHA-256 of its bytes, hex; `None` for a URL not fetched.
    pub sha256: Option<String>,
    /// An image's `detail` (OpenAI's `low`, `high`, `auto`), when the case asks for one.
    pub detail: Option<String>,
    /// Its bytes, or its URL. A file's bytes are read when its job's request is built
    /// (`None` until then: a bench's files are not all held in memory).
    pub source: Option<FileSource>,
    /// The file its bytes are read from, for a path (never part of what is sent, nor of the
    /// cache key).
    pub path: Option<std::path::PathBuf>,
    /// Its bytes as last read from `path`, while a job holds them.
    pub recent: Recent,
    /// The prompt tokens it costs, by each provider's published rule, measured from its
    /// bytes when the bench is loaded.
    pub tokens: FileTokens,
}

/// What a file costs in prompt tokens, by OpenAI's rule and by Anthropic's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileTokens {
    pub openai: u64,
    pub anthropic: u64,
}

/// The most pages of a PDF OpenAI and Anthropic read in one request: what a PDF given by
/// URL is held at unless an endpoint's `limits.max_pdf_pages` says otherwise.
pub const PDF_PAGES_READ: u32 = 100;

/// What a PDF costs a page: each page is read as its text and as an image of the page, and
/// Anthropic counts 1,500 to 3,000 tokens a page; the upper figure, for both providers.
const PDF_PAGE_TOKENS: u64 = 3_000;

impl FileTokens {
    /// The most either provider counts: what a hold before sending assumes.
    pub fn most(self) -> u64 {
        self.openai.max(self.anthropic)
    }

    /// A PDF of `pages` pages.
    pub fn pdf(pages: u64) -> FileTokens {
        FileTokens {
            openai: pages * PDF_PAGE_TOKENS,
            anthropic: pages * PDF_PAGE_TOKENS,
        }
    }

    /// The tokens `bytes` of `kind` cost (`detail`: an image's OpenAI detail). A URL's,
    /// whose bytes are not known before it is sent, at the most the provider may count:
    /// the image each rule counts most (OpenAI's 768 × 2048 at high detail, Anthropic's
    /// cap), a PDF of [`PDF_PAGES_READ`] pages (an endpoint's `limits.max_pdf_pages` sets
    /// it again before a run: [`FileTokens::pdf`]). A URL of audio or text is never sent
    /// (no protocol takes one: it is fetched or refused), so its figure holds nothing.
    pub fn of(kind: Kind, bytes: Option<&[u8]>, detail: Option<&str>) -> FileTokens {
        let low = detail == Some("low");
        match kind.family() {
            FileFamily::Image => match bytes.and_then(|b| imagesize::blob_size(b).ok()) {
                Some(size) => {
                    let (w, h) = (size.width as u64, size.height as u64);
                    FileTokens {
                        openai: openai_image(w, h, low),
                        anthropic: anthropic_image(w, h),
                    }
                }
                None => FileTokens {
                    openai: openai_image(768, 2048, low),
                    anthropic: anthropic_image(4096, 4096),
                },
            },
            FileFamily::Document if kind == Kind::Text => {
                let n = bytes.map_or(0, |b| String::from_utf8_lossy(b).chars().count()) as u64;
                FileTokens {
                    openai: n.div_ceil(4),
                    anthropic: n.div_ceil(4),
                }
            }
            FileFamily::Document => {
                FileTokens::pdf(bytes.map_or(u64::from(PDF_PAGES_READ), pdf_pages))
            }
            FileFamily::Audio => {
                // OpenAI's audio input: about ten tokens a second.
                let seconds = bytes.map_or(60.0, |b| audio_seconds(kind, b));
                FileTokens {
                    openai: (seconds * 10.0).ceil() as u64,
                    anthropic: 0,
                }
            }
        }
    }
}

/// OpenAI's rule for an image of `w` × `h`: 85 tokens at low detail; otherwise scaled to
/// fit 2048 × 2048, then its short side to 768, and 170 tokens a 512-pixel tile plus 85.
fn openai_image(w: u64, h: u64, low: bool) -> u64 {
    if low || w == 0 || h == 0 {
        return 85;
    }
    let (mut w, mut h) = (w as f64, h as f64);
    let fit = (2048.0 / w.max(h)).min(1.0);
    w *= fit;
    h *= fit;
    let short = (768.0 / w.min(h)).min(1.0);
    w *= short;
    h *= short;
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as u64
}

/// Anthropic's rule for an image of `w` × `h`: scaled to fit 1568 pixels on its long side,
/// then width × height / 750 tokens, at most about 1,600.
fn anthropic_image(w: u64, h: u64) -> u64 {
    let (mut w, mut h) = (w as f64, h as f64);
    let fit = (1568.0 / w.max(h).max(1.0)).min(1.0);
    w *= fit;
    h *= fit;
    ((w * h / 750.0).ceil() as u64).min(1_600)
}

/// A PDF's pages: its `/Type /Page` objects (at least one).
fn pdf_pages(bytes: &[u8]) -> u64 {
    let mut n = 0u64;
    for at in memchr::memmem::find_iter(bytes, b"/Type") {
        let rest = &bytes[at + 5..];
        let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
        if rest.starts_with(b"/Page") && !rest.starts_with(b"/Pages") {
            n += 1;
        }
    }
    n.max(1)
}

/// How long a clip plays: a WAV's data over its byte rate; an MP3's size over its first
/// frame's bit rate (128 kb/s when it says none).
fn audio_seconds(kind: Kind, bytes: &[u8]) -> f64 {
    if kind == Kind::Wav {
        let rate = bytes
            .get(28..32)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let data = memchr::memmem::find(bytes, b"data")
            .and_then(|at| bytes.get(at + 4..at + 8))
            .map_or(bytes.len() as u32, |b| {
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            });
        return if rate == 0 {
            60.0
        } else {
            f64::from(data) / f64::from(rate)
        };
    }
    const KBPS: [u32; 15] = [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ];
    let frame = memchr::memchr_iter(0xff, bytes)
        .find(|&i| bytes.get(i + 1).is_some_and(|b| b & 0xe0 == 0xe0));
    let kbps = frame
        .and_then(|i| bytes.get(i + 2))
        .and_then(|b| KBPS.get(usize::from(b >> 4)).copied())
        .filter(|k| *k > 0)
        .unwrap_or(128);
    bytes.len() as f64 * 8.0 / (f64::from(kbps) * 1000.0)
}

impl Attachment {
    /// The file's name as a document part sends it (OpenAI's `filename`).
    pub fn file_name(&self) -> &str {
        let name = self
            .origin
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(&self.origin);
        if name.is_empty() || self.origin.starts_with("data:") {
            &self.name
        } else {
            name
        }
    }

    /// Its URL, when it is one the provider is given.
    pub fn url(&self) -> Option<&str> {
        match &self.source {
            Some(FileSource::Url(u)) => Some(u),
            _ => None,
        }
    }

    /// Its bytes, when they are in hand (decoded from their base64, but for a text file's).
    pub fn bytes(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match &self.source {
            Some(FileSource::Bytes(b)) => Some(b.bytes()),
            _ => None,
        }
    }

    /// Its bytes in base64 (encoded once, however often it is sent).
    pub fn base64(&self) -> &str {
        match &self.source {
            Some(FileSource::Bytes(b)) => b.base64(),
            _ => "",
        }
    }

    /// Its data URL as a request's JSON holds it until [`body_of`] puts the shared
    /// encoding there (a mark); its URL, for a URL.
    pub fn data_url_in_body(&self) -> String {
        match (&self.source, &self.sha256) {
            (Some(FileSource::Bytes(_)), Some(hash)) => mark(hash, true),
            _ => self.data_url().to_string(),
        }
    }

    /// Its base64 as a request's JSON holds it until [`body_of`] puts it there (a mark).
    pub fn base64_in_body(&self) -> String {
        match (&self.source, &self.sha256) {
            (Some(FileSource::Bytes(_)), Some(hash)) => mark(hash, false),
            _ => self.base64().to_string(),
        }
    }

    /// Its bytes as a data URL, or its URL.
    pub fn data_url(&self) -> &str {
        match &self.source {
            Some(FileSource::Bytes(b)) => b.data_url(),
            Some(FileSource::Url(u)) => u,
            None => "",
        }
    }

    /// Its text, for a plain-text document.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes().unwrap_or_default()).into_owned()
    }

    /// How many bytes it adds to a request's body (base64 grows it by a third).
    pub fn sent_bytes(&self) -> u64 {
        match (&self.source, self.kind) {
            (Some(FileSource::Url(u)), _) => u.len() as u64,
            (_, Kind::Text) => self.size,
            _ => self.size.div_ceil(3) * 4,
        }
    }
}

/// This process's marks' prefix: random, so no text a case holds is taken for one.
fn mark_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| format!("pgfile{:016x}", rand::random::<u64>()))
}

/// What a body's JSON holds where a file's data URL (`whole`) or base64 goes: letters and
/// digits only, so JSON writes it as it is.
fn mark(hash: &str, whole: bool) -> String {
    format!("{}{}{hash}", mark_prefix(), if whole { 'u' } else { 'b' })
}

/// A request's JSON as its body: each mark of a file of `files` (the files its messages
/// carry) replaced by that file's encoding, as a piece of its own shared with every other
/// request that sends the file.
pub fn body_of<'a>(json: &impl Serialize, files: impl Iterator<Item = &'a Placed>) -> RequestBody {
    let text = serde_json::to_vec(json).unwrap_or_default();
    let held: Vec<(&str, &Arc<FileBytes>)> = files
        .filter_map(|p| match (&p.file.source, &p.file.sha256) {
            (Some(FileSource::Bytes(h)), Some(hash)) => Some((hash.as_str(), h)),
            _ => None,
        })
        .collect();
    if held.is_empty() {
        return RequestBody::from(text);
    }
    let text = bytes::Bytes::from(text);
    let prefix = mark_prefix().as_bytes();
    let finder = memchr::memmem::Finder::new(prefix);
    let mut pieces = Vec::new();
    let mut at = 0;
    while let Some(found) = finder.find(&text[at..]).map(|i| at + i) {
        let after = found + prefix.len();
        let whole = text.get(after) == Some(&b'u');
        let hash = text.get(after + 1..after + 65).unwrap_or_default();
        let Some((_, h)) = held.iter().find(|(k, _)| k.as_bytes() == hash) else {
            // Not a mark of this request's files: text, kept.
            pieces.push(text.slice(at..after));
            at = after;
            continue;
        };
        pieces.push(text.slice(at..found));
        pieces.push(h.piece(whole));
        at = after + 65;
    }
    pieces.push(text.slice(at..));
    pieces.retain(|p| !p.is_empty());
    RequestBody::new(pieces)
}

/// An attachment placed in a message: before the byte `at` of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub at: usize,
    pub file: Arc<Attachment>,
}

/// What of a placed attachment shapes the answer, as the cache key and a request's record
/// see it: its kind, its content (hash, or URL), its place and its detail — never the path
/// it was read from, so moving a file changes nothing.
impl Serialize for Placed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let f = &self.file;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("at", &self.at)?;
        m.serialize_entry("kind", &f.kind)?;
        match (&f.sha256, f.url()) {
            (Some(hash), _) => m.serialize_entry("sha256", hash)?,
            (None, Some(url)) => m.serialize_entry("url", url)?,
            (None, None) => {}
        }
        if let Some(d) = &f.detail {
            m.serialize_entry("detail", d)?;
        }
        if f.kind.family() == FileFamily::Document {
            m.serialize_entry("filename", f.file_name())?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Placed {
    /// A placed attachment read back (a cache key's text is never parsed; this exists so
    /// a message that carries none reads as it always did).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            at: usize,
            kind: Kind,
            sha256: Option<String>,
            url: Option<String>,
            detail: Option<String>,
        }
        let r = Raw::deserialize(d)?;
        Ok(Placed {
            at: r.at,
            file: Arc::new(Attachment {
                name: String::new(),
                kind: r.kind,
                origin: r.url.clone().unwrap_or_default(),
                size: 0,
                sha256: r.sha256,
                detail: r.detail,
                source: r.url.map(FileSource::Url),
                path: None,
                recent: Recent::default(),
                tokens: FileTokens::default(),
            }),
        })
    }
}

/// A piece of a message as sent: text, or a file.
#[derive(Debug, Clone, Copy)]
pub enum Piece<'a> {
    Text(&'a str),
    File(&'a Attachment),
}

/// A message's pieces in order: its text cut at each attachment's place (empty text left
/// out).
pub fn pieces<'a>(text: &'a str, placed: &'a [Placed]) -> Vec<Piece<'a>> {
    let mut out = Vec::with_capacity(placed.len() * 2 + 1);
    let mut from = 0;
    for p in placed {
        let at = p.at.clamp(from, text.len());
        let at = (at..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        if at > from {
            out.push(Piece::Text(&text[from..at]));
        }
        out.push(Piece::File(&p.file));
        from = at;
    }
    if from < text.len() || out.is_empty() {
        out.push(Piece::Text(&text[from..]));
    }
    out
}

/// What every protocol here asks of a file's place: plain text goes in any turn (as its
/// text), but only as bytes (a URL would have to be fetched first); any other file only in
/// a user turn (system prompts, the assistant's turns and tool results are text).
pub fn where_files_go(protocol: &str, kind: Kind, role: &str, by_url: bool) -> Result<(), String> {
    if kind == Kind::Text {
        return match by_url {
            true => Err(format!(
                "{protocol} is sent a text file as its text, which a URL is not: run with --fetch-urls (promptgauge then downloads it and sends its bytes), or download it and give its path"
            )),
            false => Ok(()),
        };
    }
    if role != "user" {
        return Err(format!(
            "{protocol} takes {} only in a user turn, not in a `{role}` turn: place it in a user message",
            kind.said()
        ));
    }
    Ok(())
}

/// A message's text with each plain-text file's text at its place (where a protocol takes
/// only text: a system prompt). Other files are not there: a protocol refuses them in such
/// a turn when the bench is loaded.
pub fn with_text_files(text: &str, placed: &[Placed]) -> String {
    pieces(text, placed)
        .into_iter()
        .map(|p| match p {
            Piece::Text(t) => t.to_string(),
            Piece::File(f) if f.kind == Kind::Text => f.text(),
            Piece::File(_) => String::new(),
        })
        .collect()
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_bytes() {
        let riff = |form: &[u8]| [b"RIFF".as_slice(), &[0, 0, 0, 0], form].concat();
        assert_eq!(Kind::sniff(b"\x89PNG\r\n\x1a\n\0\0"), Some(Kind::Png));
        assert_eq!(Kind::sniff(b"\xff\xd8\xff\xe0"), Some(Kind::Jpeg));
        assert_eq!(Kind::sniff(&riff(b"WEBPVP8 ")), Some(Kind::Webp));
        assert_eq!(Kind::sniff(&riff(b"WAVEfmt ")), Some(Kind::Wav));
        assert_eq!(Kind::sniff(b"GIF89a\x01\0"), Some(Kind::Gif));
        assert_eq!(Kind::sniff(b"%PDF-1.4\n"), Some(Kind::Pdf));
        assert_eq!(Kind::sniff(b"ID3\x04\0"), Some(Kind::Mp3));
        assert_eq!(Kind::sniff(&[0xff, 0xfb, 0x90, 0x00]), Some(Kind::Mp3));
        assert_eq!(Kind::sniff("Total: 42 €\n".as_bytes()), Some(Kind::Text));
        // An SVG is text to the sniffer, but never an image: its name says `.svg`, which
        // no kind has, and it is refused as an image anywhere one is expected.
        assert_eq!(Kind::sniff(b"\0\x01\x02binary"), None);
        assert_eq!(Kind::sniff(b"MZ\x90\0"), None);
        assert_eq!(Kind::sniff(b""), Some(Kind::Text));
    }

    /// The one sniffer of every file: markup is found by its first element however long
    /// its prolog, a server's word that it sends a page is taken, and text that only
    /// mentions a tag stays text.
    #[test]
    fn pages_and_svg_images_are_found_by_their_first_element_or_their_content_type() {
        let prolog = format!("<?xml version=\"1.0\"?>\n<!-- {} -->\n", "x".repeat(3000));
        let late_svg =
            format!("{prolog}<!DOCTYPE note>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
        assert_eq!(Kind::of_file(late_svg.as_bytes(), None), Err(NotAFile::Svg));
        assert_eq!(
            Kind::of_file(format!("\u{feff}  {prolog}<svg:svg/>").as_bytes(), None),
            Err(NotAFile::Svg)
        );
        assert_eq!(
            Kind::of_file(b"<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\">", None),
            Err(NotAFile::Svg)
        );
        for page in [
            b"<!doctype html><p>Sign in".as_slice(),
            b"\n<HTML lang=en>",
            b"<!-- generated --><div class=x>Total</div>",
            b"<p>caf\xe9</p>",
        ] {
            assert_eq!(Kind::of_file(page, None), Err(NotAFile::Html), "{page:?}");
        }
        for text in [
            b"<!-- markdownlint-disable -->\n# Receipts\nUse <svg> sparingly.".as_slice(),
            b"An <svg> tag draws vectors; <html> starts a page.",
            b"<abc>data</abc>",
            b"<?xml version=\"1.0\"?><note>buy milk</note>",
        ] {
            assert_eq!(Kind::of_file(text, None), Ok(Kind::Text), "{text:?}");
        }
        assert_eq!(
            Kind::of_file(b"Total: 42", Some("text/html; charset=utf-8")),
            Err(NotAFile::ServedAs("text/html".into()))
        );
        assert_eq!(
            Kind::of_file(b"%PDF-1.4\n", Some("Application/PDF")),
            Ok(Kind::Pdf)
        );
        assert_eq!(Kind::of_file(b"", None), Err(NotAFile::Empty));
        assert_eq!(
            Kind::of_file(b"caf\xe9", None),
            Err(NotAFile::Unknown(" (as text: not UTF-8 at byte 3)".into()))
        );
        // Another kind's magic bytes win over anything that follows them.
        assert_eq!(Kind::of_file(b"%PDF-1.4 <svg>", None), Ok(Kind::Pdf));
    }

    #[test]
    fn a_mark_in_a_case_s_text_that_names_no_file_of_the_request_stays_text() {
        let bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        let placed = Placed {
            at: 0,
            file: Arc::new(Attachment {
                name: "p".into(),
                kind: Kind::Png,
                origin: "p.png".into(),
                size: 8,
                sha256: Some(sha256_hex(&bytes)),
                detail: None,
                source: Some(FileSource::Bytes(FileBytes::new(bytes, Kind::Png))),
                path: None,
                recent: Recent::default(),
                tokens: FileTokens::default(),
            }),
        };
        let json = serde_json::json!({"t": format!("{}u{}", mark_prefix(), "0".repeat(64))});
        let body = body_of(&json, std::iter::once(&placed));
        assert_eq!(body.to_bytes(), serde_json::to_vec(&json).unwrap());
        let json = serde_json::json!({"t": placed.file.data_url_in_body()});
        assert_eq!(body_of(&json, std::iter::once(&placed)).pieces().len(), 3);
    }

    #[test]
    fn a_message_is_cut_at_its_files() {
        let file = |name: &str| {
            Arc::new(Attachment {
                name: name.into(),
                kind: Kind::Png,
                origin: format!("{name}.png"),
                size: 3,
                sha256: Some("ab".into()),
                detail: None,
                source: Some(FileSource::Bytes(FileBytes::new(
                    b"abc".as_slice(),
                    Kind::Png,
                ))),
                path: None,
                recent: Recent::default(),
                tokens: FileTokens::default(),
            })
        };
        let placed = [
            Placed {
                at: 0,
                file: file("a"),
            },
            Placed {
                at: 5,
                file: file("b"),
            },
            Placed {
                at: 11,
                file: file("c"),
            },
        ];
        let said: Vec<String> = pieces("Look: here.", &placed)
            .iter()
            .map(|p| match p {
                Piece::Text(t) => format!("text {t:?}"),
                Piece::File(f) => format!("file {}", f.name),
            })
            .collect();
        assert_eq!(
            said,
            [
                "file a",
                "text \"Look:\"",
                "file b",
                "text \" here.\"",
                "file c"
            ]
        );
        assert_eq!(placed[0].file.data_url(), "data:image/png;base64,YWJj");
        assert_eq!(placed[0].file.sent_bytes(), 4);
        // What the cache key sees: content and place, never the path.
        let key = serde_json::to_string(&placed[0]).unwrap();
        assert_eq!(key, r#"{"at":0,"kind":"png","sha256":"ab"}"#);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// The providers' own worked examples: OpenAI's image token counts (a 1024 × 1024
    /// image at high detail is 765 tokens, 2048 × 4096 is 1,105, any image at low detail
    /// 85) and Anthropic's table (1092 × 1092 about 1,590, 200 × 200 about 54).
    #[test]
    fn image_tokens_follow_each_provider_s_published_rule() {
        assert_eq!(openai_image(1024, 1024, false), 765);
        assert_eq!(openai_image(2048, 4096, false), 1105);
        assert_eq!(openai_image(4096, 8192, true), 85);
        assert_eq!(anthropic_image(1092, 1092), 1590);
        assert_eq!(anthropic_image(200, 200), 54);
        assert_eq!(anthropic_image(4000, 3000), 1600);
        // From the bytes: a PNG's size is in its header.
        let png = [
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".as_slice(),
            &1024u32.to_be_bytes(),
            &1024u32.to_be_bytes(),
            &[8, 2, 0, 0, 0],
        ]
        .concat();
        let t = FileTokens::of(Kind::Png, Some(&png), None);
        assert_eq!((t.openai, t.anthropic, t.most()), (765, 1399, 1399));
        let pdf = b"%PDF-1.4 1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] >> 2 0 obj << /Type /Page >> 3 0 obj << /Type/Page >>";
        assert_eq!(FileTokens::of(Kind::Pdf, Some(pdf), None).openai, 6_000);
        // A URL's, unread: the most either rule counts. No image costs OpenAI more than
        // one fitted to 768 × 2048 (8 tiles), nor Anthropic more than its cap; a PDF is
        // held at the pages a provider reads at most.
        let url = FileTokens::of(Kind::Png, None, None);
        assert_eq!((url.openai, url.anthropic), (1445, 1600));
        for (w, h) in [
            (2048, 2048),
            (1024, 1024),
            (1000, 2700),
            (4000, 3000),
            (300, 9000),
        ] {
            assert!(openai_image(w, h, false) <= url.openai, "{w} × {h}");
            assert!(anthropic_image(w, h) <= url.anthropic, "{w} × {h}");
        }
        assert_eq!(FileTokens::of(Kind::Png, None, Some("low")).openai, 85);
        assert_eq!(FileTokens::of(Kind::Pdf, None, None).most(), 300_000);
        // A WAV of 2 s at 16 kHz, 16-bit mono: 32,000 bytes a second.
        let mut wav = b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x80\x3e\0\0".to_vec();
        wav.extend_from_slice(&32_000u32.to_le_bytes());
        wav.extend_from_slice(b"\x02\0\x10\0data");
        wav.extend_from_slice(&64_000u32.to_le_bytes());
        assert_eq!(FileTokens::of(Kind::Wav, Some(&wav), None).openai, 20);
    }
}
