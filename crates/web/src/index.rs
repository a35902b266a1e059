//! A run's answers as an index: a few bytes per planned job (its arm, case, status, score
//! and where its line lies in the journal), built in one read of the journal and kept
//! while the journal stays as it was, so a 200,000-job run is filtered and paged without
//! reading it again; only the page's records are read back, by their place.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use promptgauge_runner::journal::{self, JobRecord, JobStatus, Place};

/// One planned job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexEntry {
    place: Place,
    /// The job's position in the plan (its page's address).
    job: u32,
    case: u32,
    variant: u16,
    /// 0: the run's one endpoint.
    endpoint: u16,
    /// Its case's tags, by index into `tag_sets`.
    tags: u32,
    repeat: u32,
    status: JobStatus,
    /// NaN: no score.
    score: f32,
    /// The arms' scores of this case and repeat are not all the same.
    disagreeing: bool,
    /// A judge scored it (people may label it).
    judged: bool,
}

/// What a filter asks for, by the index's names.
#[derive(Debug, Default, Clone)]
pub(super) struct Wanted {
    pub(super) variant: Option<String>,
    pub(super) endpoint: Option<String>,
    pub(super) tag: Option<String>,
    pub(super) status: Option<JobStatus>,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
    pub(super) disagreeing: bool,
    /// Words the case id or the answer contains, case aside.
    pub(super) words: Vec<String>,
}

/// What the matrix asks for: its rows (a case and repeat, every arm across) kept when they
/// pass every filter given.
#[derive(Debug, Default, Clone)]
pub(super) struct RowsWanted {
    /// The case has this tag.
    pub(super) tag: Option<String>,
    /// The arms scored the case differently.
    pub(super) disagreeing: bool,
    /// Some arm did not pass (a score below 1, a failed or withheld answer).
    pub(super) failing: bool,
    /// Words the case id or one of the row's answers contains, case aside.
    pub(super) words: Vec<String>,
}

/// One row of the matrix: a case and repeat, and its arms' records (in journal order).
pub(super) struct MatrixRow {
    pub(super) case: String,
    pub(super) repeat: u32,
    pub(super) records: Vec<JobRecord>,
}

/// A run's journal, indexed.
pub(super) struct RunIndex {
    /// The journal as it was when read: a change makes a new index.
    pub(super) stamp: Stamp,
    /// The case ids (compact: the viewer keeps a 100,000-case run indexed).
    cases: promptgauge_base::ids::Ids,
    variants: Vec<String>,
    endpoints: Vec<String>,
    tag_sets: Vec<Vec<String>>,
    entries: Vec<IndexEntry>,
    /// Plan position → entry ([`NO_ENTRY`]: no record).
    by_job: Vec<u32>,
}

/// A plan position without a record.
const NO_ENTRY: u32 = u32::MAX;

/// A journal's length and time of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) len: u64,
    pub(super) modified: Option<SystemTime>,
}

impl Stamp {
    pub(super) fn of(path: &Path) -> Stamp {
        let meta = std::fs::metadata(path).ok();
        Stamp {
            len: meta.as_ref().map_or(0, |m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
        }
    }
}

/// Interns `name` in `names`, giving its index.
fn intern<T: Clone + Eq + std::hash::Hash>(
    names: &mut Vec<T>,
    seen: &mut HashMap<T, usize>,
    name: &T,
) -> usize {
    if let Some(&i) = seen.get(name) {
        return i;
    }
    names.push(name.clone());
    seen.insert(name.clone(), names.len() - 1);
    names.len() - 1
}

impl RunIndex {
    /// Reads `journal` once against the plan (each planned job once, as the reports read
    /// it: a resend in its failure's place, failures last).
    pub(super) fn build(journal: &Path, keys: &journal::PlanKeys) -> std::io::Result<RunIndex> {
        let stamp = Stamp::of(journal);
        let mut index = RunIndex {
            stamp,
            cases: promptgauge_base::ids::Ids::new(),
            variants: Vec::new(),
            endpoints: vec![String::new()],
            tag_sets: Vec::new(),
            entries: Vec::new(),
            by_job: Vec::new(),
        };
        if !journal.exists() {
            return Ok(index);
        }
        let (mut variants, mut endpoints, mut tag_sets) = (
            HashMap::new(),
            HashMap::from([(String::new(), 0)]),
            HashMap::new(),
        );
        // A run's one endpoint has no name in its records.
        let one_endpoint = String::new();
        journal::read_planned_placed(journal, keys, &|_| false, |place, r| {
            let tags = intern(&mut index.tag_sets, &mut tag_sets, &r.tags);
            let entry = IndexEntry {
                place,
                job: r.job as u32,
                case: index.cases.intern(&r.case_id),
                variant: intern(&mut index.variants, &mut variants, &r.variant) as u16,
                endpoint: intern(
                    &mut index.endpoints,
                    &mut endpoints,
                    r.endpoint.as_ref().unwrap_or(&one_endpoint),
                ) as u16,
                tags: tags as u32,
                repeat: r.repeat,
                status: r.status,
                score: r.score().map_or(f32::NAN, |s| s as f32),
                disagreeing: false,
                judged: !r.judge.is_empty() && r.score.is_some(),
            };
            let at = entry.job as usize;
            // A job number past the plan was not written by a run (a journal edited or
            // corrupted): its record is listed but has no page, and no record makes the
            // index larger than its plan.
            if at >= keys.slots() {
                index.entries.push(entry);
                return;
            }
            if index.by_job.len() <= at {
                index.by_job.resize(at + 1, NO_ENTRY);
            }
            index.by_job[at] = index.entries.len() as u32;
            index.entries.push(entry);
        })?;
        index.mark_disagreements();
        // Kept while the journal stays as it was: no room to grow.
        index.entries.shrink_to_fit();
        index.cases.shrink_to_fit();
        Ok(index)
    }

    /// A case and repeat whose graded arms' scores differ is disagreeing, in each arm.
    fn mark_disagreements(&mut self) {
        let mut range: HashMap<(u32, u32), (f32, f32)> = HashMap::new();
        for e in self.entries.iter().filter(|e| !e.score.is_nan()) {
            let r = range
                .entry((e.case, e.repeat))
                .or_insert((e.score, e.score));
            r.0 = r.0.min(e.score);
            r.1 = r.1.max(e.score);
        }
        for e in &mut self.entries {
            e.disagreeing = range
                .get(&(e.case, e.repeat))
                .is_some_and(|(lo, hi)| hi > lo);
        }
    }

    /// How many planned jobs have a record.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The names the filters may take: variants, endpoints (none for a one-endpoint run)
    /// and tags.
    pub(super) fn names(&self) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        let mut tags: Vec<&str> = self.tag_sets.iter().flatten().map(String::as_str).collect();
        tags.sort_unstable();
        tags.dedup();
        (
            self.variants.iter().map(String::as_str).collect(),
            self.endpoints
                .iter()
                .filter(|e| !e.is_empty())
                .map(String::as_str)
                .collect(),
            tags,
        )
    }

    /// The records that pass `wanted`, `limit` from `offset` in journal order, and how
    /// many pass in all. Only the page's records (and, for words, the candidates') are
    /// read from `journal`.
    pub(super) fn page(
        &self,
        journal: &Path,
        wanted: &Wanted,
        offset: usize,
        limit: usize,
    ) -> std::io::Result<(Vec<JobRecord>, usize)> {
        let index_of = |names: &[String], name: &Option<String>| -> Option<Option<usize>> {
            name.as_ref()
                .map(|n| names.iter().position(|x| x == n).or(Some(usize::MAX)))
        };
        let variant = index_of(&self.variants, &wanted.variant);
        let endpoint = index_of(&self.endpoints, &wanted.endpoint);
        let tags = self.tag_mask(wanted.tag.as_deref());
        let file = self.open(journal)?;
        let words: Vec<String> = wanted.words.iter().map(|w| w.to_lowercase()).collect();
        let (mut matched, mut page) = (0usize, Vec::new());
        for e in &self.entries {
            let kept = variant.is_none_or(|v| v == Some(e.variant as usize))
                && endpoint.is_none_or(|x| x == Some(e.endpoint as usize))
                && tags.as_ref().is_none_or(|t| t[e.tags as usize])
                && wanted.status.is_none_or(|s| s == e.status)
                && wanted
                    .min
                    .is_none_or(|m| !e.score.is_nan() && f64::from(e.score) >= m - 1e-6)
                && wanted
                    .max
                    .is_none_or(|m| !e.score.is_nan() && f64::from(e.score) <= m + 1e-6)
                && (!wanted.disagreeing || e.disagreeing);
            if !kept {
                continue;
            }
            let wanted_here = matched >= offset && page.len() < limit;
            if words.is_empty() {
                if wanted_here && let Some(r) = read(file.as_ref(), e.place)? {
                    page.push(r);
                }
                matched += 1;
                continue;
            }
            let Some(r) = read(file.as_ref(), e.place)? else {
                continue;
            };
            let case = self.cases.id(e.case).to_lowercase();
            let output = r.output.to_lowercase();
            if words
                .iter()
                .all(|w| case.contains(w.as_str()) || output.contains(w.as_str()))
            {
                if wanted_here {
                    page.push(r);
                }
                matched += 1;
            }
        }
        Ok((page, matched))
    }

    /// Which of the tag sets hold `tag` (none: no tag asked for).
    fn tag_mask(&self, tag: Option<&str>) -> Option<Vec<bool>> {
        tag.map(|t| {
            self.tag_sets
                .iter()
                .map(|set| set.iter().any(|x| x == t))
                .collect()
        })
    }

    /// The journal, open to read records back by their places (none when none is indexed).
    fn open(&self, journal: &Path) -> std::io::Result<Option<File>> {
        if self.entries.is_empty() {
            return Ok(None);
        }
        File::open(journal).map(Some)
    }

    /// The entries grouped by row (a case and repeat), the rows in the plan's order (by
    /// each row's first job): entry numbers, each row's contiguous. A few bytes a job, made
    /// for one page and let go of after it.
    fn by_row(&self) -> Vec<u32> {
        let mut first: HashMap<(u32, u32), u32> = HashMap::new();
        for e in &self.entries {
            let f = first.entry((e.case, e.repeat)).or_insert(e.job);
            *f = (*f).min(e.job);
        }
        let mut keyed: Vec<(u32, u32, u32, u32)> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (first[&(e.case, e.repeat)], e.case, e.job, i as u32))
            .collect();
        drop(first);
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, _, _, i)| i).collect()
    }

    /// Whether a row (its entries) passes the filters that need no record read.
    fn row_kept(&self, row: &[u32], wanted: &RowsWanted, tags: Option<&Vec<bool>>) -> bool {
        let entries = || row.iter().map(|&i| &self.entries[i as usize]);
        let first = &self.entries[row[0] as usize];
        tags.is_none_or(|t| t[first.tags as usize])
            && (!wanted.disagreeing || entries().any(|e| e.disagreeing))
            && (!wanted.failing
                || entries()
                    .any(|e| e.status != JobStatus::Graded || e.score.is_nan() || e.score < 1.0))
    }

    /// The matrix's rows that pass `wanted`, `limit` from `offset` in the plan's order, and
    /// how many pass in all. Only the page's records (and, for words, the candidates') are
    /// read from `journal`.
    pub(super) fn rows(
        &self,
        journal: &Path,
        wanted: &RowsWanted,
        offset: usize,
        limit: usize,
    ) -> std::io::Result<(Vec<MatrixRow>, usize)> {
        let tags = self.tag_mask(wanted.tag.as_deref());
        let file = self.open(journal)?;
        let words: Vec<String> = wanted.words.iter().map(|w| w.to_lowercase()).collect();
        let order = self.by_row();
        let (mut matched, mut page) = (0usize, Vec::new());
        let mut rest = order.as_slice();
        while let Some(&head) = rest.first() {
            let key = |i: &u32| {
                let e = &self.entries[*i as usize];
                (e.case, e.repeat)
            };
            let len = rest.iter().take_while(|i| key(i) == key(&head)).count();
            let (row, next) = rest.split_at(len);
            rest = next;
            if !self.row_kept(row, wanted, tags.as_ref()) {
                continue;
            }
            let wanted_here = matched >= offset && page.len() < limit;
            let read_row = || self.read_row(file.as_ref(), row);
            if words.is_empty() {
                if wanted_here {
                    page.push(read_row()?);
                }
                matched += 1;
                continue;
            }
            let found = read_row()?;
            let case = found.case.to_lowercase();
            let answers: Vec<String> = found
                .records
                .iter()
                .map(|r| r.output.to_lowercase())
                .collect();
            if words.iter().all(|w| {
                case.contains(w.as_str()) || answers.iter().any(|a| a.contains(w.as_str()))
            }) {
                if wanted_here {
                    page.push(found);
                }
                matched += 1;
            }
        }
        Ok((page, matched))
    }

    /// A row's records, read back by their places.
    fn read_row(&self, file: Option<&File>, row: &[u32]) -> std::io::Result<MatrixRow> {
        let first = &self.entries[row[0] as usize];
        let mut records = Vec::with_capacity(row.len());
        for &i in row {
            if let Some(r) = read(file, self.entries[i as usize].place)? {
                records.push(r);
            }
        }
        Ok(MatrixRow {
            case: self.cases.id(first.case).to_string(),
            repeat: first.repeat,
            records,
        })
    }

    /// Every judged answer's record (what people may label), in journal order.
    pub(super) fn judged(&self, journal: &Path) -> std::io::Result<Vec<JobRecord>> {
        let mut out = Vec::new();
        let judged: Vec<&IndexEntry> = self.entries.iter().filter(|e| e.judged).collect();
        if judged.is_empty() {
            return Ok(out);
        }
        let file = File::open(journal)?;
        for e in judged {
            if let Some(r) = journal::read_line_at(&file, e.place)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The record of the job at plan position `job`.
    pub(super) fn job(&self, journal: &Path, job: u32) -> std::io::Result<Option<JobRecord>> {
        let Some(&i) = self.by_job.get(job as usize).filter(|&&i| i != NO_ENTRY) else {
            return Ok(None);
        };
        let file = File::open(journal)?;
        read(Some(&file), self.entries[i as usize].place)
    }
}

fn read(file: Option<&File>, place: Place) -> std::io::Result<Option<JobRecord>> {
    match file {
        Some(f) => journal::read_line_at(f, place),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptgauge_runner::testing::record;

    #[test]
    fn a_job_number_past_the_plan_lists_its_record_without_sizing_the_index_by_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut j = journal::Journal::open(&path).unwrap();
        j.append(&record("a")).unwrap();
        let mut far = record("b");
        far.job = 4_000_000_000;
        j.append(&far).unwrap();
        drop(j);
        let keys = journal::PlanKeys::new(&["a".into(), "b".into()], &["v".into()], 1, None);
        let index = RunIndex::build(&path, &keys).unwrap();
        assert_eq!(index.entries.len(), 2, "both records are listed");
        assert!(index.by_job.len() <= 2, "{} slots", index.by_job.len());
        assert!(index.job(&path, 0).unwrap().is_some());
    }
}
