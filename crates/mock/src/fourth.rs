//! What a fourth protocol costs, compiled (docs/dev/architecture.md, "A fourth protocol"):
//! a toy protocol of plain JSON lines, its client side (a [`Protocol`], as
//! `client/src/<name>.rs` would hold it) and its simulator side (a [`Served`], as
//! `mock/src/<name>.rs` would), registered by one line each — here the simulator's list is
//! [`PROTOCOLS`] and one more, and the client is built with the protocol itself where
//! `ProtocolKind::build` would name it. A job goes through the real client to the simulator
//! and back; nothing else in either crate learns of the protocol.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::memory::MemoryTransport;
use super::script::{Script, StreamPlan};
use super::served::{Carried, FilesRead, Served};
use super::wire::{MockConfig, MockRequest, ReplyStep, Stats};
use super::{PROTOCOLS, Provider};
use promptgauge_client::attachment::{FileTokens, Kind};
use promptgauge_client::protocol::{BatchRoute, Finish, FinishKind};
use promptgauge_client::testing::{client_speaking, key_value};
use promptgauge_client::transport::RequestBody;
use promptgauge_client::{
    ApiKey, ChatMessage, Client, ClientConfig, Dialect, JobRequest, Protocol, Streamed,
};

/// The toy on the client's side: `POST …/toy` with `{"model", "prompt"}`, its key in a
/// `toy-key` header; the answer streamed as `{"say": …}` lines and one `{"end": …}`.
struct Toy;

impl Protocol for Toy {
    fn path(&self) -> &'static str {
        "toy"
    }

    fn body(&self, model: &str, job: &JobRequest, _dialect: Dialect) -> RequestBody {
        let prompt: Vec<&str> = job.messages.iter().map(|m| m.content.as_str()).collect();
        let body = json!({"model": model, "prompt": prompt.join("\n")});
        RequestBody::new(vec![Bytes::from(body.to_string())])
    }

    fn carries(&self, _kind: Kind, _role: &str, _by_url: bool) -> Result<(), String> {
        Err("the toy protocol carries no files".into())
    }

    fn fallback(&self, _job: &JobRequest, _dialect: Dialect, _status: u16) -> Option<Dialect> {
        None
    }

    fn asks_for_usage(&self, _dialect: Dialect) -> bool {
        false
    }

    fn decode(&self, streamed: &mut Streamed, _event: &str, data: &str) -> bool {
        let Ok(line) = serde_json::from_str::<Value>(data) else {
            streamed.ignored += 1;
            return false;
        };
        if let Some(reason) = line["end"].as_str() {
            streamed.finish = Some(Finish {
                reason: reason.into(),
                kind: FinishKind::Stopped,
            });
            streamed.done = true;
            return false;
        }
        let text = line["say"].as_str().unwrap_or_default();
        streamed.text.push_str(text);
        !text.is_empty()
    }

    fn whole(&self, streamed: &mut Streamed, body: &Value) {
        self.decode(streamed, "", &json!({"say": body["said"]}).to_string());
        self.decode(streamed, "", &json!({"end": body["end"]}).to_string());
    }

    fn error_message(&self, body: &str) -> String {
        let read = serde_json::from_str::<Value>(body).ok();
        let message = read.and_then(|v| v["error"].as_str().map(String::from));
        message.unwrap_or_else(|| body.trim().to_string())
    }

    fn remaining_requests(&self, _headers: &[(String, String)]) -> Option<u64> {
        None
    }

    fn key_headers(&self, key: Option<&ApiKey>) -> Vec<(String, String)> {
        key.map(|k| ("toy-key".to_string(), key_value(k).to_string()))
            .into_iter()
            .collect()
    }

    fn ask_for_json(&self, _params: &mut Map<String, Value>) {}

    fn models_url(&self, _base_url: &str) -> Option<String> {
        None
    }

    fn model_ids(&self, _body: &[u8]) -> Option<Vec<String>> {
        None
    }

    fn batch(&self) -> Option<BatchRoute> {
        None
    }

    fn file_tokens(&self, _tokens: FileTokens) -> u64 {
        0
    }
}

/// The toy on the simulator's side: the same lines read into the common form and written
/// back (no faults of its own: a toy).
struct ServedToy;

impl Served for ServedToy {
    fn path(&self) -> &'static str {
        "/toy"
    }

    fn named_by(&self, headers: &[(String, String)]) -> bool {
        headers.iter().any(|(n, _)| n == "toy-key")
    }

    fn counter<'a>(&self, _stats: &'a Stats) -> Option<&'a std::sync::atomic::AtomicU64> {
        None
    }

    fn carries_key(&self, headers: &[(String, String)], key: &str) -> bool {
        headers.iter().any(|(n, v)| n == "toy-key" && v == key)
    }

    fn error_body(&self, _status: u16, message: &str, _kind: &str) -> Value {
        json!({ "error": message })
    }

    fn common_form(
        &self,
        _request: &MockRequest,
        body: Value,
        _files: &mut FilesRead,
    ) -> Result<Value, String> {
        let prompt = body["prompt"]
            .as_str()
            .ok_or("a toy line needs its `prompt`")?;
        let turn = json!({"role": "user", "content": prompt});
        Ok(json!({"model": body["model"], "messages": [turn], "stream": true}))
    }

    fn part<'a>(&self, _kind: &str, _part: &'a Value) -> Result<Option<Carried<'a>>, String> {
        Ok(None)
    }

    fn whole(&self, _config: &MockConfig, _serial: u64, plan: &StreamPlan) -> Value {
        json!({"said": plan.text, "end": plan.finish})
    }

    fn stream(&self, mut script: Script<'_>, _serial: u64, plan: StreamPlan) -> Vec<ReplyStep> {
        script.begin();
        for piece in &plan.pieces {
            script.event(&json!({ "say": piece }).to_string());
        }
        script.event(&json!({"end": plan.finish}).to_string());
        if !plan.replay {
            script.steps.push(ReplyStep::Generated {
                key: plan.key,
                text: plan.text,
                calls: plan.calls,
            });
        }
        script.steps
    }
}

fn client(provider: &Arc<Provider>, key: &str, protocol: Option<Arc<dyn Protocol>>) -> Client {
    let mut config = ClientConfig::new("http://sim/v1", "mock-model");
    config.api_key = Some(ApiKey::new(key.into()));
    config.seed = Some(7);
    let transport = Arc::new(MemoryTransport::new(provider.clone()));
    match protocol {
        Some(protocol) => client_speaking(transport, config, protocol),
        None => Client::new(transport, config),
    }
}

fn job(prompt: &str, key: &str) -> JobRequest {
    JobRequest {
        messages: vec![ChatMessage::new("user", prompt)],
        params: Map::new(),
        idempotency_key: key.into(),
        reserve_tokens: 10,
    }
}

#[tokio::test(start_paused = true)]
async fn a_fourth_protocol_is_its_two_files_and_one_line_each() {
    // The simulator's registry, and one line more.
    let served: Vec<&'static dyn Served> =
        PROTOCOLS.iter().copied().chain([&ServedToy as _]).collect();
    let config = MockConfig {
        api_key: Some("toy-secret".into()),
        ..MockConfig::default()
    };
    let provider = Arc::new(Provider::serving(config, served.leak()));

    let toy = client(&provider, "toy-secret", Some(Arc::new(Toy)));
    let r = toy.execute(&job("Echo: four protocols", "toy-1")).await;
    assert!(r.answered(), "{r:?}");
    assert_eq!(r.text, "four protocols");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    // What the simulator saw: a toy line, its key where the toy sends it, answered by the
    // simulated model.
    assert_eq!(
        provider.bodies(),
        [json!({"model": "mock-model", "prompt": "Echo: four protocols"})]
    );
    let headers = provider.headers();
    assert!(
        headers[0].contains(&("toy-key".into(), "toy-secret".into())),
        "{headers:?}"
    );
    let stats = provider.stats();
    assert_eq!((stats.requests, stats.generations), (1, 1));

    // A wrong key is refused in the toy's own words.
    let wrong = client(&provider, "not-it", Some(Arc::new(Toy)));
    let r = wrong.execute(&job("Echo: refused", "toy-2")).await;
    assert!(!r.answered());
    assert_eq!(r.attempts[0].status, Some(401));
    let error = r.attempts[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("Incorrect API key provided."), "{error}");
    assert_eq!(provider.stats().status_401, 1);

    // The other three are served beside it, as before.
    let chat = client(&provider, "toy-secret", None);
    let r = chat.execute(&job("Echo: still here", "chat-1")).await;
    assert!(r.answered(), "{r:?}");
    assert_eq!(r.text, "still here");
    assert_eq!(provider.stats().generations, 2);
}
