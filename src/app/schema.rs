//! `schema`: the JSON Schemas editors check a bench's files with (docs/guide/files.md,
//! "Checking in the editor"), generated from the types the loader reads them with.

use std::path::Path;

use anyhow::Context;

use super::{Exit, Failure, print_verbatim};
use crate::cli::SchemaArgs;
use crate::error::BeforeSend;
use promptgauge_suite::schema::SchemaOf;

/// `schema WHICH`: prints one schema; `schema --out DIR`: writes every one into DIR.
pub fn schema(args: &SchemaArgs) -> Result<Exit, Failure> {
    match (&args.out, args.which.map(crate::cli::SchemaWhich::of)) {
        (Some(dir), _) => {
            write_all(dir)?;
            note!(
                "wrote {} schemas into {}",
                SchemaOf::ALL.len(),
                dir.display()
            );
        }
        (None, Some(which)) => print_verbatim(which.text().as_bytes())?,
        // clap requires one of them.
        (None, None) => {}
    }
    Ok(Exit::Success)
}

fn write_all(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
        .before_send()?;
    for which in SchemaOf::ALL {
        let path = dir.join(which.file_name());
        promptgauge_base::files::write_atomically(&path, which.text())
            .with_context(|| format!("cannot write {}", path.display()))
            .before_send()?;
    }
    Ok(())
}
