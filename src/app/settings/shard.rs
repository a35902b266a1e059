//! `--shard auto`: the shard a scheduler's variables number this process, read once
//! before any command runs.

use promptgauge_suite::Shard;

use super::env::Env;
use crate::cli::{Cli, Command, ShardSpec};
use crate::error::UsageError;

/// A scheduler that numbers the processes it starts, as `--shard auto` reads it.
struct Scheduler {
    /// Who it is, as said ("a SLURM job array").
    who: &'static str,
    /// The variable holding this process's index.
    index: &'static str,
    /// The index of its first task.
    first: u32,
    /// The variable holding how many tasks it runs, when it says.
    count: Option<&'static str>,
}

/// The schedulers `--shard auto` reads: the first whose index is set numbers the shard.
const SCHEDULERS: [Scheduler; 6] = [
    Scheduler {
        who: "a Kubernetes Indexed Job",
        index: "JOB_COMPLETION_INDEX",
        first: 0,
        count: None,
    },
    Scheduler {
        who: "a SLURM job array",
        index: "SLURM_ARRAY_TASK_ID",
        first: 0,
        count: Some("SLURM_ARRAY_TASK_COUNT"),
    },
    Scheduler {
        who: "GitLab CI's parallel:",
        index: "CI_NODE_INDEX",
        first: 1,
        count: Some("CI_NODE_TOTAL"),
    },
    Scheduler {
        who: "CircleCI's parallelism",
        index: "CIRCLE_NODE_INDEX",
        first: 0,
        count: Some("CIRCLE_NODE_TOTAL"),
    },
    Scheduler {
        who: "Buildkite's parallelism",
        index: "BUILDKITE_PARALLEL_JOB",
        first: 0,
        count: Some("BUILDKITE_PARALLEL_JOB_COUNT"),
    },
    Scheduler {
        who: "an AWS Batch array job",
        index: "AWS_BATCH_JOB_ARRAY_INDEX",
        first: 0,
        count: None,
    },
];

/// The shard `--shard auto[/N]` names here: the scheduler's index (and count), and a
/// sentence saying where they came from.
/// Two schedulers' variables that number the process differently (a GitLab job inside a
/// Kubernetes Indexed Job, a variable left over in a runner's image) stop it: picking one
/// would run a shard twice and another never.
fn auto_shard(count: Option<u32>, env: &Env) -> Result<(Shard, String), UsageError> {
    let set: Vec<_> = SCHEDULERS
        .iter()
        .filter(|s| env.get(s.index).is_some())
        .collect();
    let Some(&first) = set.first() else {
        let looked: Vec<&str> = SCHEDULERS.iter().map(|s| s.index).collect();
        return Err(UsageError::with_fix(
            format!(
                "--shard auto: no scheduler numbered this process (none of {} is set)",
                looked.join(", ")
            ),
            "start it as one of a scheduler's indexed tasks, or give the shard: --shard 2/4",
        ));
    };
    let chosen = shard_of(first, count, env);
    for &other in &set[1..] {
        let theirs = shard_of(other, count, env);
        let same = matches!((&chosen, &theirs), (Ok((a, _)), Ok((b, _))) if a == b);
        if !same {
            let says = |s: &Scheduler, r: &Result<(Shard, String), UsageError>| {
                let vars = std::iter::once(s.index)
                    .chain(s.count)
                    .filter_map(|v| env.get(v).map(|x| format!("{v}={x}")))
                    .collect::<Vec<_>>()
                    .join(", ");
                match r {
                    Ok((shard, _)) => format!("{} ({vars}) says shard {shard}", s.who),
                    Err(e) => format!("{} ({vars}) gives no shard ({})", s.who, e.0),
                }
            };
            return Err(UsageError::with_fix(
                format!(
                    "--shard auto: two schedulers number this process differently: {}, {}",
                    says(first, &chosen),
                    says(other, &theirs)
                ),
                format!(
                    "unset the variables of the scheduler that did not start this process ({} or {}), or give the shard: --shard 2/4",
                    first.index, other.index
                ),
            ));
        }
    }
    chosen
}

/// The shard one scheduler's variables name.
fn shard_of(
    scheduler: &Scheduler,
    count: Option<u32>,
    env: &Env,
) -> Result<(Shard, String), UsageError> {
    let &Scheduler {
        who,
        index: var,
        count: total,
        ..
    } = scheduler;
    let index = whole_number(env, var)?;
    let offset = first_task(scheduler, env)?;
    if index < offset {
        return Err(UsageError(format!(
            "--shard auto: {var}={index} is below the first task ({offset})"
        )));
    }
    let value = index - offset;
    let from_env = match total {
        Some(t) if env.get(t).is_some() => Some((t, whole_number(env, t)?)),
        _ => None,
    };
    let n = task_count(scheduler, count, from_env, index)?;
    let shard: Shard = format!("{}/{n}", value + 1).parse().map_err(|_| {
        UsageError::with_fix(
            format!(
                "--shard auto: {var}={index} is task {} of {n}: there is no such shard",
                value + 1
            ),
            "the count must cover every task's index (`auto/N` or the scheduler's count)",
        )
    })?;
    let said = format!(
        "shard {shard} from {who} ({var}={index}{})",
        from_env
            .map(|(t, m)| format!(", {t}={m}"))
            .unwrap_or_default()
    );
    Ok((shard, said))
}

/// A scheduler's variable as a whole number, or why `--shard auto` cannot read it.
fn whole_number(env: &Env, name: &str) -> Result<u32, UsageError> {
    let text = env.get(name).unwrap_or("");
    text.trim().parse::<u32>().map_err(|_| {
        UsageError::with_fix(
            format!("--shard auto: {name}={text} is not a whole number"),
            "give the shard: --shard 2/4",
        )
    })
}

/// The index of a scheduler's first task, the first shard.
fn first_task(scheduler: &Scheduler, env: &Env) -> Result<u32, UsageError> {
    let first = scheduler.first;
    if scheduler.index != "SLURM_ARRAY_TASK_ID" {
        return Ok(first);
    }
    // A SLURM array need not start at 0 (`--array=1-8`): its first task is the first shard.
    let mut offset = first;
    if let Some(min) = env.get("SLURM_ARRAY_TASK_MIN") {
        offset = whole_number(env, "SLURM_ARRAY_TASK_MIN").map_err(|_| {
            UsageError(format!(
                "--shard auto: SLURM_ARRAY_TASK_MIN={min} is not a whole number"
            ))
        })?;
    }
    if env
        .get("SLURM_ARRAY_TASK_STEP")
        .is_some_and(|s| s.trim() != "1")
    {
        return Err(UsageError::with_fix(
            "--shard auto: this SLURM array steps by more than 1 (SLURM_ARRAY_TASK_STEP), so its task ids do not number shards one by one".to_string(),
            "use an array of consecutive ids (--array=0-7), or give the shard: --shard 2/4",
        ));
    }
    Ok(offset)
}

/// How many shards: `auto/N`'s N or the scheduler's count (`from_env`), which must agree
/// when both are given; `index` is this task's, as the scheduler numbers it.
fn task_count(
    scheduler: &Scheduler,
    count: Option<u32>,
    from_env: Option<(&str, u32)>,
    index: u32,
) -> Result<u32, UsageError> {
    let &Scheduler {
        who, index: var, ..
    } = scheduler;
    match (count, from_env) {
        (Some(n), Some((t, m))) if n != m => Err(UsageError::with_fix(
            format!("--shard auto/{n}, but {who} runs {m} tasks ({t}={m})"),
            format!("write --shard auto (the count is {t}'s), or auto/{m}"),
        )),
        (Some(n), _) => Ok(n),
        (None, Some((_, m))) => Ok(m),
        (None, None) => Err(UsageError::with_fix(
            format!(
                "--shard auto: {who} gives this task's index ({var}={index}) but not how many tasks there are"
            ),
            "write --shard auto/N, N the number of tasks (a Kubernetes Job's `completions`, an AWS Batch array's size)",
        )),
    }
}

/// Reads what the flags leave to the environment (`--shard auto`) before any command runs,
/// into the plan flags' `shard`; what it says, to print.
pub fn resolve_shard(cli: &mut Cli, env: &Env) -> Result<Vec<String>, UsageError> {
    let plan = match &mut cli.command {
        Command::Run(args) => &mut args.plan,
        Command::Check(args) => &mut args.plan,
        _ => return Ok(Vec::new()),
    };
    match plan.shard_spec {
        None => Ok(Vec::new()),
        Some(ShardSpec::Given(s)) => {
            plan.shard = Some(s);
            Ok(Vec::new())
        }
        Some(ShardSpec::Auto(count)) => {
            let (shard, said) = auto_shard(count, env)?;
            plan.shard = Some(shard);
            Ok(vec![said])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_auto_reads_each_scheduler_s_index_and_count() {
        let shard = |count: Option<u32>, vars: &[(&str, &str)]| {
            auto_shard(count, &Env::from_pairs(vars.iter().copied()))
                .map(|(s, _)| s.to_string())
                .map_err(|e| e.to_string())
        };
        let ok = |s: &str| Ok::<String, String>(s.to_string());
        // Kubernetes and AWS Batch: 0-based, the count from `auto/N`.
        assert_eq!(shard(Some(8), &[("JOB_COMPLETION_INDEX", "0")]), ok("1/8"));
        assert_eq!(shard(Some(8), &[("JOB_COMPLETION_INDEX", "7")]), ok("8/8"));
        assert_eq!(
            shard(Some(3), &[("AWS_BATCH_JOB_ARRAY_INDEX", "2")]),
            ok("3/3")
        );
        let e = shard(None, &[("JOB_COMPLETION_INDEX", "2")]).unwrap_err();
        assert!(
            e.contains("not how many tasks") && e.contains("auto/N"),
            "{e}"
        );
        let e = shard(Some(4), &[("JOB_COMPLETION_INDEX", "4")]).unwrap_err();
        assert!(e.contains("no such shard"), "{e}");
        // SLURM: from the array's first id, its count.
        let slurm = [
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "8"),
        ];
        assert_eq!(shard(None, &slurm), ok("5/8"));
        assert_eq!(
            shard(
                None,
                &[
                    ("SLURM_ARRAY_TASK_ID", "0"),
                    ("SLURM_ARRAY_TASK_COUNT", "2")
                ]
            ),
            ok("1/2")
        );
        let e = shard(Some(4), &slurm).unwrap_err();
        assert!(
            e.contains("auto/4") && e.contains("SLURM_ARRAY_TASK_COUNT=8"),
            "{e}"
        );
        let stepped = [
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ];
        assert!(
            shard(None, &stepped)
                .unwrap_err()
                .contains("steps by more than 1")
        );
        // Two schedulers that disagree stop it, naming both; two that agree do not.
        let e = shard(
            None,
            &[
                ("JOB_COMPLETION_INDEX", "0"),
                ("CI_NODE_INDEX", "3"),
                ("CI_NODE_TOTAL", "4"),
            ],
        )
        .unwrap_err();
        assert!(
            e.contains("two schedulers")
                && e.contains("a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=0) gives no shard")
                && e.contains(
                    "GitLab CI's parallel: (CI_NODE_INDEX=3, CI_NODE_TOTAL=4) says shard 3/4"
                )
                && e.contains("unset"),
            "{e}"
        );
        let e = shard(
            Some(4),
            &[("JOB_COMPLETION_INDEX", "0"), ("CI_NODE_INDEX", "3")],
        )
        .unwrap_err();
        assert!(
            e.contains("says shard 1/4") && e.contains("says shard 3/4"),
            "{e}"
        );
        assert_eq!(
            shard(
                None,
                &[
                    ("CI_NODE_INDEX", "2"),
                    ("CI_NODE_TOTAL", "4"),
                    ("CIRCLE_NODE_INDEX", "1"),
                    ("CIRCLE_NODE_TOTAL", "4")
                ]
            ),
            ok("2/4")
        );
        // GitLab (1-based), CircleCI and Buildkite (0-based), with their totals.
        assert_eq!(
            shard(None, &[("CI_NODE_INDEX", "3"), ("CI_NODE_TOTAL", "5")]),
            ok("3/5")
        );
        assert_eq!(
            shard(
                None,
                &[("CIRCLE_NODE_INDEX", "0"), ("CIRCLE_NODE_TOTAL", "2")]
            ),
            ok("1/2")
        );
        assert_eq!(
            shard(
                None,
                &[
                    ("BUILDKITE_PARALLEL_JOB", "1"),
                    ("BUILDKITE_PARALLEL_JOB_COUNT", "2")
                ]
            ),
            ok("2/2")
        );
        // Nothing set, or not a number: said, with the fix.
        let e = shard(None, &[]).unwrap_err();
        assert!(
            e.contains("no scheduler numbered") && e.contains("--shard 2/4"),
            "{e}"
        );
        let e = shard(Some(2), &[("JOB_COMPLETION_INDEX", "one")]).unwrap_err();
        assert!(
            e.contains("JOB_COMPLETION_INDEX=one is not a whole number"),
            "{e}"
        );
        // The flag's forms.
        assert_eq!("auto".parse(), Ok(ShardSpec::Auto(None)));
        assert_eq!("auto/6".parse(), Ok(ShardSpec::Auto(Some(6))));
        assert!("auto/0".parse::<ShardSpec>().is_err());
        assert!("2/4".parse::<ShardSpec>().is_ok());
    }
}
