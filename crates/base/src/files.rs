//! Files read and written safely, for every layer: only regular files are read (a FIFO or
//! a device would hang or never end), and whole files are written beside their place and
//! renamed over it (a killed process or a full disk never leaves half a report).

use std::path::Path;

/// Opens a file to read, refusing anything but a regular file (after symlinks): opening a
/// FIFO named `results.jsonl` would wait forever for a writer, a device never ends.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file ({}): promptgauge reads only files",
                path.display(),
                if meta.is_dir() {
                    "a folder"
                } else {
                    "a pipe, a device or a socket"
                }
            ),
        ));
    }
    std::fs::File::open(path)
}

/// A regular file's text: see [`open_regular`].
pub fn read_regular(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    open_regular(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// A regular file's bytes, refused when longer than `cap`: see [`open_regular`].
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_regular(path)?.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is longer than {cap} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// Writes `bytes` as a new file at `path`, its folders made first. Never over a file that
/// exists, nor through a symlink made since a caller's check (`create_new` refuses both).
/// The error is the message a user reads: which folder or file, and why.
pub fn write_new(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, bytes.as_ref()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes a whole file beside `path` and renames it over `path`: a process killed or a disk
/// filled mid-write leaves the old file (or none), never half of the new one. A failed
/// write leaves nothing behind.
pub fn write_atomically(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    write_atomically_with(path, |file| {
        use std::io::Write;
        file.write_all(bytes.as_ref())
    })
}

/// [`write_atomically`] for a writer that streams (JUnit from its spool).
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut file| write(&mut file))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
