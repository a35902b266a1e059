//! A run folder belongs to one process at a time. The owner holds an exclusive OS lock on
//! `.lock` in the folder (flock on Unix, LockFileEx on Windows), which the OS releases when
//! the process ends, however it ends: a `kill -9` leaves no stale lock behind, unlike a pid
//! file. The pid written into the file is only for the message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside a run folder.
pub const FILE: &str = ".lock";

/// Held while a process writes a run folder; dropping it releases the folder.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

/// Why a run folder could not be taken, or read while another process writes it.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the folder: `by` names it (with its pid, when it wrote one).
    #[error(
        "{} is in use by {by}: a run folder is written by one process at a time\n  fix: wait for that run to finish (or stop it with Ctrl-C), then try again",
        dir.display()
    )]
    InUse { dir: PathBuf, by: String },
    #[error("cannot open {}: {error}", path.display())]
    Open {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot lock {}: {error}", path.display())]
    Lock {
        path: PathBuf,
        error: std::io::Error,
    },
}

fn in_use(dir: &Path, file: &mut File) -> LockError {
    let _ = file.rewind();
    let mut pid = String::new();
    let _ = file.read_to_string(&mut pid);
    let by = match pid.trim() {
        "" => "another promptgauge process".to_string(),
        pid => format!("another promptgauge process (pid {pid})"),
    };
    LockError::InUse {
        dir: dir.to_path_buf(),
        by,
    }
}

/// How long a lock this process released may still read as taken: a program this process
/// starts holds every open file, the lock file's included, between its fork and its exec.
const OWN_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// Tries `lock`; when the holder on record is this very process, which has released the
/// folder (a run followed by its resume, in one process) while a child it was starting still
/// shared the file, tries again until [`OWN_RELEASE`] has passed.
fn retry_own_release(
    file: &mut File,
    lock: fn(&File) -> Result<(), TryLockError>,
) -> Result<(), TryLockError> {
    let deadline = std::time::Instant::now() + OWN_RELEASE;
    loop {
        match lock(file) {
            Err(TryLockError::WouldBlock)
                if std::time::Instant::now() < deadline
                    && recorded_pid(file) == Some(std::process::id()) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn recorded_pid(file: &mut File) -> Option<u32> {
    let mut pid = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut pid).ok()?;
    pid.trim().parse().ok()
}

/// Takes the folder for this process, or says who has it.
pub(crate) fn acquire(dir: &Path) -> Result<RunLock, LockError> {
    let path = dir.join(FILE);
    let mut file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) => return Err(LockError::Open { path, error }),
    };
    match retry_own_release(&mut file, File::try_lock) {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(in_use(dir, &mut file)),
        Err(TryLockError::Error(error)) => return Err(LockError::Lock { path, error }),
    }
    // Ours now: say who holds it, for the next process's message.
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    let _ = file.flush();
    Ok(RunLock { _file: file })
}

/// Held while a process reads a run folder: no run can take the folder (resume into it)
/// until it is dropped. Readers share it.
#[derive(Debug)]
pub struct ReadLock {
    _file: Option<File>,
}

/// Fails when another process is writing the folder (a run still going); otherwise keeps
/// writers out until the guard is dropped. Folders from before locks existed have no lock
/// file, and a file system without locks is read unguarded.
pub(crate) fn read(dir: &Path) -> Result<ReadLock, LockError> {
    let Ok(mut file) = File::open(dir.join(FILE)) else {
        return Ok(ReadLock { _file: None });
    };
    match retry_own_release(&mut file, File::try_lock_shared) {
        Ok(()) => Ok(ReadLock { _file: Some(file) }),
        Err(TryLockError::WouldBlock) => Err(in_use(dir, &mut file)),
        Err(TryLockError::Error(_)) => Ok(ReadLock { _file: None }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_owner_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).unwrap();
        let e = acquire(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("in use by") && e.contains(&std::process::id().to_string()),
            "{e}"
        );
        assert!(read(dir.path()).is_err());
        drop(held);
        let _again = acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_folder_released_while_a_child_shares_the_lock_file_is_taken_once_the_child_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).unwrap();
        // What a child between fork and exec holds: the same open file description.
        let childs_copy = held._file.try_clone().unwrap();
        drop(held);
        let child = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(childs_copy);
        });
        let _again = acquire(dir.path()).unwrap();
        child.join().unwrap();
    }

    #[test]
    fn readers_share_the_folder_and_keep_writers_out() {
        let dir = tempfile::tempdir().unwrap();
        drop(acquire(dir.path()).unwrap());
        let first = read(dir.path()).unwrap();
        let second = read(dir.path()).unwrap();
        assert!(
            acquire(dir.path())
                .unwrap_err()
                .to_string()
                .contains("in use by")
        );
        drop(first);
        assert!(acquire(dir.path()).is_err(), "one reader is still reading");
        drop(second);
        let _writer = acquire(dir.path()).unwrap();
    }
}
