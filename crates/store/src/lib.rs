//! The history store: every finished run (and every resumed or merged one), its variants'
//! results and one row per job, in SQLite (one machine: `reports/promptgauge.db`) or
//! PostgreSQL (a team's CI). Run folders stay the source of truth; the store is an index of
//! them, fed by the run's own records as they are aggregated, and rebuilt from folders by
//! `promptgauge index`. The schema is docs/guide/store.md.
//!
//! One code path serves both databases through sqlx's `Any` driver: portable SQL only
//! (BIGINT, DOUBLE PRECISION, TEXT; booleans as 0/1; `$n` placeholders, `?` in SQLite's
//! long inserts), versioned
//! migrations in `promptgauge_migrations`, and every write in one transaction, so two runs
//! recording at once each land whole.
//!
//! Invariant: an index, never the source of truth: everything in it can be rebuilt from
//! the run folders (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod error;
use error::Doing;
pub(crate) use error::StoreError;

use sqlx::any::{AnyConnectOptions, AnyRow};
use sqlx::{AnyConnection, Connection};
use sqlx::{AssertSqlSafe, ConnectOptions, Row};

pub use promptgauge_report::job_rows::{JobRow, JobRows};

use promptgauge_report::Summary;
pub use promptgauge_report::rows::{PartRow, RunKind, RunRow, ScoreRow, VariantRow};
use promptgauge_runner::record::RunRecord;

/// The schema this version writes (the number of migrations); a store at a newer version
/// is refused.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The store's file when none is named: beside the run folders.
pub const DEFAULT_FILE: &str = "promptgauge.db";

/// The migrations, in order: version n is `MIGRATIONS[n - 1]`. Never edit one that has
/// shipped; add the next.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    bench TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    model TEXT NOT NULL,
    base_url TEXT NOT NULL,
    simulated BIGINT NOT NULL,
    tool_version TEXT NOT NULL,
    git_commit TEXT,
    git_branch TEXT,
    git_dirty BIGINT,
    ci TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    started_unix_ms BIGINT NOT NULL,
    complete BIGINT NOT NULL,
    stopped TEXT,
    kind TEXT NOT NULL,
    shard TEXT,
    cases BIGINT NOT NULL,
    repeats BIGINT NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    jobs_planned BIGINT NOT NULL,
    jobs_finished BIGINT NOT NULL,
    jobs_failed BIGINT NOT NULL,
    scored BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION,
    folder TEXT NOT NULL,
    record TEXT NOT NULL,
    summary TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE INDEX runs_by_bench ON runs (bench, started_unix_ms);
CREATE TABLE run_variants (
    run_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    position BIGINT NOT NULL,
    baseline BIGINT NOT NULL,
    n BIGINT NOT NULL,
    correct BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    accuracy DOUBLE PRECISION,
    ci_low DOUBLE PRECISION,
    ci_high DOUBLE PRECISION,
    mean_score DOUBLE PRECISION,
    score_ci_low DOUBLE PRECISION,
    score_ci_high DOUBLE PRECISION,
    cost_usd DOUBLE PRECISION,
    spent_usd DOUBLE PRECISION,
    tokens_in BIGINT NOT NULL,
    tokens_out BIGINT NOT NULL,
    latency_p50_ms DOUBLE PRECISION,
    latency_p90_ms DOUBLE PRECISION,
    latency_p99_ms DOUBLE PRECISION,
    ttft_p50_ms DOUBLE PRECISION,
    ttft_p90_ms DOUBLE PRECISION,
    PRIMARY KEY (run_id, variant)
);
CREATE TABLE run_jobs (
    run_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    repeat BIGINT NOT NULL,
    case_hash BIGINT,
    case_group TEXT,
    status TEXT NOT NULL,
    outcome TEXT,
    score DOUBLE PRECISION,
    tokens_in BIGINT NOT NULL,
    tokens_out BIGINT NOT NULL,
    latency_ms DOUBLE PRECISION,
    ttft_ms DOUBLE PRECISION,
    cost_usd DOUBLE PRECISION,
    cached BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    PRIMARY KEY (run_id, case_id, variant, repeat)
)
"#,
    // 2: the failed jobs a run was allowed, so `--baseline latest` takes only a run a gate
    // can trust.
    r#"
ALTER TABLE runs ADD COLUMN allowed_failures BIGINT NOT NULL DEFAULT 0
"#,
    // 3: a run of several endpoints records one row per (variant, endpoint), its `variant`
    // named `ENDPOINT/VARIANT`; these say which (both null for a run of one endpoint).
    r#"
ALTER TABLE run_variants ADD COLUMN endpoint TEXT
"#,
    r#"
ALTER TABLE run_variants ADD COLUMN variant_only TEXT
"#,
    // 5: and which model answered the cell (null for a run of one endpoint: `runs.model`).
    r#"
ALTER TABLE run_variants ADD COLUMN model TEXT
"#,
    // 6: each named part's figures per variant (a `fields` scorer's fields, an `all`'s
    // scorers, a judge's criteria), for `history --part`.
    r#"
CREATE TABLE run_parts (
    run_id TEXT NOT NULL,
    part TEXT NOT NULL,
    variant TEXT NOT NULL,
    position BIGINT NOT NULL,
    zero_one BIGINT NOT NULL,
    n BIGINT NOT NULL,
    mean DOUBLE PRECISION,
    ci_low DOUBLE PRECISION,
    ci_high DOUBLE PRECISION,
    PRIMARY KEY (run_id, part, variant)
)
"#,
];

/// Where the store is: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// `postgres://…`, `sqlite://PATH`, `sqlite:PATH`, or a plain file path (SQLite).
    pub fn parse(text: &str) -> Result<Location, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the store is empty: name a file or a postgres:// URL".into());
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Location::Postgres(text.to_string()));
        }
        if let Some(path) = text
            .strip_prefix("sqlite://")
            .or_else(|| text.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err(format!("`{text}` names no file"));
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(format!(
                "`{scheme}://` stores are not supported: use a SQLite file or a postgres:// URL"
            ));
        }
        Ok(Location::Sqlite(PathBuf::from(text)))
    }

    /// As messages show it: a path, or the URL without its password.
    pub fn shown(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(url) => promptgauge_client::secrets::redact_url(url),
        }
    }

    /// The SQLite file, when it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::Sqlite(p) => Some(p),
            Location::Postgres(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// An open store, migrated to [`SCHEMA_VERSION`].
pub struct Store {
    /// One connection: a store's work is sequential, and a connection that fails says
    /// why at once (a pool retries until its timeout, then says only that it timed out).
    conn: tokio::sync::Mutex<AnyConnection>,
    backend: Backend,
    shown: String,
}

/// How long opening a store may take (a PostgreSQL server that does not answer).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Waits for another writer this long before a write fails (SQLite).
const BUSY_TIMEOUT_MS: u64 = 60_000;

impl Store {
    /// Opens the store to record runs in: a SQLite file and its folder are created when
    /// missing. Its schema is brought up to date; a newer one is refused.
    pub async fn open(location: &Location) -> Result<Store, StoreError> {
        Store::open_as(location, true).await
    }

    /// Opens a store that must exist and be promptgauge's (reading commands create
    /// nothing, and never take another program's database for one).
    pub async fn open_existing(location: &Location) -> Result<Store, StoreError> {
        Store::open_as(location, false).await
    }

    /// Opens the store at `location` (`create`: a missing SQLite file is made), refuses
    /// another program's database, and brings the schema up to date where it can be written.
    async fn open_as(location: &Location, create: bool) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let shown = location.shown();
        let (options, backend, read_only_mode) = match location {
            Location::Sqlite(path) => {
                let (options, read_only) = sqlite_options(path, &shown, create)?;
                (options, Backend::Sqlite, read_only)
            }
            Location::Postgres(url) => {
                let options = url
                    .parse::<AnyConnectOptions>()
                    .doing(|| format!("cannot read the store's address {shown}"))?;
                (options, Backend::Postgres, false)
            }
        };
        let mut conn = connect(&options, backend, &shown).await?;
        check_ours(&mut conn, backend, &shown, create).await?;
        let store = Store {
            conn: tokio::sync::Mutex::new(conn),
            backend,
            shown,
        };
        if read_only_mode {
            store.check_version_read_only().await?;
            return Ok(store);
        }
        if backend == Backend::Sqlite {
            store.use_wal().await?;
        }
        store.migrate().await?;
        Ok(store)
    }

    /// The store as messages name it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Write-ahead logging: readers never wait for a writer, and a run that dies mid-write
    /// leaves the file whole. Switching needs a moment alone with the file, which
    /// `busy_timeout` does not wait for: another process opening it at once is retried.
    async fn use_wal(&self) -> Result<(), StoreError> {
        let mut last = None;
        for _ in 0..100 {
            let mut conn = self.conn.lock().await;
            match sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL")
                .fetch_one(&mut *conn)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(StoreError::new(format!(
            "cannot switch the store {} to write-ahead logging\n  fix: keep the store on a local disk (network file systems cannot share it), or use PostgreSQL",
            self.shown
        )).because(last.map_or_else(String::new, |e| e.to_string())))
    }

    /// A transaction that writes: SQLite takes its write lock at once (a reader that later
    /// writes could otherwise fail instead of waiting).
    async fn begin_write(
        backend: Backend,
        conn: &mut AnyConnection,
    ) -> sqlx::Result<sqlx::Transaction<'_, sqlx::Any>> {
        match backend {
            Backend::Sqlite => conn.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => conn.begin().await,
        }
    }

    /// A read-only store is read as it is: its schema must be this promptgauge's.
    async fn check_version_read_only(&self) -> Result<(), StoreError> {
        let version: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM promptgauge_migrations")
                .fetch_one(&mut *self.conn.lock().await)
                .await
                .doing(|| format!("cannot read the store {}", self.shown))?;
        match version.cmp(&SCHEMA_VERSION) {
            std::cmp::Ordering::Equal => Ok(()),
            std::cmp::Ordering::Greater => Err(StoreError::new(format!(
                "the store {} has schema version {version}, newer than this promptgauge's ({SCHEMA_VERSION})\n  fix: upgrade promptgauge, or use another store (--store FILE)",
                self.shown
            ))),
            std::cmp::Ordering::Less => Err(StoreError::new(format!(
                "the store {} is read-only and has schema version {version}, older than this promptgauge's ({SCHEMA_VERSION}), so it cannot be brought up to date here\n  fix: open it once where it can be written (any reading command updates it), or read it with the promptgauge that recorded it",
                self.shown
            ))),
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let fail = |step: &str| format!("cannot {step} the store {}", self.shown);
        // Up to date (the usual case): readers take no write lock, so they never wait
        // behind a run that is recording.
        let current: Option<i64> =
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM promptgauge_migrations")
                .fetch_one(&mut *self.conn.lock().await)
                .await
                .ok();
        if current == Some(SCHEMA_VERSION) {
            return Ok(());
        }
        let mut conn = self.conn.lock().await;
        let mut tx = Store::begin_write(self.backend, &mut conn)
            .await
            .doing(|| fail("open"))?;
        if self.backend == Backend::Postgres {
            // One migrating process at a time, across the team's CI jobs.
            sqlx::query("SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(7300417)) AS locked")
                .fetch_one(&mut *tx)
                .await
                .doing(|| fail("lock"))?;
        }
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS promptgauge_migrations \
             (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .doing(|| fail("prepare"))?;
        let version: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM promptgauge_migrations")
                .fetch_one(&mut *tx)
                .await
                .doing(|| fail("read"))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::new(format!(
                "the store {} has schema version {version}, newer than this promptgauge's ({SCHEMA_VERSION})\n  fix: upgrade promptgauge, or use another store (--store FILE)",
                self.shown
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
                sqlx::query(AssertSqlSafe(statement.to_string()))
                    .execute(&mut *tx)
                    .await
                    .doing(|| fail("migrate"))?;
            }
            sqlx::query("INSERT INTO promptgauge_migrations (version, applied_at) VALUES ($1, $2)")
                .bind(i as i64 + 1)
                .bind(promptgauge_base::clock::utc_now())
                .execute(&mut *tx)
                .await
                .doing(|| fail("migrate"))?;
        }
        tx.commit().await.doing(|| fail("migrate"))?;
        Ok(())
    }

    /// Records a run: its metadata, each variant's results and one row per job, replacing
    /// whatever the store held for its run id. All or nothing.
    pub async fn record(&self, run: &Recording<'_>) -> Result<(), StoreError> {
        self.record_inner(run)
            .await
            .doing(|| format!("cannot record the run in the store {}", self.shown))
    }

    async fn record_inner(&self, run: &Recording<'_>) -> Result<(), StoreError> {
        // Folders are stored absolute, without `..`: links and lookups work from anywhere.
        let folder = std::fs::canonicalize(run.folder)
            .or_else(|_| std::path::absolute(run.folder))
            .unwrap_or_else(|_| run.folder.to_path_buf());
        let record = run.record;
        let summary = run.summary;
        let id = record.run_id.as_str();
        let mut conn = self.conn.lock().await;
        let mut tx = Store::begin_write(self.backend, &mut conn).await?;
        for table in ["run_jobs", "run_parts", "run_variants", "runs"] {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE run_id = $1"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        insert(&mut tx, "runs", run_columns(id, record, summary, &folder)?).await?;
        for (position, v) in summary.variants.iter().enumerate() {
            // A cell of a grid: its endpoint's model.
            let model = summary
                .run
                .endpoints
                .iter()
                .find(|e| e.endpoint.is_some() && e.endpoint == v.endpoint)
                .map(|e| e.model.clone());
            insert(
                &mut tx,
                "run_variants",
                variant_columns(id, position, v, model),
            )
            .await?;
        }
        for (position, part) in summary.parts.iter().enumerate() {
            for arm in &part.variants {
                insert(&mut tx, "run_parts", part_columns(id, position, part, arm)).await?;
            }
        }
        self.insert_jobs(&mut tx, record, run.jobs).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_jobs(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        record: &RunRecord,
        jobs: &JobRows,
    ) -> Result<(), StoreError> {
        // Many rows a statement, within both databases' parameter limits.
        const BATCH: usize = 500;
        let columns = JobColumns::of(record, jobs);
        let mut reader = jobs.reader()?;
        let mut read = 0;
        loop {
            let chunk = reader.next_chunk(BATCH)?;
            if chunk.is_empty() {
                break;
            }
            read += chunk.len();
            let mut query = sqlx::query(AssertSqlSafe(self.insert_jobs_sql(chunk.len())));
            for row in &chunk {
                query = columns.bind(query, row);
            }
            query.execute(&mut **tx).await?;
        }
        // A spool cut short (a full disk) records nothing rather than part of the run.
        if read != jobs.len() {
            return Err(StoreError::new(format!(
                "{read} of the run's {} job rows could be read back from its spool",
                jobs.len()
            )));
        }
        Ok(())
    }

    /// The statement that inserts `rows` job rows, with a placeholder for each value.
    fn insert_jobs_sql(&self, rows: usize) -> String {
        let mut sql = String::with_capacity(100 + rows * JOB_COLUMNS * 6);
        sql.push_str(
            "INSERT INTO run_jobs (run_id, case_id, variant, repeat, case_hash, case_group, \
             status, outcome, score, tokens_in, tokens_out, latency_ms, ttft_ms, cost_usd, \
             cached, attempts) VALUES ",
        );
        for i in 0..rows {
            if i > 0 {
                sql.push(',');
            }
            sql.push('(');
            for c in 0..JOB_COLUMNS {
                if c > 0 {
                    sql.push(',');
                }
                match self.backend {
                    // SQLite finds a numbered parameter's name by a linear search,
                    // for each parameter: anonymous ones keep a long statement fast.
                    Backend::Sqlite => sql.push('?'),
                    Backend::Postgres => sql.push_str(&format!("${}", i * JOB_COLUMNS + c + 1)),
                }
            }
            sql.push(')');
        }
        sql
    }

    /// The rows a query returns, its failure said as the store's.
    async fn read<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> Result<Vec<AnyRow>, StoreError> {
        query
            .fetch_all(&mut *self.conn.lock().await)
            .await
            .doing(|| format!("cannot read the store {}", self.shown))
    }

    /// The rows of `sql` (which ends in `filter`'s clause) for the runs that pass `filter`.
    pub async fn read_filtered(
        &self,
        sql: String,
        args: &[Arg],
    ) -> Result<Vec<AnyRow>, StoreError> {
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for a in args {
            query = a.bind(query);
        }
        self.read(query).await
    }

    /// The stored runs that pass `filter`, oldest first.
    pub async fn runs(&self, filter: &Filter) -> Result<Vec<RunRow>, StoreError> {
        let (clause, args) = filter.clause();
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs r{clause} ORDER BY r.started_unix_ms, r.run_id"
        );
        let rows = self.read_filtered(sql, &args).await?;
        let mut runs: Vec<RunRow> = rows.iter().map(run_row).collect::<Result<_, _>>()?;
        // Ties broken byte by byte, whatever the database's collation.
        runs.sort_by(|a, b| (a.started_unix_ms, &a.run_id).cmp(&(b.started_unix_ms, &b.run_id)));
        if let Some(limit) = filter.limit {
            let skip = runs.len().saturating_sub(limit);
            runs.drain(..skip);
        }
        Ok(runs)
    }

    /// The variants of the runs that pass `filter`, by run id, in plan order.
    pub async fn variants(
        &self,
        filter: &Filter,
    ) -> Result<HashMap<String, Vec<VariantRow>>, StoreError> {
        let (clause, args) = filter.clause();
        // Every column, read by name: a column added to `variant_columns` (and its
        // migration) needs no edit here.
        let sql = format!(
            "SELECT v.* FROM run_variants v JOIN runs r ON r.run_id = v.run_id{clause} \
             ORDER BY v.run_id, v.position"
        );
        let rows = self.read_filtered(sql, &args).await?;
        let mut out: HashMap<String, Vec<VariantRow>> = HashMap::new();
        for row in &rows {
            let v = variant_row(row)?;
            out.entry(v.run_id.clone()).or_default().push(v);
        }
        Ok(out)
    }

    /// The named parts' figures of the runs that pass `filter`, by run id, each run's in
    /// the bench's order of parts (none for a run recorded before parts were kept).
    pub async fn parts(
        &self,
        filter: &Filter,
    ) -> Result<HashMap<String, Vec<PartRow>>, StoreError> {
        let (clause, args) = filter.clause();
        let sql = format!(
            "SELECT p.* FROM run_parts p JOIN runs r ON r.run_id = p.run_id{clause} \
             ORDER BY p.run_id, p.position, p.variant"
        );
        let rows = self.read_filtered(sql, &args).await?;
        let mut out: HashMap<String, Vec<PartRow>> = HashMap::new();
        for row in &rows {
            let p = part_row(row)?;
            out.entry(p.run_id.clone()).or_default().push(p);
        }
        Ok(out)
    }

    /// One run's jobs (failed ones without a score): what a paired comparison needs of a
    /// stored run, with latencies for a baseline's chart.
    ///
    /// Read row by row, never as the driver's rows all at once: a 200,000-job run's rows
    /// held together took 90 MB for a moment in every `history` and compare.
    pub async fn jobs(&self, run_id: &str) -> Result<Vec<ScoreRow>, StoreError> {
        let mut out = Vec::new();
        self.jobs_each(run_id, |row| out.push(row)).await?;
        Ok(out)
    }

    /// A run's job rows one at a time, in the order of [`Store::jobs`], none kept.
    pub async fn jobs_each(
        &self,
        run_id: &str,
        mut each: impl FnMut(ScoreRow),
    ) -> Result<(), StoreError> {
        use futures_util::TryStreamExt;
        let query = sqlx::query(
            "SELECT case_id, variant, case_hash, case_group, score, latency_ms \
             FROM run_jobs WHERE run_id = $1 ORDER BY case_id, variant, repeat",
        )
        .bind(run_id);
        let mut conn = self.conn.lock().await;
        let mut rows = query.fetch(&mut *conn);
        while let Some(row) = rows
            .try_next()
            .await
            .doing(|| format!("cannot read the store {}", self.shown))?
        {
            each(ScoreRow {
                case_id: row.try_get(0)?,
                variant: row.try_get(1)?,
                case_hash: row.try_get::<Option<i64>, _>(2)?.map(|h| h as u64),
                group: row.try_get(3)?,
                score: row.try_get(4)?,
                latency_ms: row.try_get(5)?,
            });
        }
        Ok(())
    }

    /// A run's run.json and summary.json as recorded (run.json without its case ids and
    /// hashes: the job rows hold them).
    pub async fn documents(&self, run_id: &str) -> Result<(RunRecord, Summary), StoreError> {
        let rows = self
            .read(sqlx::query("SELECT record, summary FROM runs WHERE run_id = $1").bind(run_id))
            .await?;
        let row = rows
            .first()
            .doing(|| format!("the store {} has no run {run_id}", self.shown))?;
        let record: String = row.try_get(0)?;
        let summary: String = row.try_get(1)?;
        Ok((
            serde_json::from_str(&record)
                .doing(|| format!("run {run_id}'s record in the store is unreadable"))?,
            serde_json::from_str(&summary)
                .doing(|| format!("run {run_id}'s summary in the store is unreadable"))?,
        ))
    }

    /// The benches the store holds, with how many runs each.
    pub async fn benches(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self
            .read(sqlx::query(
                "SELECT bench, COUNT(*) FROM runs GROUP BY bench",
            ))
            .await?;
        let mut benches: Vec<(String, i64)> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()?;
        benches.sort();
        Ok(benches)
    }

    /// Closes the connection (SQLite then folds its write-ahead log back into the file).
    pub async fn close(self) {
        let _ = self.conn.into_inner().close().await;
    }
}

/// A run to record.
pub struct Recording<'a> {
    pub record: &'a RunRecord,
    pub summary: &'a Summary,
    pub jobs: &'a JobRows,
    /// The run folder, as the run named it (stored absolute).
    pub folder: &'a Path,
}

/// Which runs a query covers.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub bench: Option<String>,
    pub run_id: Option<String>,
    /// Runs started at or after this (Unix milliseconds).
    pub since_unix_ms: Option<i64>,
    pub branch: Option<String>,
    pub model: Option<String>,
    /// Only complete runs.
    pub complete: bool,
    /// Whole runs only: no shards (their merge stands for them).
    pub whole: bool,
    /// The newest this many.
    pub limit: Option<usize>,
}

pub enum Arg {
    Text(String),
    Int(i64),
}

impl Arg {
    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        match self {
            Arg::Text(t) => q.bind(t.as_str()),
            Arg::Int(i) => q.bind(*i),
        }
    }
}

impl Filter {
    /// ` WHERE …` on `runs r`, with its arguments.
    fn clause(&self) -> (String, Vec<Arg>) {
        let mut parts = Vec::new();
        let mut args = Vec::new();
        let mut text = |column: &str, value: &Option<String>, parts: &mut Vec<String>| {
            if let Some(v) = value {
                args.push(Arg::Text(v.clone()));
                parts.push(format!("r.{column} = ${}", args.len()));
            }
        };
        text("bench", &self.bench, &mut parts);
        text("run_id", &self.run_id, &mut parts);
        text("git_branch", &self.branch, &mut parts);
        // A run's model, or in a run of several endpoints any of its cells' models.
        if let Some(model) = &self.model {
            args.push(Arg::Text(model.clone()));
            let n = args.len();
            parts.push(format!(
                "(r.model = ${n} OR EXISTS (SELECT 1 FROM run_variants mv WHERE mv.run_id = r.run_id AND mv.model = ${n}))"
            ));
        }
        if let Some(since) = self.since_unix_ms {
            args.push(Arg::Int(since));
            parts.push(format!("r.started_unix_ms >= ${}", args.len()));
        }
        if self.complete {
            parts.push("r.complete = 1".into());
        }
        if self.whole {
            parts.push("r.kind <> 'shard'".into());
        }
        if parts.is_empty() {
            (String::new(), args)
        } else {
            (format!(" WHERE {}", parts.join(" AND ")), args)
        }
    }
}

/// The columns `runs` and `history` read of a run (by name: see `run_row`).
const RUN_COLUMNS: &str = "r.run_id, r.bench, r.model, r.base_url, r.simulated, r.tool_version, \
    r.git_commit, r.git_branch, r.git_dirty, r.started_at, r.finished_at, r.started_unix_ms, \
    r.complete, r.stopped, r.kind, r.shard, r.cases, r.repeats, r.confidence, r.jobs_planned, \
    r.jobs_finished, r.jobs_failed, r.scored, r.cost_usd, r.folder, r.allowed_failures";

/// A `RunRow` read from a row of its query (its columns by name).
pub fn run_row(r: &AnyRow) -> sqlx::Result<RunRow> {
    Ok(RunRow {
        run_id: r.try_get("run_id")?,
        bench: r.try_get("bench")?,
        model: r.try_get("model")?,
        base_url: r.try_get("base_url")?,
        simulated: r.try_get::<i64, _>("simulated")? != 0,
        tool_version: r.try_get("tool_version")?,
        git_commit: r.try_get("git_commit")?,
        git_branch: r.try_get("git_branch")?,
        git_dirty: r.try_get::<Option<i64>, _>("git_dirty")?.map(|d| d != 0),
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        started_unix_ms: r.try_get("started_unix_ms")?,
        complete: r.try_get::<i64, _>("complete")? != 0,
        stopped: r.try_get::<Option<String>, _>("stopped")?.map(Into::into),
        kind: r
            .try_get::<String, _>("kind")?
            .parse()
            .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
        shard: r.try_get("shard")?,
        cases: r.try_get("cases")?,
        repeats: r.try_get("repeats")?,
        confidence: r.try_get("confidence")?,
        jobs_planned: r.try_get("jobs_planned")?,
        jobs_finished: r.try_get("jobs_finished")?,
        jobs_failed: r.try_get("jobs_failed")?,
        scored: r.try_get::<i64, _>("scored")? != 0,
        cost_usd: r.try_get("cost_usd")?,
        folder: r.try_get("folder")?,
        allowed_failures: r.try_get("allowed_failures")?,
    })
}

/// A `VariantRow` read from a row of its query (its columns by name).
pub fn variant_row(r: &AnyRow) -> sqlx::Result<VariantRow> {
    let flag = |name: &str| -> sqlx::Result<bool> { Ok(r.try_get::<i64, _>(name)? != 0) };
    Ok(VariantRow {
        run_id: r.try_get("run_id")?,
        variant: r.try_get("variant")?,
        position: r.try_get("position")?,
        baseline: flag("baseline")?,
        n: r.try_get("n")?,
        correct: r.try_get("correct")?,
        failed: r.try_get("failed")?,
        accuracy: r.try_get("accuracy")?,
        ci_low: r.try_get("ci_low")?,
        ci_high: r.try_get("ci_high")?,
        mean_score: r.try_get("mean_score")?,
        score_ci_low: r.try_get("score_ci_low")?,
        score_ci_high: r.try_get("score_ci_high")?,
        cost_usd: r.try_get("cost_usd")?,
        spent_usd: r.try_get("spent_usd")?,
        tokens_in: r.try_get("tokens_in")?,
        tokens_out: r.try_get("tokens_out")?,
        latency_p50_ms: r.try_get("latency_p50_ms")?,
        latency_p90_ms: r.try_get("latency_p90_ms")?,
        latency_p99_ms: r.try_get("latency_p99_ms")?,
        ttft_p50_ms: r.try_get("ttft_p50_ms")?,
        ttft_p90_ms: r.try_get("ttft_p90_ms")?,
        endpoint: r.try_get("endpoint")?,
        model: r.try_get("model")?,
    })
}

/// A `PartRow` read from a row of its query (its columns by name).
pub fn part_row(r: &AnyRow) -> sqlx::Result<PartRow> {
    Ok(PartRow {
        run_id: r.try_get("run_id")?,
        part: r.try_get("part")?,
        variant: r.try_get("variant")?,
        position: r.try_get("position")?,
        binary: r.try_get::<i64, _>("zero_one")? != 0,
        n: r.try_get("n")?,
        mean: r.try_get("mean")?,
        ci_low: r.try_get("ci_low")?,
        ci_high: r.try_get("ci_high")?,
    })
}

/// A value bound to a statement.
enum Bound {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
}

impl Bound {
    fn bind_to<'q>(
        self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        match self {
            Bound::Text(v) => query.bind(v),
            Bound::Int(v) => query.bind(v),
            Bound::Real(v) => query.bind(v),
        }
    }
}

/// How to open a SQLite store at `path`, and whether it is read-only (then opened so);
/// its folder is created when `create`. A folder, a missing file when reading, and a
/// read-only store to record in are refused, each with its fix.
fn sqlite_options(
    path: &Path,
    shown: &str,
    create: bool,
) -> Result<(AnyConnectOptions, bool), StoreError> {
    if path.is_dir() {
        return Err(StoreError::new(format!(
            "the store {shown} is a folder\n  fix: name a file in it, e.g. --store {}",
            path.join(DEFAULT_FILE).display()
        )));
    }
    if !create && !path.is_file() {
        return Err(StoreError::new(format!(
            "there is no history store at {shown}\n  fix: name the file runs recorded into (--store, $PROMPTGAUGE_STORE), or build one: promptgauge index reports"
        )));
    }
    let path = std::path::absolute(path).doing(|| format!("cannot resolve {}", path.display()))?;
    // A store on a read-only mount (a CI cache, a shared volume) can be read,
    // never recorded into: said as such, not as "is it a database?".
    let folder = path.parent().unwrap_or(Path::new("/"));
    let read_only_here = if path.is_file() {
        read_only(&path) || read_only(folder)
    } else {
        folder.is_dir() && read_only(folder)
    };
    if read_only_here && create {
        return Err(StoreError::new(format!(
            "the store {shown} is read-only (a read-only file or file system): a run cannot be recorded in it\n  fix: record into a writable store (--store FILE), or pass --no-store; the run folder keeps everything, and `promptgauge index` adds it later"
        )));
    }
    if let Some(parent) = path.parent().filter(|_| create) {
        std::fs::create_dir_all(parent).doing(|| format!("cannot create {}", parent.display()))?;
    }
    // The driver reads the file name from a URL and decodes `%XX` in it: a
    // `%` in the path goes in encoded.
    let encoded = path.to_string_lossy().replace('%', "%25");
    // Read-only, a WAL store is opened as immutable: nothing can change it there,
    // and SQLite then needs no `-shm` file beside it.
    let url = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&encoded)
        .create_if_missing(create)
        .read_only(read_only_here)
        .immutable(read_only_here)
        .to_url_lossy();
    let options = AnyConnectOptions::from_url(&url)
        .doing(|| format!("cannot read the store's address {shown}"))?;
    Ok((options, read_only_here))
}

/// A connection to the store, within [`CONNECT_TIMEOUT`]; SQLite's waits for another
/// writer rather than fail.
async fn connect(
    options: &AnyConnectOptions,
    backend: Backend,
    shown: &str,
) -> Result<AnyConnection, StoreError> {
    let connecting = tokio::time::timeout(CONNECT_TIMEOUT, options.connect());
    let mut conn = match connecting.await {
        Ok(connected) => connected.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
    }
    .doing(|| {
        format!(
            "cannot open the store {shown}\n  fix: check the address (--store, $PROMPTGAUGE_STORE) and that the server is up, or pass --no-store"
        )
    })?;
    if backend == Backend::Sqlite {
        // Wait for another writer (a run finishing at the same moment) rather than fail.
        let pragmas =
            format!("PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}; PRAGMA synchronous = NORMAL");
        sqlx::raw_sql(AssertSqlSafe(pragmas))
            .execute(&mut conn)
            .await
            .doing(|| format!("cannot read the store {shown}: is it a database?"))?;
    }
    Ok(conn)
}

/// Refuses another program's database (promptgauge never adds its tables to one), and,
/// unless `create`, an empty one.
async fn check_ours(
    conn: &mut AnyConnection,
    backend: Backend,
    shown: &str,
    create: bool,
) -> Result<(), StoreError> {
    let tables = match backend {
        Backend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        }
    };
    let found: Vec<String> = sqlx::query_scalar(tables)
        .fetch_all(&mut *conn)
        .await
        .doing(|| format!("cannot read the store {shown}: is it a database?"))?;
    let ours = found.iter().any(|t| t == "promptgauge_migrations");
    // Another program's database: promptgauge never adds its tables to it.
    if !ours && !found.is_empty() {
        let named: Vec<String> = found.iter().take(5).map(|t| format!("`{t}`")).collect();
        return Err(StoreError::new(format!(
            "{shown} holds tables promptgauge did not make ({}{}): it is not a promptgauge history store, and promptgauge does not add its tables to another program's database\n  fix: name another file, or an empty database, with --store",
            named.join(", "),
            if found.len() > 5 { ", …" } else { "" }
        )));
    }
    if !ours && !create {
        return Err(StoreError::new(format!(
            "{shown} holds no promptgauge history yet\n  fix: record runs into it (run --store), or build it from run folders: promptgauge index reports --store ..."
        )));
    }
    Ok(())
}

/// The values of a `run_jobs` row, in [`Store::insert_jobs_sql`]'s order.
const JOB_COLUMNS: usize = 16;

/// What a run's job rows are written with besides the rows: the run, its cases, its arms.
struct JobColumns<'a> {
    record: &'a RunRecord,
    jobs: &'a JobRows,
    /// Rows name their arm: the variant, or `ENDPOINT/VARIANT` in a run of several
    /// endpoints, each costed at its endpoint's price.
    arms: Vec<String>,
    prices: Vec<Option<promptgauge_suite::Price>>,
}

impl<'a> JobColumns<'a> {
    /// The run's arms and prices, read once for all its rows.
    fn of(record: &'a RunRecord, jobs: &'a JobRows) -> Self {
        JobColumns {
            record,
            jobs,
            arms: record.plan.arms(),
            prices: record.arm_prices(),
        }
    }

    /// Binds one row's [`JOB_COLUMNS`] values.
    fn bind<'q>(
        &'q self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
        row: &JobRow,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        let (ids, hashes) = (&self.record.bench.case_ids, &self.record.bench.case_hashes);
        let case = ids.get(row.case as usize).map_or("", String::as_str);
        let price = self
            .prices
            .get(row.variant as usize)
            .and_then(Option::as_ref);
        query
            .bind(self.record.run_id.as_str())
            .bind(case)
            .bind(
                self.arms
                    .get(row.variant as usize)
                    .map(String::as_str)
                    .unwrap_or_default(),
            )
            .bind(i64::from(row.repeat))
            // Stored as its bits: a u64 does not fit BIGINT, its bits do.
            .bind(hashes.get(row.case as usize).map(|h| *h as i64))
            .bind(self.jobs.group(row.case))
            .bind(row.status())
            .bind(row.outcome.map(promptgauge_client::Outcome::as_str))
            .bind(row.score())
            .bind(big(row.tokens_in))
            .bind(big(row.tokens_out))
            .bind(row.latency_ms())
            .bind(row.ttft_ms())
            .bind(row.cost_usd(price))
            .bind(row.cached as i64)
            .bind(i64::from(row.attempts))
    }
}

/// One row into `table`, from its columns' names and values: the statement and its binds
/// come from the one list, so they cannot disagree.
async fn insert(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    table: &str,
    columns: Vec<(&'static str, Bound)>,
) -> Result<(), StoreError> {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        names.join(", "),
        marks.join(", ")
    );
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for (_, value) in columns {
        query = value.bind_to(query);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// `runs`' columns and one run's values: the one list its INSERT is built from (every
/// SELECT reads its columns by name).
fn run_columns(
    run_id: &str,
    record: &RunRecord,
    summary: &Summary,
    folder: &Path,
) -> Result<Vec<(&'static str, Bound)>, StoreError> {
    use Bound::{Int, Real, Text};
    let text = |s: &str| Text(Some(s.to_string()));
    let int = |n: u64| Int(Some(big(n)));
    let source = record.source.clone().unwrap_or_default();
    let scored = summary.variants.iter().any(|v| v.mean_score.is_some());
    let cost = summary
        .variants
        .iter()
        .map(|v| v.spent_usd.or(v.cost_usd))
        .sum::<Option<f64>>();
    let ci = (!source.ci.is_empty()).then(|| serde_json::to_string(&source.ci).unwrap_or_default());
    let started_unix_ms = record
        .started_unix_ms
        .unwrap_or_else(|| unix_ms(&record.started_at));
    Ok(vec![
        ("run_id", text(run_id)),
        ("bench", text(&record.bench.name)),
        ("fingerprint", Text(Some(fingerprint(record)))),
        ("model", text(&record.endpoint.model)),
        ("base_url", text(&record.endpoint.base_url)),
        ("simulated", Int(Some(record.endpoint.simulated as i64))),
        ("tool_version", text(&record.tool.version)),
        ("git_commit", Text(source.commit.clone())),
        ("git_branch", Text(source.branch.clone())),
        ("git_dirty", Int(source.dirty.map(i64::from))),
        ("ci", Text(ci)),
        ("started_at", text(&record.started_at)),
        ("finished_at", Text(record.finished_at.clone())),
        ("started_unix_ms", Int(Some(started_unix_ms))),
        ("complete", Int(Some(summary.complete as i64))),
        (
            "stopped",
            Text(record.stopped.as_ref().map(ToString::to_string)),
        ),
        ("kind", text(run_kind(record).as_str())),
        ("shard", Text(record.plan.shard.map(|s| s.to_string()))),
        ("cases", int(summary.run.cases as u64)),
        ("repeats", Int(Some(i64::from(record.plan.repeats)))),
        ("confidence", Real(Some(record.bench.confidence))),
        ("jobs_planned", int(summary.run.jobs_planned as u64)),
        ("jobs_finished", int(summary.jobs_finished as u64)),
        ("jobs_failed", int(summary.jobs_failed as u64)),
        ("scored", Int(Some(scored as i64))),
        ("cost_usd", Real(cost)),
        ("folder", Text(Some(folder.display().to_string()))),
        // The case ids and hashes are in the job rows: kept once.
        (
            "record",
            Text(Some(serde_json::to_string(&record.without_cases())?)),
        ),
        ("summary", Text(Some(serde_json::to_string(summary)?))),
        (
            "recorded_at",
            Text(Some(promptgauge_base::clock::utc_now())),
        ),
        ("allowed_failures", int(record.allowed_failures)),
    ])
}

/// `run_variants`' columns and one variant's values: the one list its INSERT is built from
/// (its SELECT reads every column by name). A new figure in `history` is a migration that
/// adds its column, one line here, and its field in `VariantRow`.
fn variant_columns(
    run_id: &str,
    position: usize,
    v: &promptgauge_report::VariantSummary,
    model: Option<String>,
) -> Vec<(&'static str, Bound)> {
    use Bound::{Int, Real, Text};
    let int = |n: u64| Int(Some(big(n)));
    vec![
        ("run_id", Text(Some(run_id.to_string()))),
        ("variant", Text(Some(v.name.clone()))),
        ("position", Int(Some(position as i64))),
        ("baseline", Int(Some(v.baseline as i64))),
        ("n", int(v.n)),
        ("correct", int(v.correct)),
        ("failed", int(v.failed)),
        ("accuracy", Real(v.accuracy)),
        ("ci_low", Real(v.ci_low)),
        ("ci_high", Real(v.ci_high)),
        ("mean_score", Real(v.mean_score)),
        ("score_ci_low", Real(v.score_ci_low)),
        ("score_ci_high", Real(v.score_ci_high)),
        ("cost_usd", Real(v.cost_usd)),
        ("spent_usd", Real(v.spent_usd)),
        ("tokens_in", int(v.tokens.prompt)),
        ("tokens_out", int(v.tokens.completion)),
        ("latency_p50_ms", Real(v.latency_ms.p50)),
        ("latency_p90_ms", Real(v.latency_ms.p90)),
        ("latency_p99_ms", Real(v.latency_ms.p99)),
        ("ttft_p50_ms", Real(v.ttft_ms.p50)),
        ("ttft_p90_ms", Real(v.ttft_ms.p90)),
        ("endpoint", Text(v.endpoint.clone())),
        ("variant_only", Text(v.variant.clone())),
        ("model", Text(model)),
    ]
}

/// `run_parts`' columns and one part's values for one arm.
fn part_columns(
    run_id: &str,
    position: usize,
    part: &promptgauge_report::parts::PartFigures,
    arm: &promptgauge_report::parts::PartVariant,
) -> Vec<(&'static str, Bound)> {
    use Bound::{Int, Real, Text};
    vec![
        ("run_id", Text(Some(run_id.to_string()))),
        ("part", Text(Some(part.name.clone()))),
        ("variant", Text(Some(arm.name.clone()))),
        ("position", Int(Some(position as i64))),
        ("zero_one", Int(Some(part.binary as i64))),
        ("n", Int(Some(big(arm.n)))),
        ("mean", Real(arm.mean)),
        ("ci_low", Real(arm.ci_low)),
        ("ci_high", Real(arm.ci_high)),
    ]
}

/// The fingerprint as one text (its three parts joined).
fn fingerprint(r: &RunRecord) -> String {
    let f = &r.fingerprint;
    format!("{}:{}:{}", f.cases, f.variants, f.settings)
}

/// What kind of run a record describes.
fn run_kind(r: &RunRecord) -> RunKind {
    if !r.merged_from.is_empty() {
        RunKind::Merged
    } else if r.plan.shard.is_some() {
        RunKind::Shard
    } else if !r.resumed_at.is_empty() {
        RunKind::Resumed
    } else {
        RunKind::Run
    }
}

/// An RFC 3339 time in Unix milliseconds (0 when unreadable).
fn unix_ms(time: &str) -> i64 {
    humantime::parse_rfc3339_weak(time)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// A count as BIGINT (counts past i64::MAX, from absurd usage reports, stop there).
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Whether `path` cannot be written: a read-only file system (or, for other users, a
/// read-only file or folder). Root ignores permission bits but not a read-only mount.
#[cfg(unix)]
fn read_only(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) != 0 }
}

#[cfg(not(unix))]
fn read_only(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_as_written_and_show_no_password() {
        assert_eq!(
            Location::parse("reports/promptgauge.db"),
            Ok(Location::Sqlite("reports/promptgauge.db".into()))
        );
        assert_eq!(
            Location::parse("sqlite:///abs/h.db?mode=rwc"),
            Ok(Location::Sqlite("/abs/h.db".into()))
        );
        assert_eq!(
            Location::parse("sqlite:rel.db"),
            Ok(Location::Sqlite("rel.db".into()))
        );
        let pg = Location::parse("postgresql://ci:hunter2@db:5432/history").unwrap();
        assert!(matches!(pg, Location::Postgres(_)));
        assert_eq!(pg.shown(), "postgresql://[redacted]@db:5432/history");
        assert!(pg.file().is_none());
        assert!(
            Location::parse("mysql://x/y")
                .unwrap_err()
                .contains("not supported")
        );
        assert!(Location::parse("  ").is_err());
        assert!(Location::parse("sqlite://").is_err());
    }

    #[test]
    fn filters_bind_what_they_name() {
        let (clause, args) = Filter::default().clause();
        assert_eq!((clause.as_str(), args.len()), ("", 0));
        let f = Filter {
            bench: Some("b".into()),
            branch: Some("main".into()),
            since_unix_ms: Some(5),
            complete: true,
            ..Filter::default()
        };
        let (clause, args) = f.clause();
        assert_eq!(
            clause,
            " WHERE r.bench = $1 AND r.git_branch = $2 AND r.started_unix_ms >= $3 AND r.complete = 1"
        );
        assert_eq!(args.len(), 3);
    }

    #[tokio::test]
    async fn the_columns_written_are_the_tables_columns() {
        // A migration that adds a column without its value in `variant_columns` (or a
        // value without its migration) fails here, not in a user's store.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Location::Sqlite(dir.path().join("h.db")))
            .await
            .unwrap();
        let rows = sqlx::query("SELECT name FROM pragma_table_info('run_variants')")
            .fetch_all(&mut *store.conn.lock().await)
            .await
            .unwrap();
        let mut table: Vec<String> = rows.iter().map(|r| r.try_get(0).unwrap()).collect();
        let summary: Summary =
            serde_json::from_str(include_str!("../../../tests/golden/example/summary.json"))
                .unwrap();
        let mut written: Vec<String> = variant_columns("r", 0, &summary.variants[0], None)
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect();
        table.sort();
        written.sort();
        assert_eq!(table, written);
        // And `runs`, from a record as the first release wrote it.
        let rows = sqlx::query("SELECT name FROM pragma_table_info('runs')")
            .fetch_all(&mut *store.conn.lock().await)
            .await
            .unwrap();
        let mut table: Vec<String> = rows.iter().map(|r| r.try_get(0).unwrap()).collect();
        let record: RunRecord =
            serde_json::from_str(include_str!("../../../tests/fixtures/run-0.1.0/run.json"))
                .unwrap();
        let mut written: Vec<String> = run_columns("r", &record, &summary, Path::new("/r"))
            .unwrap()
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect();
        table.sort();
        written.sort();
        assert_eq!(table, written);
        // And `run_parts`.
        let rows = sqlx::query("SELECT name FROM pragma_table_info('run_parts')")
            .fetch_all(&mut *store.conn.lock().await)
            .await
            .unwrap();
        let mut table: Vec<String> = rows.iter().map(|r| r.try_get(0).unwrap()).collect();
        let part = promptgauge_report::parts::PartFigures {
            name: "category".into(),
            cases: 1,
            binary: true,
            variants: Vec::new(),
            comparisons: Vec::new(),
        };
        let arm = promptgauge_report::parts::PartVariant {
            name: "plain".into(),
            n: 1,
            mean: None,
            ci_low: None,
            ci_high: None,
        };
        let mut written: Vec<String> = part_columns("r", 0, &part, &arm)
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect();
        table.sort();
        written.sort();
        assert_eq!(table, written);
        assert_eq!(SCHEMA_VERSION, MIGRATIONS.len() as i64);
    }

    #[tokio::test]
    async fn a_version_1_store_is_migrated_to_the_latest_and_its_runs_read() {
        let dir = tempfile::tempdir().unwrap();
        let location = Location::Sqlite(dir.path().join("h.db"));
        let store = Store::open(&location).await.unwrap();
        // Back to version 1, as a store written by the previous release.
        for sql in [
            "ALTER TABLE runs DROP COLUMN allowed_failures",
            "ALTER TABLE run_variants DROP COLUMN endpoint",
            "ALTER TABLE run_variants DROP COLUMN variant_only",
            "ALTER TABLE run_variants DROP COLUMN model",
            "DROP TABLE run_parts",
            "DELETE FROM promptgauge_migrations WHERE version >= 2",
            "INSERT INTO runs (run_id, bench, fingerprint, model, base_url, simulated, \
             tool_version, started_at, started_unix_ms, complete, kind, cases, repeats, \
             confidence, jobs_planned, jobs_finished, jobs_failed, scored, folder, record, \
             summary, recorded_at) VALUES ('old', 'b', 'f', 'm', 'u', 0, '0.1', 't', 1, 1, \
             'run', 3, 1, 0.95, 6, 6, 0, 0, '/x', '{}', '{}', 't')",
        ] {
            sqlx::query(AssertSqlSafe(sql))
                .execute(&mut *store.conn.lock().await)
                .await
                .unwrap();
        }
        store.close().await;
        let store = Store::open_existing(&location).await.unwrap();
        let runs = store.runs(&Filter::default()).await.unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(
            (runs[0].run_id.as_str(), runs[0].allowed_failures),
            ("old", 0)
        );
        // A run recorded before parts were kept has none.
        assert!(store.parts(&Filter::default()).await.unwrap().is_empty());
        let version: i64 = sqlx::query_scalar("SELECT MAX(version) FROM promptgauge_migrations")
            .fetch_one(&mut *store.conn.lock().await)
            .await
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn times_order_by_milliseconds() {
        assert_eq!(unix_ms("1970-01-01T00:00:01Z"), 1000);
        assert_eq!(unix_ms("not a time"), 0);
        assert_eq!(big(u64::MAX), i64::MAX);
    }
}
