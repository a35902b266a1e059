//! Where the history store is: `--store`, else `$PROMPTGAUGE_STORE`, else the default file.

use super::env::Env;
use crate::error::UsageError;

/// The history store: `--store`, else $PROMPTGAUGE_STORE, else `promptgauge.db` in
/// `root` (the folder of run folders). The second value says whether it was named.
pub(crate) fn store_location(
    flag: Option<&str>,
    env: &Env,
    root: &std::path::Path,
) -> Result<(promptgauge_store::Location, bool), UsageError> {
    let named = flag.map(|f| (f, "--store")).or_else(|| {
        env.get("PROMPTGAUGE_STORE")
            .map(|v| (v, "$PROMPTGAUGE_STORE"))
    });
    match named {
        Some((text, source)) => promptgauge_store::Location::parse(text)
            .map(|l| (l, true))
            .map_err(|m| {
                UsageError::with_fix(
                    format!("{source}: {m}"),
                    "name a SQLite file (reports/promptgauge.db) or a URL such as postgres://user@host/db",
                )
            }),
        None => Ok((
            promptgauge_store::Location::Sqlite(root.join(promptgauge_store::DEFAULT_FILE)),
            false,
        )),
    }
}
