//! The programs promptgauge starts — `command` scorers, tools a program answers, MCP servers
//! — and how each ends: with everything it started, and with promptgauge, however
//! promptgauge ends (docs/guide/tools.md, "Tools with side effects").
//!
//! Each program runs under a watchdog: promptgauge's own binary again, started as
//! `promptgauge __watchdog FD -- PROGRAM ARGS…`, the leader of a process group of its own
//! and (on Linux) a child subreaper, so whatever the program starts stays beneath it — in a
//! session of its own (`setsid`), or orphaned by a parent that exited. The watchdog starts
//! the program on the pipes promptgauge gave it, holds none of them, and waits for two
//! things:
//! - the program's end: it kills what the program left behind and exits as the program did;
//! - the end of its lifeline, a pipe whose write end promptgauge alone holds. The kernel
//!   closes it when promptgauge's process ends — an exit, a panic, a `kill -9` alike — and
//!   the watchdog kills the program and everything beneath it.
//!
//! A parent-death signal (`PR_SET_PDEATHSIG`) alone would not do: it reaches the child, never
//! what the child started, and it follows the thread that started the child, not the
//! process (a tokio blocking thread ends after ten idle seconds, and would take its children
//! with it). The program gets one all the same, from the watchdog's only thread, in case the
//! watchdog itself is killed.
//!
//! promptgauge ends a program early (its deadline, a broken scorer, the end of a run)
//! through [`Tree`]: the watchdog and everything beneath it are stopped (SIGSTOP, so none
//! starts another meanwhile), then killed. Where the binary is not promptgauge's (the
//! library in another program, or a test), there is no watchdog: the program leads its own
//! process group as a child subreaper, and ends with everything beneath it when promptgauge
//! ends it, but not when promptgauge is killed.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

/// The first argument that starts the binary as a watchdog.
const WATCHDOG: &str = "__watchdog";

/// What starting programs under a watchdog takes, set once by [`watch_children`].
struct Watch {
    /// This binary.
    exe: PathBuf,
    /// The lifeline: both ends stay open for as long as promptgauge runs, and each watchdog
    /// inherits the read end.
    lifeline: (std::io::PipeReader, std::io::PipeWriter),
}

static WATCH: OnceLock<Watch> = OnceLock::new();

/// From now on, every program promptgauge starts runs under a watchdog that ends it, and
/// everything it started, when promptgauge ends. `main` calls it once: the watchdog is this
/// binary, started again.
pub fn watch_children() {
    // The binary as it was started, even if a new version has replaced its file since
    // (where /proc is mounted); else its path. Without either, no watchdog.
    let running = Path::new("/proc/self/exe");
    let exe = if cfg!(target_os = "linux") && running.exists() {
        Some(running.to_path_buf())
    } else {
        std::env::current_exe().ok()
    };
    if let (Some(exe), Ok(lifeline)) = (exe, std::io::pipe()) {
        let _ = WATCH.set(Watch { exe, lifeline });
    }
}

/// `argv` as promptgauge starts each program it runs: in `dir` (the bench's folder), with
/// `env` alone, its stdin and stdout piped, the leader of a process group of its own, under
/// a watchdog once [`watch_children`] was called. The caller says where its stderr goes,
/// and ends it through a [`Tree`].
pub fn command(argv: &[String], env: &[(String, OsString)], dir: &Path) -> tokio::process::Command {
    let mut command = match WATCH.get() {
        Some(watch) => {
            let fd = watch.lifeline.0.as_raw_fd();
            let mut command = tokio::process::Command::new(&watch.exe);
            command
                .arg(WATCHDOG)
                .arg(fd.to_string())
                .arg("--")
                .args(argv);
            // SAFETY: fcntl(2) is async-signal-safe and this closure allocates nothing. The
            // lifeline's read end (close-on-exec, as every descriptor promptgauge opens)
            // stays open across this exec alone: in the watchdog.
            unsafe {
                command.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
            command
        }
        None => {
            let mut command = tokio::process::Command::new(argv.first().map_or("", String::as_str));
            command.args(argv.iter().skip(1));
            #[cfg(target_os = "linux")]
            // SAFETY: prctl(2) is async-signal-safe and this closure allocates nothing.
            unsafe {
                command.pre_exec(become_subreaper);
            }
            command
        }
    };
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    command
}

/// What the calling process starts, and what that starts in turn, stays beneath it when
/// its parent exits (kept across exec): where [`Tree::end`] finds it.
#[cfg(target_os = "linux")]
fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl(2) with integer arguments; no memory is touched.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A program started with [`command`] (its watchdog, or the program itself) and everything
/// beneath it: ended, whole, when this is dropped.
#[derive(Debug)]
pub struct Tree {
    /// The process promptgauge started: the leader of the group, and the top of the tree
    /// (0 once the tree is ended, or when it never started).
    root: AtomicI32,
}

impl Tree {
    /// The tree `child` tops.
    pub fn of(child: &tokio::process::Child) -> Tree {
        Tree {
            root: AtomicI32::new(child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0)),
        }
    }

    /// Kills it all, once. Each process is stopped before any is killed, so none starts
    /// another meanwhile; once promptgauge has collected the root's exit, its process group
    /// alone is killed (what is left there), as its pid may be another's by then.
    pub fn end(&self) {
        let root = self.root.swap(0, Ordering::SeqCst);
        if root <= 1 {
            return;
        }
        if !unreaped(root) {
            // SAFETY: kill(2) on the process group the root led: a group id is not given
            // to a new process while a member of the group lives.
            unsafe {
                libc::kill(-root, libc::SIGKILL);
            }
            return;
        }
        // SAFETY: a plain signal to promptgauge's own child, not yet collected (its pid
        // cannot be reused before).
        unsafe {
            libc::kill(root, libc::SIGSTOP);
        }
        let beneath = freeze_descendants(root);
        // SAFETY: plain signals, to the group the root leads, the root, and the processes
        // found beneath it (stopped: their pids cannot be reused before this kill).
        unsafe {
            libc::kill(-root, libc::SIGKILL);
            libc::kill(root, libc::SIGKILL);
            for p in beneath {
                libc::kill(p, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.end();
    }
}

/// Whether `pid` is a child of this process whose exit was not collected yet (it runs, or
/// is a zombie): its pid is still its own.
fn unreaped(pid: i32) -> bool {
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: waitid(2) writes into `info`, which is as large as it takes; WNOWAIT leaves
    // an exited child to be collected by whoever waits for it.
    unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0
    }
}

/// Every process beneath `root` (by parent links in /proc), each stopped with SIGSTOP,
/// found again until no new one appears: a stopped process cannot start another.
fn freeze_descendants(root: i32) -> Vec<i32> {
    let mut frozen: Vec<i32> = Vec::new();
    for _ in 0..16 {
        let found: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !frozen.contains(p))
            .collect();
        if found.is_empty() {
            break;
        }
        for &p in &found {
            // SAFETY: a plain signal to a process found beneath `root` just now.
            unsafe {
                libc::kill(p, libc::SIGSTOP);
            }
        }
        frozen.extend(found);
    }
    frozen
}

/// The processes beneath `root`, from each one's parent in /proc/PID/stat (none where
/// there is no /proc: the process group is then all that is stopped).
fn descendants(root: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(i32, i32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !tree.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    tree.remove(0);
    tree
}

/// When this process was started as a watchdog (`promptgauge __watchdog FD -- PROGRAM
/// ARGS…`, by [`command`]), watches the program and returns how to exit: as the program
/// did. `None` otherwise: `main` goes on as the command line says.
pub fn watchdog() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WATCHDOG {
        return None;
    }
    let lifeline = args.next().and_then(|a| a.to_str()?.parse::<RawFd>().ok());
    let dashes = args.next();
    let argv: Vec<OsString> = args.collect();
    match (lifeline, dashes) {
        (Some(lifeline), Some(dashes)) if dashes == "--" && !argv.is_empty() => {
            Some(watch(lifeline, &argv))
        }
        _ => {
            eprintln!(
                "promptgauge starts itself as `promptgauge {WATCHDOG} FD -- PROGRAM [ARGS…]` to watch a program it runs"
            );
            Some(ExitCode::from(2))
        }
    }
}

/// The watchdog: starts `argv`, ends everything beneath it when the lifeline `lifeline`
/// ends (promptgauge is gone) or when the program exits (what it left behind), and
/// returns the program's exit.
fn watch(lifeline: RawFd, argv: &[OsString]) -> ExitCode {
    // SAFETY: fcntl(2) on a descriptor number; the lifeline is the watchdog's alone, never
    // the program's.
    unsafe {
        libc::fcntl(lifeline, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    #[cfg(target_os = "linux")]
    let _ = become_subreaper();
    let me = std::process::id() as i32;
    let mut program = std::process::Command::new(&argv[0]);
    program.args(&argv[1..]);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2), getppid(2) and raise(3) are async-signal-safe and this closure
    // allocates nothing.
    unsafe {
        use std::os::unix::process::CommandExt;
        program.pre_exec(move || {
            // Killed with the watchdog, should anything but promptgauge kill it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != me {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
    let started = match program.spawn() {
        Ok(child) => child.id() as i32,
        Err(e) => {
            eprintln!("cannot start `{}`: {e}", argv[0].to_string_lossy());
            return ExitCode::from(127);
        }
    };
    // The program's stdin, stdout and stderr are its own: the watchdog holds none open (an
    // exit, or a closed stdout, is seen by promptgauge as the program's).
    if let Ok(null) = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2(2) onto the standard descriptors, from a file open here.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
    std::thread::spawn(move || {
        if hung_up(lifeline) {
            end_beneath(me);
            // SAFETY: kill(2) on the group this watchdog leads: what is left of it, and
            // the watchdog itself.
            unsafe {
                libc::kill(-me, libc::SIGKILL);
            }
        }
    });
    let status = wait_for(started);
    end_beneath(me);
    exit_as(status)
}

/// Waits until the lifeline ends: `true` then, `false` when it cannot be watched.
fn hung_up(lifeline: RawFd) -> bool {
    let mut watched = libc::pollfd {
        fd: lifeline,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll(2) on one pollfd this function owns.
        let n = unsafe { libc::poll(&mut watched, 1, -1) };
        if n > 0 {
            return watched.revents & (libc::POLLHUP | libc::POLLIN | libc::POLLERR) != 0;
        }
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Collects exits beneath the watchdog (orphans come to it) until `program`'s: its wait
/// status.
fn wait_for(program: i32) -> libc::c_int {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == program {
            return status;
        }
        if pid < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // No child left to wait for (it cannot be: the program is collected here
            // alone): a failure, exit status 1.
            return 1 << 8;
        }
    }
}

/// Kills every process beneath the watchdog `me`, each stopped first.
fn end_beneath(me: i32) {
    for p in freeze_descendants(me) {
        // SAFETY: a plain signal to a process beneath this watchdog, stopped (its pid
        // cannot be reused before this kill).
        unsafe {
            libc::kill(p, libc::SIGKILL);
        }
    }
}

/// The watchdog's exit for the program's wait status: its code, or its signal raised again.
fn exit_as(status: libc::c_int) -> ExitCode {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit(2) with a value on the stack (no core file of the watchdog);
        // signal(2) and raise(3) with the program's own signal, so promptgauge sees the
        // program killed by it.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return ExitCode::from(128u8.wrapping_add(signal as u8));
    }
    ExitCode::from(libc::WEXITSTATUS(status) as u8)
}
