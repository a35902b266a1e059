//! Fuzzes the SSE decoder: no input panics it, and chunking never changes what it decodes.
//! Run with `cargo +nightly fuzz run sse_decoder` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use promptgauge::client::sse::{Decoder, decode_all};

fuzz_target!(|input: &[u8]| {
    let Some((&seed, bytes)) = input.split_first() else {
        return;
    };
    let whole = decode_all([bytes]);
    // Split wherever the seed's bits say, up to eight pieces.
    let mut decoder = Decoder::new();
    let mut events = Vec::new();
    let mut start = 0;
    for bit in 0..8 {
        if seed & (1 << bit) != 0 && !bytes.is_empty() {
            let cut = (start + 1 + usize::from(seed) * (bit + 1)) % (bytes.len() + 1);
            if cut > start {
                decoder.feed(&bytes[start..cut], &mut events);
                start = cut;
            }
        }
    }
    decoder.feed(&bytes[start..], &mut events);
    decoder.finish();
    assert_eq!(events, whole);
});
