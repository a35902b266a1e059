//! What the history store keeps of a run's jobs, collected as the run's records arrive (live, or
//! replayed from a journal by `index`): numbers only, one compact row per job (64 bytes in
//! memory, 56 in the spool; a missing number is NaN); case ids stay in run.json. The
//! answers stay in the journal.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

use promptgauge_client::{Outcome, Usage};
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_suite::Price;

/// One job as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobRow {
    /// The case's position in the run's case ids.
    pub case: u32,
    pub repeat: u32,
    /// Index into the run's variants (the plan's order; 0 is the baseline).
    pub variant: u16,
    pub attempts: u16,
    pub graded: bool,
    pub cached: bool,
    /// Answered through the provider's batch API: costed at the batch price.
    pub batched: bool,
    pub outcome: Option<Outcome>,
    /// Token counts in full (64 bits, as summary.json keeps them): the store's cost and the
    /// summary's agree however large a server's counts.
    pub tokens_in: u64,
    pub tokens_cached: u64,
    pub tokens_out: u64,
    /// NaN when the job failed.
    score: f64,
    /// NaN when not measured (failed before an answer, or from the cache).
    latency_ms: f32,
    ttft_ms: f32,
}

impl JobRow {
    /// The score in [0, 1]; `None` when the job failed.
    pub fn score(&self) -> Option<f64> {
        (!self.score.is_nan()).then_some(self.score)
    }

    /// The job's status as the journal names it: `graded`, `failed`, or `filtered` (the
    /// provider withheld the answer).
    pub fn status(&self) -> &'static str {
        match (self.graded, self.outcome) {
            (true, _) => "graded",
            (false, Some(Outcome::Filtered)) => "filtered",
            (false, _) => "failed",
        }
    }

    /// The answering attempt's latency; `None` when not measured.
    pub fn latency_ms(&self) -> Option<f64> {
        (!self.latency_ms.is_nan()).then_some(f64::from(self.latency_ms))
    }

    /// The time to the first token; `None` when not measured.
    pub fn ttft_ms(&self) -> Option<f64> {
        (!self.ttft_ms.is_nan()).then_some(f64::from(self.ttft_ms))
    }

    /// What the answer cost at `price` (graded jobs only).
    pub fn cost_usd(&self, price: Option<&Price>) -> Option<f64> {
        let usage = Usage {
            prompt_tokens: self.tokens_in,
            completion_tokens: self.tokens_out,
            cached_tokens: self.tokens_cached,
            ..Usage::default()
        };
        price.filter(|_| self.graded).map(|p| {
            if self.batched {
                p.batched().cost(&usage)
            } else {
                p.cost(&usage)
            }
        })
    }
}

/// Every job of a run, as rows. Cases are named by their position in the run's case ids
/// (run.json's `bench.case_ids`), found by a hash of the id: no id is held twice.
#[derive(Debug, Default)]
pub struct JobRows {
    variants: HashMap<String, u16>,
    /// Hash of a case id → its position.
    index: HashMap<u64, u32>,
    /// Ids whose hash another id shares (none, in practice), by id.
    collided: HashMap<String, u32>,
    /// The groups of the cases that have one, by position.
    groups: HashMap<u32, Box<str>>,
    kept: Kept,
}

/// Where the rows are kept: in memory, or (a live run) spooled to a file in the run
/// folder, so a large run's rows cost no memory until they are recorded.
#[derive(Debug)]
enum Kept {
    Memory(Vec<JobRow>),
    Spool {
        path: PathBuf,
        file: Option<BufWriter<File>>,
        count: usize,
        error: Option<std::io::Error>,
    },
}

impl Default for Kept {
    fn default() -> Self {
        Kept::Memory(Vec::new())
    }
}

/// One row in the spool: fixed width, little-endian.
const ROW_BYTES: usize = 56;

impl JobRow {
    fn to_bytes(self) -> [u8; ROW_BYTES] {
        let mut b = [0u8; ROW_BYTES];
        b[0..4].copy_from_slice(&self.case.to_le_bytes());
        b[4..8].copy_from_slice(&self.repeat.to_le_bytes());
        b[8..10].copy_from_slice(&self.variant.to_le_bytes());
        b[10..12].copy_from_slice(&self.attempts.to_le_bytes());
        b[12] =
            u8::from(self.graded) | (u8::from(self.cached) << 1) | (u8::from(self.batched) << 2);
        b[13] = self.outcome.map_or(0, |o| {
            Outcome::ALL
                .iter()
                .position(|x| *x == o)
                .map_or(0, |i| i as u8 + 1)
        });
        b[16..24].copy_from_slice(&self.tokens_in.to_le_bytes());
        b[24..32].copy_from_slice(&self.tokens_cached.to_le_bytes());
        b[32..40].copy_from_slice(&self.tokens_out.to_le_bytes());
        b[40..48].copy_from_slice(&self.score.to_le_bytes());
        b[48..52].copy_from_slice(&self.latency_ms.to_le_bytes());
        b[52..56].copy_from_slice(&self.ttft_ms.to_le_bytes());
        b
    }

    fn from_bytes(b: &[u8; ROW_BYTES]) -> JobRow {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let f32_at = |i: usize| f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let eight = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            x
        };
        JobRow {
            case: u32_at(0),
            repeat: u32_at(4),
            variant: u16_at(8),
            attempts: u16_at(10),
            graded: b[12] & 1 != 0,
            cached: b[12] & 2 != 0,
            batched: b[12] & 4 != 0,
            outcome: (b[13] as usize)
                .checked_sub(1)
                .and_then(|i| Outcome::ALL.get(i).copied()),
            tokens_in: u64::from_le_bytes(eight(16)),
            tokens_cached: u64::from_le_bytes(eight(24)),
            tokens_out: u64::from_le_bytes(eight(32)),
            score: f64::from_le_bytes(eight(40)),
            latency_ms: f32_at(48),
            ttft_ms: f32_at(52),
        }
    }
}

/// Reads a run's rows back, a chunk at a time.
pub struct RowReader<'a> {
    memory: Option<&'a [JobRow]>,
    file: Option<BufReader<File>>,
}

impl RowReader<'_> {
    /// The next `n` rows (fewer at the end; none when done).
    pub fn next_chunk(&mut self, n: usize) -> std::io::Result<Vec<JobRow>> {
        if let Some(rows) = &mut self.memory {
            let (chunk, rest) = rows.split_at(n.min(rows.len()));
            *rows = rest;
            return Ok(chunk.to_vec());
        }
        let mut out = Vec::with_capacity(n.min(4096));
        if let Some(file) = &mut self.file {
            let mut buf = [0u8; ROW_BYTES];
            while out.len() < n {
                match file.read_exact(&mut buf) {
                    Ok(()) => out.push(JobRow::from_bytes(&buf)),
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }
}

impl Drop for JobRows {
    fn drop(&mut self) {
        self.discard();
    }
}

fn nan_or(x: Option<f64>) -> f32 {
    x.map_or(f32::NAN, |x| x as f32)
}

fn id_hash(id: &str) -> u64 {
    promptgauge_base::hash::hash_parts(&[id])
}

impl JobRows {
    /// Rows for a run of these variants (in plan order) over these cases.
    pub(crate) fn new(variants: &[String], case_ids: &[String]) -> JobRows {
        let mut index = HashMap::with_capacity(case_ids.len());
        let mut collided = HashMap::new();
        let mut clashing = std::collections::HashSet::new();
        for (i, id) in case_ids.iter().enumerate() {
            if index.insert(id_hash(id), i as u32).is_some() {
                clashing.insert(id_hash(id));
            }
        }
        // Only when two ids share a hash (never, in practice) are the ids hashed again.
        if !clashing.is_empty() {
            for (i, id) in case_ids.iter().enumerate() {
                if clashing.contains(&id_hash(id)) {
                    collided.insert(id.clone(), i as u32);
                }
            }
        }
        JobRows {
            variants: variants
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i as u16))
                .collect(),
            index,
            collided,
            groups: HashMap::new(),
            kept: Kept::default(),
        }
    }

    /// [`JobRows::new`], with the rows spooled to a file at `path` (created now; if it
    /// cannot be, they are kept in memory).
    pub(crate) fn spooled(variants: &[String], case_ids: &[String], path: PathBuf) -> JobRows {
        let mut rows = JobRows::new(variants, case_ids);
        if let Ok(file) = File::create(&path) {
            rows.kept = Kept::Spool {
                path,
                file: Some(BufWriter::new(file)),
                count: 0,
                error: None,
            };
        }
        rows
    }

    fn position(&self, id: &str) -> Option<u32> {
        if self.collided.is_empty() {
            return self.index.get(&id_hash(id)).copied();
        }
        match self.collided.get(id) {
            Some(&i) => Some(i),
            None => self.index.get(&id_hash(id)).copied(),
        }
    }

    /// Adds one finished job (jobs of variants or cases outside the plan are skipped).
    pub(crate) fn add(&mut self, r: &JobRecord) {
        // Its arm: the variant, or `ENDPOINT/VARIANT` in a run of several endpoints.
        let arm = self.variants.get(r.arm().as_ref());
        let (Some(&variant), Some(case)) = (arm, self.position(&r.case_id)) else {
            return;
        };
        if let Some(g) = &r.group {
            self.groups.entry(case).or_insert_with(|| g.as_str().into());
        }
        let row = JobRow {
            case,
            repeat: r.repeat,
            variant,
            attempts: u16::try_from(r.attempts.len()).unwrap_or(u16::MAX),
            graded: r.status == JobStatus::Graded,
            cached: r.cached,
            batched: r.batch.is_some(),
            outcome: r.outcome,
            tokens_in: r.usage.prompt_tokens,
            tokens_cached: r.usage.cached_tokens,
            tokens_out: r.usage.completion_tokens,
            score: r.score().unwrap_or(f64::NAN),
            latency_ms: nan_or(r.latency_ms.filter(|_| !r.cached)),
            ttft_ms: nan_or(r.ttft_ms.filter(|_| !r.cached)),
        };
        match &mut self.kept {
            Kept::Memory(rows) => rows.push(row),
            Kept::Spool {
                file, count, error, ..
            } => {
                if let Some(f) = file
                    && let Err(e) = f.write_all(&row.to_bytes())
                {
                    *error = Some(e);
                    *file = None;
                }
                *count += 1;
            }
        }
    }

    /// Writes out what the spool holds: no row is added after this.
    pub(crate) fn flush(&mut self) {
        if let Kept::Spool { file, error, .. } = &mut self.kept
            && let Some(f) = file
            && let Err(e) = f.flush()
        {
            *error = Some(e);
            *file = None;
        }
    }

    /// The rows, from the first (spooled ones are read back, once [`JobRows::flush`]ed).
    /// A spool that could not be written is an error.
    pub fn reader(&self) -> std::io::Result<RowReader<'_>> {
        match &self.kept {
            Kept::Memory(rows) => Ok(RowReader {
                memory: Some(rows),
                file: None,
            }),
            Kept::Spool { path, error, .. } => {
                if let Some(e) = error {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!(
                            "the rows spooled to {} were not all written: {e}",
                            path.display()
                        ),
                    ));
                }
                Ok(RowReader {
                    memory: None,
                    file: Some(BufReader::new(File::open(path)?)),
                })
            }
        }
    }

    /// Removes the spool, if there is one (once the rows are recorded, or not needed; a
    /// run that ends early drops its rows, which removes it too).
    pub fn discard(&mut self) {
        if let Kept::Spool { path, file, .. } = &mut self.kept {
            *file = None;
            let _ = std::fs::remove_file(path);
        }
        self.kept = Kept::default();
    }

    /// A case's group, by position.
    pub fn group(&self, case: u32) -> Option<&str> {
        self.groups.get(&case).map(|g| &**g)
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        match &self.kept {
            Kept::Memory(rows) => rows.len(),
            Kept::Spool { count, .. } => *count,
        }
    }

    /// Whether it holds no job.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_small_and_keeps_what_it_was_given() {
        assert!(std::mem::size_of::<JobRow>() <= 64);
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": "c1", "variant": "b", "repeat": 1, "status": "graded",
            "outcome": "truncated", "output": "x", "finish_reason": "length",
            "expected": ["x"], "extracted": "x", "correct": null, "score": 0.25,
            "attempts": [], "ttft_ms": 12.5, "latency_ms": 40.0,
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "cached_tokens": 40,
                      "reasoning_tokens": 0, "estimated": false},
            "model": null, "group": "g"
        }))
        .unwrap();
        let mut rows = JobRows::new(&["a".into(), "b".into()], &["c0".into(), "c1".into()]);
        rows.add(&record);
        rows.add(&JobRecord {
            variant: "not planned".into(),
            ..record.clone()
        });
        assert_eq!(rows.len(), 1);
        let r = rows.reader().unwrap().next_chunk(10).unwrap()[0];
        assert_eq!((r.variant, r.repeat, r.score()), (1, 1, Some(0.25)));
        assert_eq!((r.latency_ms(), r.ttft_ms()), (Some(40.0), Some(12.5)));
        assert_eq!(r.case, 1);
        assert_eq!((rows.group(0), rows.group(1)), (None, Some("g")));
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 10.0,
            cached_input_per_mtok: Some(0.5),
            ..Price::streaming(0.0, 0.0)
        };
        let want = (60.0 + 40.0 * 0.5 + 70.0) / 1e6;
        assert!((r.cost_usd(Some(&price)).unwrap() - want).abs() < 1e-15);
        // A failed job has no score, and costs nothing as an answer.
        let mut failed = record;
        failed.status = JobStatus::Failed;
        failed.score = None;
        failed.correct = None;
        failed.latency_ms = None;
        rows.add(&failed);
        let f = rows.reader().unwrap().next_chunk(10).unwrap()[1];
        assert_eq!(
            (f.score(), f.latency_ms(), f.cost_usd(Some(&price))),
            (None, None, None)
        );
        assert_eq!((r.status(), f.status()), ("graded", "failed"));
    }

    #[test]
    fn token_counts_past_32_bits_are_kept_whole_and_costed_as_the_summary_costs_them() {
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": "c0", "variant": "a", "repeat": 0, "status": "graded",
            "outcome": "complete", "output": "x", "finish_reason": "stop",
            "expected": ["x"], "extracted": "x", "correct": true, "score": 1.0,
            "attempts": [], "ttft_ms": null, "latency_ms": null,
            "usage": {"prompt_tokens": 9_000_000_000u64, "completion_tokens": 5_000_000_000u64,
                      "cached_tokens": 4_300_000_000u64, "reasoning_tokens": 0, "estimated": false},
            "model": null
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut rows = JobRows::spooled(&["a".into()], &["c0".into()], dir.path().join("s"));
        rows.add(&record);
        let mut filtered = record.clone();
        filtered.status = JobStatus::Filtered;
        filtered.outcome = Some(Outcome::Filtered);
        filtered.score = None;
        rows.add(&filtered);
        rows.flush();
        let got = rows.reader().unwrap().next_chunk(10).unwrap();
        let r = got[0];
        assert_eq!(
            (r.tokens_in, r.tokens_cached, r.tokens_out),
            (9_000_000_000, 4_300_000_000, 5_000_000_000)
        );
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 2.0,
            cached_input_per_mtok: Some(0.5),
            ..Price::streaming(0.0, 0.0)
        };
        let summary_cost = price.cost(&record.usage);
        assert_eq!(r.cost_usd(Some(&price)), Some(summary_cost));
        assert_eq!(got[1].status(), "filtered");
    }
}
