//! A run folder belongs to one process at a time. The owner holds an exclusive OS lock on
//! `.lock` in the folder (flock on Unix, LockFileEx on Windows), which the OS releases when
//! the process ends, however it ends: a `kill -9` leaves no stale lock behind, unlike a pid
//! file. The pid written into the file is only for the message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock file's name inside a run folder.
pub const FILE: &str = ".lock";

/// Held while a process writes a run folder; dropping it releases the folder.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

fn in_use(dir: &Path, file: &mut File) -> String {
    let mut pid = String::new();
    let _ = file.read_to_string(&mut pid);
    let by = match pid.trim() {
        "" => "another promptgauge process".to_string(),
        pid => format!("another promptgauge process (pid {pid})"),
    };
    format!(
        "{} is in use by {by}: a run folder is written by one process at a time\n  fix: wait for that run to finish (or stop it with Ctrl-C), then try again",
        dir.display()
    )
}

/// Takes the folder for this process, or says who has it.
pub(crate) fn acquire(dir: &Path) -> Result<RunLock, String> {
    let path = dir.join(FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(in_use(dir, &mut file)),
        Err(TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
    }
    // Ours now: say who holds it, for the next process's message.
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    let _ = file.flush();
    Ok(RunLock { _file: file })
}

/// Fails when another process is writing the folder (a run still going); reading a
/// finished run needs no lock. Folders from before locks existed have no lock file.
pub(crate) fn check_idle(dir: &Path) -> Result<(), String> {
    let Ok(mut file) = File::open(dir.join(FILE)) else {
        return Ok(());
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(in_use(dir, &mut file)),
        Err(TryLockError::Error(_)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_owner_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).unwrap();
        let e = acquire(dir.path()).unwrap_err();
        assert!(
            e.contains("in use by") && e.contains(&std::process::id().to_string()),
            "{e}"
        );
        assert!(check_idle(dir.path()).is_err());
        drop(held);
        assert!(check_idle(dir.path()).is_ok());
        let _again = acquire(dir.path()).unwrap();
    }
}
