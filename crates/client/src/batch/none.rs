//! The batch API of a protocol whose provider has none: every call fails, saying so. A run
//! asks [`crate::Client::batch_route`] before it batches, so this is what a caller that
//! did not ask gets instead of another provider's API.

use bytes::Bytes;
use serde_json::Value;

use super::api::{BatchApi, Pending};
use super::wire::{BatchError, BatchState, Http};
use crate::protocol::Protocol;

/// No batch API.
pub struct NoBatchApi;

const WHY: &str = "this endpoint's protocol";

impl BatchApi for NoBatchApi {
    fn limits(&self) -> (usize, usize) {
        (0, 0)
    }
    fn path(&self) -> &'static str {
        "/batches"
    }
    fn keeps_names(&self) -> bool {
        false
    }
    fn custom_id(&self, key: &str) -> String {
        key.to_string()
    }
    fn line(&self, custom_id: String, body: Value, _url: &'static str) -> Value {
        serde_json::json!({"custom_id": custom_id, "body": body})
    }
    fn after(&self, _id: &str) -> String {
        String::new()
    }
    fn state(&self, _v: Value) -> Result<BatchState, BatchError> {
        Err(BatchError::Absent(WHY))
    }
    fn prepare<'a>(&'a self, _: &'a Http, _: &'a str, _: &'a [u8]) -> Pending<'a, Option<String>> {
        Box::pin(async { Err(BatchError::Absent(WHY)) })
    }
    fn submit<'a>(
        &'a self,
        _: &'a Http,
        _: Option<&'a str>,
        _: &'a [u8],
        _: &'a str,
        _: Value,
    ) -> Pending<'a, BatchState> {
        Box::pin(async { Err(BatchError::Absent(WHY)) })
    }
    fn result_files<'a>(
        &'a self,
        _: &'a Http,
        _: &'a BatchState,
        _: usize,
    ) -> Pending<'a, Vec<Bytes>> {
        Box::pin(async { Err(BatchError::Absent(WHY)) })
    }
    fn answer<'a>(
        &self,
        _protocol: &dyn Protocol,
        _line: &'a Value,
    ) -> Result<&'a Value, (Option<u16>, String)> {
        Err((None, format!("{WHY} has no batch API")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtocolKind;
    use crate::protocol::BatchApiKind;

    #[test]
    fn each_protocol_names_its_batch_api_and_none_fails_every_call() {
        let kinds: Vec<_> = ProtocolKind::ALL
            .iter()
            .map(|p| p.build().batch().map(|r| (r.api, r.url)))
            .collect();
        assert_eq!(
            kinds,
            [
                Some((BatchApiKind::OpenAi, "/v1/chat/completions")),
                Some((BatchApiKind::OpenAi, "/v1/responses")),
                Some((BatchApiKind::Anthropic, "/v1/messages")),
            ]
        );
        // A protocol without one gets an API that says so at every call, final.
        let e = NoBatchApi.state(Value::Null).unwrap_err();
        assert!(e.is_final());
        assert_eq!(e.to_string(), "this endpoint's protocol has no batch API");
        let line = serde_json::json!({"custom_id": "a"});
        let proto = ProtocolKind::OpenaiChat.build();
        assert!(NoBatchApi.answer(proto.as_ref(), &line).is_err());
    }
}
