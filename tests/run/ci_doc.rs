//! Every command of docs/guide/ci.md, as written, on the repository's example bench
//! (promptgauge.yaml, 64 cases): the shell recipes, the gates the GitHub Action's `args:`
//! give (run through the Action's own step), and the sharded workflow's run and merge. On
//! an unchanged copy each passes; on a copy whose baseline prompt broke, each gate fails.
//! The provider is the in-process simulator: the workflows' OpenAI URL and model are left
//! out (the simulator answers whatever the model is called, but a model's name would not
//! be the main run's).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The page's fenced blocks of one language, in order.
fn blocks(doc: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("```{lang}") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            out.push(body.join("\n"));
        }
    }
    out
}

/// A folder holding the example bench and `reports/`.
fn example(into: &Path) {
    for item in ["promptgauge.yaml", "prompts", "cases"] {
        let from = repo().join(item);
        if from.is_dir() {
            copy_dir(&from, &into.join(item));
        } else {
            std::fs::copy(&from, into.join(item)).unwrap();
        }
    }
}

/// `bash -c SCRIPT` in `dir`, as a CI job runs it: promptgauge on the PATH, no keys, on
/// `branch` (`main`, or a pull request's head).
fn bash(dir: &Path, script: &str, branch: &str, env: &[(&str, &str)]) -> (i32, String) {
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("CI", "true")
        .env_remove("PROMPTGAUGE_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("LLM_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("LLM_API_KEY");
    for var in STORE_VARIABLES {
        cmd.env_remove(var);
    }
    if branch == "main" {
        cmd.env("GITHUB_REF_NAME", "main");
    } else {
        cmd.env("GITHUB_HEAD_REF", branch)
            .env("GITHUB_REF_NAME", "7/merge");
    }
    cmd.envs(env.iter().copied());
    let o = cmd.output().unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), said)
}

/// The shell commands of the page's `sh` blocks, each with its line.
fn shell_commands(doc: &str) -> Vec<String> {
    blocks(doc, "sh")
        .iter()
        .flat_map(|b| b.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| l.starts_with("promptgauge "))
        .collect()
}

/// The YAML workflows of the page, parsed.
fn workflows(doc: &str) -> Vec<serde_json::Value> {
    blocks(doc, "yaml")
        .iter()
        .map(|b| serde_saphyr::from_str(b).unwrap())
        .collect()
}

/// Every step of every job of the page's workflows (a snippet of steps counts as its own).
fn steps(doc: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for w in workflows(doc) {
        match w.get("jobs").and_then(|j| j.as_object()) {
            Some(jobs) => {
                for job in jobs.values() {
                    out.extend(job["steps"].as_array().cloned().unwrap_or_default());
                }
            }
            None => out.extend(w.as_array().cloned().unwrap_or_default()),
        }
    }
    out
}

/// The Action's own `run` step (action.yml), which the workflows' `args:` go through.
fn action_step() -> String {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
            .unwrap();
    action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "run")
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The exit code the Action's step passed on, and its `gates` output.
fn action_outputs(file: &Path) -> (String, String) {
    let text = std::fs::read_to_string(file).unwrap();
    let get = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_default()
            .to_string()
    };
    (get("exit-code"), get("gates"))
}

/// The run folder of the newest main run under `reports/`.
fn main_run(dir: &Path) -> PathBuf {
    run_dirs(&dir.join("reports")).pop().expect("main's run")
}

#[test]
fn every_command_in_ci_md_passes_unchanged_and_fails_on_a_broken_prompt() {
    let doc = std::fs::read_to_string(repo().join("docs/guide/ci.md")).unwrap();
    let commands = shell_commands(&doc);
    assert!(commands.len() >= 4, "{commands:?}");
    // The recipe starts on main: the run the pull requests compare with.
    let root = tempfile::tempdir().unwrap();
    let main = root.path().join("main");
    std::fs::create_dir_all(&main).unwrap();
    example(&main);
    let (first, rest) = commands.split_first().unwrap();
    assert!(
        !first.contains("--baseline"),
        "the recipe starts with main's run: {first}"
    );
    let (code, said) = bash(&main, first, "main", &[]);
    assert_eq!(code, 0, "{first}: {said}");
    let baseline = main_run(&main);
    let action = action_step();
    let args: Vec<String> = steps(&doc)
        .iter()
        .filter_map(|s| s["with"]["args"].as_str().map(str::to_string))
        .collect();
    assert!(args.len() >= 2, "{args:?}");
    let scripts: Vec<String> = steps(&doc)
        .iter()
        .filter_map(|s| s["run"].as_str().map(str::to_string))
        .filter(|r| r.contains("promptgauge "))
        .collect();
    assert!(scripts.len() >= 2, "{scripts:?}");
    for broken in [false, true] {
        let what = if broken { "broken" } else { "unchanged" };
        let pr = root.path().join(what);
        copy_dir(&main, &pr);
        // The artifacts the workflows download: main's run folder, unpacked.
        copy_dir(&baseline, &pr.join("baseline-run"));
        copy_dir(&baseline, &pr.join("baseline"));
        if broken {
            let plain = pr.join("prompts/routing/plain.yaml");
            let text = std::fs::read_to_string(&plain).unwrap().replace(
                "Reply with the letter only.",
                "Reply with the letter only. (simulated accuracy 40%)",
            );
            std::fs::write(&plain, text).unwrap();
        }
        let expect = |gated: bool| match (gated, broken) {
            (false, _) | (true, false) => 0,
            (true, true) => 1,
        };
        // The shell recipes, each as written.
        for c in rest {
            let (code, said) = bash(&pr, c, "feature", &[]);
            let gated = c.contains("--fail-if-worse")
                || c.contains("--max-drop") && c.starts_with("promptgauge run");
            assert_eq!(code, expect(gated), "{what}: {c}: {said}");
        }
        // The Action's `args:`, through the Action's own step.
        for a in &args {
            let a = a.replace("${{ steps.base.outputs.args }}", "--baseline baseline-run");
            let out = pr.join("github_output");
            let _ = std::fs::remove_file(&out);
            let (code, said) = bash(
                &pr,
                &action,
                "feature",
                &[
                    ("BENCH", "promptgauge.yaml"),
                    ("BASE_URL", ""),
                    ("MODEL", ""),
                    ("CACHE", "false"),
                    ("ARGS", &a),
                    ("GITHUB_OUTPUT", out.to_str().unwrap()),
                    (
                        "GITHUB_STEP_SUMMARY",
                        pr.join("step-summary.md").to_str().unwrap(),
                    ),
                ],
            );
            assert_eq!(code, 0, "the step itself: {said}");
            let (exit, gates) = action_outputs(&out);
            assert_eq!(exit, expect(true).to_string(), "{what}: args {a}: {said}");
            assert_eq!(
                gates,
                if broken { "failed" } else { "passed" },
                "{what}: {a}"
            );
        }
        // The sharded workflow: each shard, then the merge that gates.
        let local = |s: &str| {
            s.replace("./target/release/promptgauge", "promptgauge")
                .replace(
                    "--base-url https://api.openai.com/v1 --model gpt-4o-mini",
                    "",
                )
        };
        for script in &scripts {
            if script.contains("${{ matrix.shard }}") {
                for shard in 1..=4 {
                    let s = local(script).replace("${{ matrix.shard }}", &shard.to_string());
                    let (code, said) = bash(&pr, &s, "feature", &[]);
                    assert_eq!(code, 0, "{what}: {s}: {said}");
                }
            } else if script.contains(" merge ") {
                let s = local(script);
                let summary = pr.join("step-summary.md");
                let (code, said) = bash(
                    &pr,
                    &s,
                    "feature",
                    &[("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())],
                );
                assert_eq!(code, expect(true), "{what}: {s}: {said}");
            }
        }
    }
}
