//! Where a run was started from: the bench's git checkout (commit, branch, uncommitted
//! changes) and the CI job's variables, recorded in run.json so the history store can file
//! the run by branch, and `index` can file it the same way later.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::app::settings::Env;
use promptgauge_runner::record::Source;

/// CI variables worth keeping: they name the job, its commit and its branch.
const CI_VARIABLES: &[&str] = &[
    "GITHUB_SHA",
    "GITHUB_REF_NAME",
    "GITHUB_HEAD_REF",
    "GITHUB_RUN_ID",
    "GITHUB_RUN_ATTEMPT",
    "GITHUB_REPOSITORY",
    "GITHUB_WORKFLOW",
    "GITHUB_SERVER_URL",
    "CI_COMMIT_SHA",
    "CI_COMMIT_REF_NAME",
    "CI_PIPELINE_URL",
    "CI_JOB_URL",
    "BUILDKITE_COMMIT",
    "BUILDKITE_BRANCH",
    "BUILDKITE_BUILD_URL",
    "CIRCLE_SHA1",
    "CIRCLE_BRANCH",
    "CIRCLE_BUILD_URL",
];

/// Branch variables, most specific first: a pull request's own branch before the ref CI
/// checked out (`123/merge`).
const BRANCH_VARIABLES: &[&str] = &[
    "GITHUB_HEAD_REF",
    "GITHUB_REF_NAME",
    "CI_COMMIT_REF_NAME",
    "BUILDKITE_BRANCH",
    "CIRCLE_BRANCH",
];

const COMMIT_VARIABLES: &[&str] = &[
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "CIRCLE_SHA1",
];

/// The source of a run whose bench is in `dir`; `None` outside a checkout and CI.
pub(super) fn capture(dir: &Path, env: &Env) -> Option<Source> {
    let ci: BTreeMap<String, String> = CI_VARIABLES
        .iter()
        .filter_map(|name| env.get(name).map(|v| (name.to_string(), v.to_string())))
        .collect();
    let first = |names: &[&str]| names.iter().find_map(|n| env.get(n)).map(String::from);
    let commit = git(dir, &["rev-parse", "HEAD"]);
    // A detached checkout (CI's usual) names no branch: CI's variables do.
    let branch = first(BRANCH_VARIABLES)
        .or_else(|| git(dir, &["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD"));
    let dirty = commit.as_ref().and_then(|_| {
        git_output(dir, &["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty())
    });
    let source = Source {
        commit: commit.or_else(|| first(COMMIT_VARIABLES)),
        branch,
        dirty,
        ci,
    };
    (!source.is_empty()).then_some(source)
}

/// A git command's trimmed, non-empty output.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    git_output(dir, args).filter(|s| !s.is_empty())
}

fn git_output(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_variables_name_the_branch_a_pull_request_came_from() {
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(capture(outside.path(), &Env::default()), None);
        let env = Env::from_pairs([
            ("GITHUB_REF_NAME", "42/merge"),
            ("GITHUB_HEAD_REF", "feature"),
            ("GITHUB_SHA", "abc"),
            ("UNRELATED", "x"),
        ]);
        let s = capture(outside.path(), &env).unwrap();
        assert_eq!(s.branch.as_deref(), Some("feature"));
        assert_eq!(s.commit.as_deref(), Some("abc"));
        assert_eq!(s.dirty, None);
        assert_eq!(s.ci.len(), 3);
        let push = Env::from_pairs([("CI_COMMIT_REF_NAME", "main")]);
        assert_eq!(
            capture(outside.path(), &push).unwrap().branch.as_deref(),
            Some("main")
        );
    }
}
