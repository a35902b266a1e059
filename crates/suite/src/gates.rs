//! `gates:` — the run gates a bench carries
//! (docs/guide/ci.md, "Gates the bench carries"): `run` applies each as if its flag were
//! given, a flag given overrides the bench's value of the same gate, and `check` lists
//! them. Each is one of `run`'s own gates.

use std::time::Duration;

use serde::Deserialize;

use super::error::{FilePos, InputError};

/// `gates:` as written: every one optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Gates")]
pub struct BenchGates {
    /// Fail when the whole run cost more than this many USD (needs `price`): `run
    /// --max-cost`.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub max_cost: Option<f64>,
    /// Fail when a variant's jobs cost more than this many USD each, on average (needs
    /// `price`): `run --max-cost-per-job`.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub max_cost_per_job: Option<f64>,
    /// Fail when a variant's p90 end-to-end latency is above this: `run --max-p90-latency`.
    #[serde(default, deserialize_with = "promptgauge_client::limits::duration")]
    #[schemars(schema_with = "promptgauge_client::limits::duration_schema")]
    pub max_p90_latency: Option<Duration>,
    /// Fail when any job's end-to-end latency is above this: `run --max-latency`.
    #[serde(default, deserialize_with = "promptgauge_client::limits::duration")]
    #[schemars(schema_with = "promptgauge_client::limits::duration_schema")]
    pub max_latency: Option<Duration>,
}

impl BenchGates {
    /// Each gate the bench sets, as `check` lists it: `max_cost $5`, `max_latency 30s`.
    pub fn said(&self) -> Vec<String> {
        let usd = |name: &str, v: Option<f64>| v.map(|v| format!("{name} ${v}"));
        let time = |name: &str, v: Option<Duration>| {
            v.map(|d| format!("{name} {}", humantime::format_duration(d)))
        };
        [
            usd("max_cost", self.max_cost),
            usd("max_cost_per_job", self.max_cost_per_job),
            time("max_p90_latency", self.max_p90_latency),
            time("max_latency", self.max_latency),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// An amount must be a positive number of USD.
    pub(super) fn check(&self, here: &dyn Fn(&str) -> FilePos) -> Result<(), InputError> {
        for (key, v) in [
            ("max_cost", self.max_cost),
            ("max_cost_per_job", self.max_cost_per_job),
        ] {
            if let Some(usd) = v
                && !(usd.is_finite() && usd > 0.0)
            {
                return Err(InputError::new(
                    here(key),
                    format!("gates.{key} is {usd}, and an amount in USD is above 0"),
                )
                .fix(format!(
                    "write gates.{key} as a number of USD, such as 0.50"
                )));
            }
        }
        Ok(())
    }
}
