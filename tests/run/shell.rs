//! `completions` and `man`: the scripts a shell loads and the pages `man` reads, built from
//! the command line's own definitions.

use std::process::Command;

use crate::common::{promptgauge, repo};

/// What bash's completion function offers for `words`, the last being the word completed.
fn bash_offers(script: &str, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let line = words.join(" ");
    let driver = format!(
        "set -e\n{script}\ncomplete -p promptgauge >/dev/null\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         _promptgauge promptgauge '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words = quoted.join(" "),
        cur = words[cword],
        prev = words[cword.saturating_sub(1)],
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &driver])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the completion script failed in bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

fn script(shell: &str) -> String {
    let out = promptgauge(&repo())
        .args(["completions", shell])
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8(out.stdout).expect("a script is text")
}

#[test]
fn the_bash_completion_loads_and_offers_the_commands_and_their_flags() {
    if Command::new("bash").arg("--version").output().is_err() {
        // In CI (.ci/run, which is itself bash) a missing bash is a failure, never a skip.
        assert!(std::env::var_os("CI").is_none(), "no bash on this machine");
        println!("skipped: no bash on this machine");
        return;
    }
    let script = script("bash");
    let commands = bash_offers(&script, &["promptgauge", ""]);
    for c in [
        "run",
        "check",
        "merge",
        "compare",
        "init",
        "completions",
        "man",
    ] {
        assert!(
            commands.iter().any(|o| o == c),
            "`{c}` not offered: {commands:?}"
        );
    }
    let flags = bash_offers(&script, &["promptgauge", "run", "--base"]);
    assert!(flags.iter().any(|o| o == "--base-url"), "{flags:?}");
    let tasks = bash_offers(&script, &["promptgauge", "init", "--task", ""]);
    for t in ["choice", "agent"] {
        assert!(tasks.iter().any(|o| o == t), "`{t}` not offered: {tasks:?}");
    }
}

#[test]
fn every_shell_gets_a_script_naming_the_commands() {
    for (shell, mark) in [
        ("zsh", "#compdef promptgauge"),
        ("fish", "complete -c promptgauge"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let text = script(shell);
        assert!(text.contains(mark), "{shell}: {mark} missing");
        assert!(text.contains("merge"), "{shell}: no `merge`");
    }
    promptgauge(&repo())
        .args(["completions", "tcsh"])
        .assert()
        .code(2);
}

#[test]
fn man_prints_the_page_and_writes_one_per_command() {
    let out = promptgauge(&repo())
        .arg("man")
        .assert()
        .success()
        .get_output()
        .clone();
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH promptgauge 1"), "{page}");
    assert!(
        page.contains("Exit codes"),
        "the page carries --help's notes"
    );

    let dir = tempfile::tempdir().unwrap();
    promptgauge(&repo())
        .args(["man", "--out"])
        .arg(dir.path().join("man1"))
        .assert()
        .success();
    let run = std::fs::read_to_string(dir.path().join("man1/promptgauge-run.1")).unwrap();
    assert!(run.contains(".TH promptgauge-run 1"), "{run}");
    assert!(run.contains(r"\-\-base\-url"), "run's page lists its flags");
    let pages = std::fs::read_dir(dir.path().join("man1")).unwrap().count();
    assert!(
        pages >= 18,
        "one page per command and promptgauge.1: {pages}"
    );
}
