//! One look at the server (and the judge's) before the first job.

use super::signals::Signals;
use crate::app::{Failure, Prepared};

/// One look at the server before the first job: a dead server, a refused key or an
/// unlisted model is said now, not after every job has spent its retries. A dead replica
/// among live ones is benched, not fatal: returned with why. `None` when a signal came
/// first (nothing was sent).
pub(super) async fn look_at_server(
    p: &Prepared,
    judge: Option<&crate::app::settings::ResolvedJudge>,
    quiet: bool,
    signals: &mut Signals,
) -> Result<Option<Vec<Vec<(usize, String)>>>, Failure> {
    let (endpoints, judge) = crate::app::preflight::looks(p, judge);
    let nothing = vec![Vec::new(); endpoints.len()];
    if endpoints.iter().all(Option::is_none) && judge.is_none() {
        return Ok(Some(nothing));
    }
    let checking = async {
        let (runs, judged) = tokio::join!(
            futures_util::future::join_all(
                endpoints.into_iter().map(crate::app::preflight::check_if)
            ),
            crate::app::preflight::check_if(judge)
        );
        (runs, judged)
    };
    // Ctrl-C or SIGTERM while the server is being looked at: nothing was sent, and the
    // run says so (the signal watcher proper starts with the first job).
    let (runs, judged) = tokio::select! {
        pre = checking => pre,
        why = signals.next() => {
            note!("{why} during the preflight: nothing was sent");
            return Ok(None);
        }
    };
    let mut dead = Vec::with_capacity(runs.len());
    let mut judged = Some(judged);
    for (i, run) in runs.into_iter().enumerate() {
        // The judge's findings are said once, with the first endpoint's.
        let pre = crate::app::preflight::Preflight::both(run, judged.take().unwrap_or_default());
        for w in pre.warnings.iter().filter(|_| !quiet) {
            note!("warning: {w}");
        }
        if let Some(why) = pre.stop {
            return Err(Failure::Provider(anyhow::anyhow!(why)));
        }
        let urls = p
            .grid
            .get(i)
            .map_or(&p.endpoint.base_urls, |g| &g.endpoint.base_urls);
        let live = urls.len() - pre.dead.len();
        for (_, why) in pre.dead.iter().filter(|_| !quiet) {
            note!(
                "warning: replica {why}: benched; jobs go to the {} that answered, and it is tried again when its rest ends",
                crate::app::count(live as u64, "replica", "replicas")
            );
        }
        dead.push(pre.dead);
    }
    Ok(Some(dead))
}
