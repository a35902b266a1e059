//! A hand-written `text/event-stream` decoder following the WHATWG rules
//! (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>).
//!
//! It is fed network chunks as they come: lines may end in LF, CR or CRLF and be split
//! anywhere, including between the CR and LF of one line ending and inside a UTF-8 character.
//! Lines are split on bytes (CR and LF never occur inside a UTF-8 sequence), then decoded
//! whole, so a character split across chunks decodes correctly.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; empty means the default type, `message`.
    pub event: String,
    pub data: String,
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// The WHATWG event-stream decoder: bytes in, events out, across any chunking.
#[derive(Debug, Default)]
pub struct Decoder {
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF at the start of the next one belongs to it.
    pending_cr: bool,
    /// Bytes of a leading BOM matched so far; `None` once the start of the stream is past.
    bom_matched: Option<usize>,
    data: String,
    has_data: bool,
    event: String,
    /// Comment lines seen (keep-alives).
    pub comments: u64,
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Decoder {
            bom_matched: Some(0),
            ..Default::default()
        }
    }

    /// Feeds one chunk, appending every event it completes to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        let mut rest = self.skip_bom(chunk);
        if self.pending_cr && !rest.is_empty() {
            self.pending_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = memchr::memchr2(b'\r', b'\n', rest) {
            self.line.extend_from_slice(&rest[..pos]);
            self.end_line(out);
            if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => rest = &rest[pos + 2..],
                    Some(_) => rest = &rest[pos + 1..],
                    None => {
                        self.pending_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[pos + 1..];
            }
        }
        self.line.extend_from_slice(rest);
    }

    /// The stream ended. Per the rules an event not yet terminated by a blank line is
    /// discarded, so nothing is returned; the state is reset for reuse.
    pub fn finish(&mut self) {
        *self = Decoder {
            comments: self.comments,
            ..Decoder::new()
        };
    }

    /// Strips a BOM at the very start of the stream only, even when split across chunks.
    fn skip_bom<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let Some(matched) = self.bom_matched else {
            return chunk;
        };
        let mut i = 0;
        let mut m = matched;
        while m < 3 && i < chunk.len() {
            if chunk[i] != BOM[m] {
                // Not a BOM after all: the bytes taken so far are content.
                self.bom_matched = None;
                self.line.extend_from_slice(&BOM[..m]);
                return &chunk[i..];
            }
            m += 1;
            i += 1;
        }
        self.bom_matched = if m == 3 { None } else { Some(m) };
        &chunk[i..]
    }

    fn end_line(&mut self, out: &mut Vec<Event>) {
        // A line ending also ends the stream's start, so a BOM later is content.
        if let Some(m) = self.bom_matched.take() {
            let mut line = BOM[..m].to_vec();
            line.append(&mut self.line);
            self.line = line;
        }
        let line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        if line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                out.push(Event {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.data.clear();
            self.event.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            self.comments += 1;
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = value.to_string(),
            // `id` and `retry` steer reconnection, which a POST must never do.
            _ => {}
        }
    }
}

/// Decodes a whole stream given as chunks (used by tests and benchmarks).
pub fn decode_all<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Event> {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out);
    }
    d.finish();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    fn every_split(stream: &[u8]) -> Vec<Vec<Event>> {
        (0..=stream.len())
            .map(|i| decode_all([&stream[..i], &stream[i..]]))
            .collect()
    }

    #[test]
    fn line_endings_lf_cr_crlf_mixed() {
        let s = b"data: a\n\ndata: b\r\rdata: c\r\n\r\ndata: d\n\r\n";
        let expected = decode_all([&s[..]]);
        assert_eq!(data(&expected), ["a", "b", "c", "d"]);
        for got in every_split(s) {
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn lone_cr_at_chunk_boundary_is_one_line_end() {
        // "data: x\r" | "\n\n": the CRLF is split; it must not count as two line ends.
        let got = decode_all([&b"data: x\r"[..], b"\ndata: y\n\n"]);
        assert_eq!(data(&got), ["x\ny"]);
    }

    #[test]
    fn bom_only_at_start_and_split() {
        let got = decode_all([&b"\xEF\xBB"[..], b"\xBFdata: a\n\n"]);
        assert_eq!(data(&got), ["a"]);
        // A BOM later in the stream is not stripped: the field name is then not `data`.
        let got = decode_all([&b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"[..]]);
        assert_eq!(data(&got), ["a"]);
    }

    #[test]
    fn comments_fields_and_spaces() {
        let s = b": keep-alive \xFF\xFE\n:\ndata:no-space\ndata:  two\nevent: error\nid: 7\nretry: 10\nunknown: z\ndata\n\n";
        let got = decode_all([&s[..]]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "no-space\n two\n");
        assert_eq!(got[0].event, "error");
        let mut d = Decoder::new();
        d.feed(s, &mut Vec::new());
        assert_eq!(d.comments, 2);
    }

    #[test]
    fn empty_data_dispatches_and_no_data_does_not() {
        assert_eq!(data(&decode_all([&b"data\n\n"[..]])), [""]);
        assert_eq!(data(&decode_all([&b"data:\n\n"[..]])), [""]);
        assert!(decode_all([&b"event: x\n\n"[..]]).is_empty());
    }

    #[test]
    fn incomplete_final_event_is_discarded() {
        assert_eq!(data(&decode_all([&b"data: a\n\ndata: [DONE]"[..]])), ["a"]);
        assert_eq!(
            data(&decode_all([&b"data: a\n\ndata: [DONE]\n"[..]])),
            ["a"]
        );
    }

    #[test]
    fn utf8_split_across_chunks() {
        let s = "data: héllo → wörld\n\n".as_bytes();
        for got in every_split(s) {
            assert_eq!(data(&got), ["héllo → wörld"]);
        }
    }
}
