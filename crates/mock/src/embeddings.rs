//! `POST /v1/embeddings`, as OpenAI's (and vLLM's, llama.cpp's) servers answer it: each
//! input's vector, deterministic. A text's vector is its words hashed into 256 signed
//! dimensions and normalised, so texts that share words point the same way (the same text
//! has cosine 1, texts with no word in common about 0): enough for the `embedding` scorer's
//! tests and the examples, and no model's numbers.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::Provider;
use super::chat::ServedChat;
use super::served::Served;
use promptgauge_base::hash::StableHasher;

/// The vectors' length.
pub(crate) const DIMENSIONS: usize = 256;

/// The simulator's vector for `text`.
pub fn vector(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h = StableHasher::default();
        h.write(word.to_lowercase().as_bytes());
        let bits = h.finish();
        let sign = if bits >> 63 == 1 { -1.0 } else { 1.0 };
        v[(bits % DIMENSIONS as u64) as usize] += sign;
    }
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

impl Provider {
    /// Answers one embeddings request: its status and JSON body.
    pub(crate) fn embeddings(&self, headers: &[(String, String)], body: &[u8]) -> (u16, String) {
        self.stats.embedding_requests.fetch_add(1, Ordering::SeqCst);
        // OpenAI's endpoint: its key and errors are chat completions'.
        let wire = &ServedChat;
        if !self.accepts_key(wire, headers) {
            self.stats.status_401.fetch_add(1, Ordering::SeqCst);
            let body = wire.error_body(401, "Incorrect API key provided.", "invalid_request_error");
            return (401, body.to_string());
        }
        let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let inputs: Vec<String> = match request.get("input") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) if a.iter().all(Value::is_string) && !a.is_empty() => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            _ => {
                self.stats.status_400.fetch_add(1, Ordering::SeqCst);
                let body = wire.error_body(
                    400,
                    "'input' must be a string or a non-empty list of strings",
                    "invalid_request_error",
                );
                return (400, body.to_string());
            }
        };
        self.stats
            .embedded_inputs
            .fetch_add(inputs.len() as u64, Ordering::SeqCst);
        let tokens: u64 = inputs
            .iter()
            .map(|t| t.chars().count().div_ceil(4).max(1) as u64)
            .sum();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
            .collect();
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("mock-embedding");
        (
            200,
            json!({
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            })
            .to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn texts_that_share_words_point_the_same_way() {
        let a = vector("Refunds reach your card within 5 business days.");
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-12);
        let near = vector("Refunds reach your card in 5 business days");
        let far = vector("The warranty covers defects for two years");
        assert!(cosine(&a, &near) > 0.8, "{}", cosine(&a, &near));
        assert!(cosine(&a, &far) < 0.3, "{}", cosine(&a, &far));
        assert_eq!(vector("").iter().filter(|x| **x != 0.0).count(), 0);
    }
}
