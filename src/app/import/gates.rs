//! promptfoo's `latency` and `cost` asserts as the bench's run gates
//! (docs/guide/import-promptfoo.md, "Asserts"): promptfoo fails the row of a test whose
//! call took longer or cost more than its threshold; a promptgauge bench carries
//! `gates.max_latency` (every job's end-to-end latency) and `gates.max_cost_per_job` (a
//! variant's mean cost per job), which fail the whole run. The smallest threshold any test
//! sets is the gate.

use serde_json::Value;

use super::bench::Import;

impl Import {
    /// A `latency` or `cost` assert of test `n`, taken as a run gate: whether it was (it
    /// needs a positive `threshold`; without one promptfoo itself refuses it).
    pub(super) fn gate_assert(&mut self, kind: &str, a: &Value, n: usize) -> bool {
        let threshold = a
            .get("threshold")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t > 0.0);
        let Some(t) = threshold else {
            self.notes.push(format!(
                "test {n}: assert `{kind}` has no positive `threshold`: left out"
            ));
            return false;
        };
        for key in a.as_object().into_iter().flat_map(|o| o.keys()) {
            if !matches!(key.as_str(), "type" | "threshold") {
                self.notes.push(format!(
                    "test {n}: assert `{kind}`'s `{key}` was not carried over"
                ));
            }
        }
        let (slot, note) = if kind == "latency" {
            (
                &mut self.gate_latency_ms,
                "assert `latency` became the bench's `gates.max_latency` (the smallest threshold of all tests): promptfoo fails that test's row; here the run's gate fails (exit 1) when any job of any test takes longer",
            )
        } else {
            (
                &mut self.gate_cost_usd,
                "assert `cost` became the bench's `gates.max_cost_per_job` (the smallest threshold of all tests): promptfoo fails that test's row when its call cost more; here the run's gate fails (exit 1) when a variant's mean cost per job is above it",
            )
        };
        *slot = Some(slot.map_or(t, |s: f64| s.min(t)));
        self.notes.push(format!("test {n}: {note}"));
        true
    }

    /// The bench's `gates:` block, when an assert gave one: `max_latency` as written;
    /// `max_cost_per_job` needs the bench's `price` (without one `check` and `run` refuse
    /// the gate), so it is written commented out, to set once `price` is.
    pub(super) fn gates_yaml(&self) -> String {
        if self.gate_latency_ms.is_none() && self.gate_cost_usd.is_none() {
            return String::new();
        }
        let mut out = String::from(
            "gates:                         # from promptfoo's latency and cost asserts; a flag given to `run` overrides each\n",
        );
        if let Some(ms) = self.gate_latency_ms {
            out.push_str(&format!("  max_latency: {}ms\n", trimmed(ms)));
        }
        if let Some(usd) = self.gate_cost_usd {
            out.push_str(&format!(
                "  # max_cost_per_job: {}       # set `price:` (USD per million tokens), then uncomment\n",
                trimmed(usd)
            ));
        }
        out
    }

    /// The note that says what to do for a cost gate: the bench has no price.
    pub(super) fn say_cost_gate(&mut self) {
        if let Some(usd) = self.gate_cost_usd {
            self.review.push(format!(
                "promptfoo's `cost` asserts (the smallest threshold, ${}) are the bench's `gates.max_cost_per_job`, written commented out: a cost gate needs the bench's `price:`; set it, then uncomment the gate",
                trimmed(usd)
            ));
        }
    }
}

/// A number without a needless `.0`.
fn trimmed(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}
