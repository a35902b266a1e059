//! SSE decode throughput on a large in-memory stream (run by `bench/run`, or
//! `cargo bench --bench sse`). Prints one line of figures.

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use std::hint::black_box;
use std::time::Instant;

use promptgauge::client::sse::Decoder;
use promptgauge::client::{OpenAiChat, Protocol, Streamed};

fn main() {
    // A realistic stream: one chat chunk per token, CRLF endings, 64 MB in 16 KiB reads.
    let chunk = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n";
    let events = 64 * 1024 * 1024 / chunk.len();
    let stream: Vec<u8> = chunk.repeat(events).into_bytes();
    let mb = stream.len() as f64 / 1e6;

    let started = Instant::now();
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    let mut count = 0;
    for piece in stream.chunks(16 * 1024) {
        decoder.feed(piece, &mut out);
        count += out.len();
        out.clear();
    }
    let decode = started.elapsed().as_secs_f64();
    assert_eq!(count, events);

    // Decoding plus reading each event's JSON, as the client does.
    let started = Instant::now();
    let mut decoder = Decoder::new();
    let mut chat = Streamed::default();
    for piece in stream.chunks(16 * 1024) {
        decoder.feed(piece, &mut out);
        for e in out.drain(..) {
            black_box(OpenAiChat.decode(&mut chat, &e.event, &e.data));
        }
    }
    let full = started.elapsed().as_secs_f64();
    println!(
        "SSE decoding         {mb:.0} MB, {events} events: decoder {:.0} MB/s ({:.1} M events/s); with chat JSON {:.0} MB/s",
        mb / decode,
        events as f64 / decode / 1e6,
        mb / full
    );
}
