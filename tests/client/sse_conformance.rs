//! The SSE decoder against the WHATWG HTML standard, §9.2.6 "Interpreting an event stream"
//! (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
//! Each row quotes the rule it checks. Every row is also decoded byte by byte and at every
//! two-way split, since network chunks may end anywhere.

use promptgauge::client::sse::{Event, decode_all};

struct Row {
    rule: &'static str,
    input: &'static [u8],
    /// (event type, data) of each dispatched event.
    expect: &'static [(&'static str, &'static str)],
}

const ROWS: &[Row] = &[
    Row {
        rule: "a single LF ... being the ways in which a line can end",
        input: b"data: a\n\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "a CRLF character pair ... being the ways in which a line can end",
        input: b"data: a\r\n\r\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "a single CR not followed by a LF ... being the ways in which a line can end",
        input: b"data: a\r\rdata: b\r\r",
        expect: &[("", "a"), ("", "b")],
    },
    Row {
        rule: "line endings may be mixed within one stream (CRLF, LF, CR are each a line end)",
        input: b"data: a\r\ndata: b\ndata: c\r\r\ndata: d\n\r",
        expect: &[("", "a\nb\nc"), ("", "d")],
    },
    Row {
        rule: "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are present",
        input: b"\xEF\xBB\xBFdata: a\n\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "only a leading BOM is ignored: later, U+FEFF is part of the line (here, of the field name)",
        input: b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n",
        expect: &[("", "a"), ("", "c")],
    },
    Row {
        rule: "If the line starts with a U+003A COLON character (:) -> Ignore the line",
        input: b": keep-alive\n:\n: \xFF\xFE odd bytes \x00\ndata: a\n\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "a comment alone between events dispatches nothing",
        input: b": ping\n\ndata: a\n\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "If value starts with a U+0020 SPACE character, remove it from value (one space only)",
        input: b"data:a\n\ndata:  b\n\n",
        expect: &[("", "a"), ("", " b")],
    },
    Row {
        rule: "Collect the characters on the line after the first U+003A COLON: later colons stay in the value",
        input: b"data: {\"a\": \"b:c\"}\n\n",
        expect: &[("", "{\"a\": \"b:c\"}")],
    },
    Row {
        rule: "does not contain a U+003A COLON: the whole line is the field name and the value is empty",
        input: b"data\n\n",
        expect: &[("", "")],
    },
    Row {
        rule: "data with an empty value appends an empty line: the event dispatches with empty data",
        input: b"data:\n\n",
        expect: &[("", "")],
    },
    Row {
        rule: "Append the field value to the data buffer, then append a single LF (multi-line data joined by LF)",
        input: b"data: one\ndata: two\ndata: three\n\n",
        expect: &[("", "one\ntwo\nthree")],
    },
    Row {
        rule: "If the data buffer is an empty string ... return (no data lines: nothing dispatched)",
        input: b"event: ping\n\nid: 4\n\n",
        expect: &[],
    },
    Row {
        rule: "If the field name is \"event\" -> Set the event type buffer to field value",
        input: b"event: error\ndata: boom\n\ndata: after\n\n",
        expect: &[("error", "boom"), ("", "after")],
    },
    Row {
        rule: "Otherwise -> The field is ignored (unknown fields, id and retry do not change data)",
        input: b"foo: bar\nid: 1\nretry: 10\ndata: a\n\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "field names are compared exactly: `Data` is not `data`",
        input: b"Data: a\n\ndata: b\n\n",
        expect: &[("", "b")],
    },
    Row {
        rule: "If the file ends in the middle of an event, before the final empty line, the incomplete event is not dispatched",
        input: b"data: a\n\ndata: b\n",
        expect: &[("", "a")],
    },
    Row {
        rule: "an unterminated last line is discarded too",
        input: b"data: a\n\ndata: [DONE]",
        expect: &[("", "a")],
    },
    Row {
        rule: "Event streams are always decoded as UTF-8 (characters intact at any split)",
        input: "data: héllo → 東京 🎉\n\n".as_bytes(),
        expect: &[("", "héllo → 東京 🎉")],
    },
    Row {
        rule: "invalid UTF-8 is decoded with replacement, never dropped or fatal",
        input: b"data: a\xFFb\n\n",
        expect: &[("", "a\u{FFFD}b")],
    },
];

fn pairs(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| (e.event.clone(), e.data.clone()))
        .collect()
}

#[test]
fn every_row_at_every_split() {
    for row in ROWS {
        let expect: Vec<(String, String)> = row
            .expect
            .iter()
            .map(|(e, d)| (e.to_string(), d.to_string()))
            .collect();
        assert_eq!(
            pairs(&decode_all([row.input])),
            expect,
            "whole: {}",
            row.rule
        );
        let bytes: Vec<&[u8]> = row.input.chunks(1).collect();
        assert_eq!(
            pairs(&decode_all(bytes)),
            expect,
            "byte by byte: {}",
            row.rule
        );
        for cut in 0..=row.input.len() {
            let (a, b) = row.input.split_at(cut);
            assert_eq!(
                pairs(&decode_all([a, b])),
                expect,
                "split at {cut}: {}",
                row.rule
            );
        }
    }
}

#[test]
fn a_cr_ending_one_chunk_and_lf_starting_the_next_is_one_line_end() {
    // Were the CR and LF counted apart, the blank line between would dispatch `a` alone.
    let events = decode_all([&b"data: a\r"[..], b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(pairs(&events), [("".to_string(), "a\nb".to_string())]);
}
