//! Property tests: any chunking of a valid event stream decodes to the same events, and no
//! input, however hostile, panics the decoder, the case loaders, the prompt loader or the
//! template checker.

use std::path::Path;

use promptgauge::client::sse::{Decoder, Event};
use promptgauge::suite::{FilePos, Templates, cases, prompts};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct GenEvent {
    kind: Option<String>,
    data: Vec<String>,
    comment_before: bool,
}

fn event() -> impl Strategy<Value = GenEvent> {
    (
        prop::option::of("[a-z]{1,8}"),
        prop::collection::vec("[^\r\n]{0,20}", 1..4),
        any::<bool>(),
    )
        .prop_map(|(kind, data, comment_before)| GenEvent {
            kind,
            data,
            comment_before,
        })
}

/// Serialises lines with the chosen endings. A CR ending followed by an empty line ending
/// in LF would read as one CRLF, so that pair is written as CR CR instead.
fn serialise(events: &[GenEvent], endings: &[u8], bom: bool) -> Vec<u8> {
    let mut lines: Vec<String> = Vec::new();
    for e in events {
        if e.comment_before {
            lines.push(": keep-alive".into());
        }
        if let Some(k) = &e.kind {
            lines.push(format!("event: {k}"));
        }
        for d in &e.data {
            lines.push(format!("data: {d}"));
        }
        lines.push(String::new());
    }
    let mut out = if bom {
        vec![0xEF, 0xBB, 0xBF]
    } else {
        Vec::new()
    };
    let mut previous_cr = false;
    for (i, line) in lines.iter().enumerate() {
        out.extend_from_slice(line.as_bytes());
        let mut ending: &[u8] = match endings[i % endings.len()] % 3 {
            0 => b"\n",
            1 => b"\r",
            _ => b"\r\n",
        };
        if previous_cr && line.is_empty() && ending == b"\n" {
            ending = b"\r";
        }
        previous_cr = ending == b"\r";
        out.extend_from_slice(ending);
    }
    out
}

fn decode_in_chunks(bytes: &[u8], cuts: &[usize]) -> Vec<Event> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        decoder.feed(&bytes[start..p], &mut out);
        start = p;
    }
    decoder.finish();
    out
}

proptest! {
    #[test]
    fn any_chunking_decodes_to_the_same_events(
        events in prop::collection::vec(event(), 1..8),
        endings in prop::collection::vec(any::<u8>(), 1..16),
        bom in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes = serialise(&events, &endings, bom);
        let expected: Vec<Event> = events
            .iter()
            .map(|e| Event { event: e.kind.clone().unwrap_or_default(), data: e.data.join("\n") })
            .collect();
        prop_assert_eq!(decode_in_chunks(&bytes, &[]), expected.clone());
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts), expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = decode_in_chunks(&bytes, &[]);
        // Chunking never changes the result, even for garbage.
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts), whole);
    }

    #[test]
    fn arbitrary_text_never_panics_the_case_loaders(text in "\\PC{0,300}|[-:{}\\[\\]\",\n a-z0-9]{0,300}") {
        for name in ["c.jsonl", "c.yaml", "c.csv"] {
            let _ = cases::parse(Path::new(name), &text);
        }
    }

    #[test]
    fn arbitrary_text_never_panics_the_prompt_loader(text in "\\PC{0,300}|[-:{}\\[\\]\",\n a-z{}%]{0,300}") {
        for name in ["p.yaml", "p.txt"] {
            let _ = prompts::parse(Path::new(name), text.clone());
        }
    }

    #[test]
    fn arbitrary_templates_and_vars_never_panic_the_checker(
        template in "[{}%#a-z .|()\"'-]{0,80}",
        vars in prop::collection::btree_map("[a-z]{1,4}", "\\PC{0,10}", 0..4),
    ) {
        let variant = prompts::parse(Path::new("p.txt"), format!("x{template}")).unwrap();
        let variants = vec![variant];
        if let Ok(t) = Templates::compile(&variants) {
            let case = cases::Case {
                id: "c".into(),
                vars: cases::Vars(vars.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect()),
                expected: vec!["x".into()],
                expected_json: None,
                messages: vec![],
                files: vec![],
                tool_script: Vec::new(),
                grade: None,
                tags: vec![],
                group: None,
                location: FilePos::line(Path::new("c.jsonl"), 1),
            };
            let _ = t.check(&variants, std::slice::from_ref(&case));
        }
    }
}
