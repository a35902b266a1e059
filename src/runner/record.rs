//! `run.json`: what a run measured, against what, with which settings; enough to resume it
//! and to refuse a resume whose bench changed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::report::ProviderInfo;
use crate::suite::Fingerprint;

pub const FILE: &str = "run.json";

/// The plan-shaping flags a run was started with; a resume reuses them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanSettings {
    pub limit: Option<u64>,
    /// Selected variant names in order; the first is the baseline.
    pub variants: Vec<String>,
    pub repeats: u32,
    /// Set when this run is one shard of a larger plan.
    #[serde(default)]
    pub shard: Option<crate::suite::Shard>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub tool: Tool,
    pub run_id: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Why the run stopped early, if it did.
    pub stopped: Option<String>,
    /// When the run was resumed, each time.
    #[serde(default)]
    pub resumed_at: Vec<String>,
    /// The bench file, absolute, as it was found.
    pub bench_path: PathBuf,
    pub plan: PlanSettings,
    pub fingerprint: Fingerprint,
    pub jobs_planned: usize,
    pub endpoint: ProviderInfo,
    /// The bench as loaded: its text, cases, variants and settings (for people, not code).
    pub bench: Value,
}

impl RunRecord {
    /// What the reports say about this run.
    pub fn info(&self) -> crate::report::RunInfo {
        crate::report::RunInfo {
            bench: self.bench["name"].as_str().unwrap_or("bench").to_string(),
            run_id: self.run_id.clone(),
            tool_version: self.tool.version.clone(),
            started_at: self.started_at.clone(),
            finished_at: self.finished_at.clone(),
            provider: self.endpoint.clone(),
            confidence: self.bench["confidence"].as_f64().unwrap_or(0.95),
            repeats: self.plan.repeats,
            cases: self.bench["cases"].as_u64().unwrap_or(0) as usize,
            jobs_planned: self.jobs_planned,
            stopped: self.stopped.clone(),
        }
    }

    /// The prices the run was costed with.
    pub fn price(&self) -> Option<crate::suite::Price> {
        serde_json::from_value(self.bench["price"].clone()).ok()
    }

    /// The ids of the cases the run planned.
    pub fn case_ids(&self) -> Vec<String> {
        self.bench["case_ids"]
            .as_array()
            .map(|ids| {
                ids.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The jobs this run planned, by key.
    pub fn plan_keys(&self) -> crate::runner::journal::PlanKeys {
        crate::runner::journal::PlanKeys::new(
            &self.case_ids(),
            &self.plan.variants,
            self.plan.repeats,
            self.plan.shard,
        )
    }

    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(FILE);
        let text = serde_json::to_string_pretty(self)? + "\n";
        // Written aside and renamed, so a crash never leaves half a run.json.
        let tmp = dir.join(format!("{FILE}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }

    pub fn read(dir: &Path) -> anyhow::Result<RunRecord> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a run folder: cannot read {}: {e}",
                dir.display(),
                path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a run record this version understands: {e}",
                path.display()
            )
        })
    }
}
