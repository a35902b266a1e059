//! Before the first job: one `GET <base URL>/models` per endpoint (where the protocol has a
//! models list: [`Protocol::models_url`]), so a dead server, a
//! refused key or a model the server does not list is said at once, not after every job
//! has spent its retries. A server without `/models` (some proxies) is not an error: the
//! first jobs then tell, and a run whose first jobs all fail the same way stops; but one
//! whose request URL answers 404 to an empty request (no route at all) stops here.

use std::time::Duration;

use promptgauge_client::{ApiKey, Protocol, ProtocolKind};

/// The most of a model list that is read: OpenRouter's, the longest in use, is about 1 MB;
/// a body that goes on is cut here and the list is not checked.
pub(crate) const MAX_MODELS_BYTES: usize = 4 << 20;

/// The longest the preflight waits for one base URL (the bench's first-token timeout, when
/// shorter): a server that cannot list its models by then is said to be down.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);

/// What the preflight found: nothing wrong, a reason to stop, or things to mention.
#[derive(Debug, Default)]
pub(crate) struct Preflight {
    /// Stop before dispatch: exit 4 with this.
    pub stop: Option<String>,
    pub warnings: Vec<String>,
    /// Replicas (by index) that did not answer while others did: benched, not fatal.
    pub dead: Vec<(usize, String)>,
}

/// What one base URL answered.
enum Answer {
    /// Nothing: refused, unresolvable, or silent past the deadline.
    Dead(String),
    /// The key was refused.
    Refused(u16),
    /// A model list (the ids), or `None` when it was not one, too long or too slow.
    Listed(Option<Vec<String>>, Option<String>),
    /// Another status.
    Status(u16),
    /// An error that is not the server's absence (TLS, a proxy's oddity): the jobs tell.
    Other,
}

/// Reads a body up to `MAX_MODELS_BYTES`; `None` past it.
async fn bounded_body(mut response: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_MODELS_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The key's headers, then the endpoint's own (`headers:`), as every job sends them: a
/// gateway that wants one of its own for the model list too must not refuse the preflight.
fn credentials(
    mut request: reqwest::RequestBuilder,
    protocol: &dyn Protocol,
    key: Option<&ApiKey>,
    headers: &[(String, String, bool)],
) -> reqwest::RequestBuilder {
    for (name, value) in protocol.key_headers(key) {
        request = request.header(name, value);
    }
    for (name, value, _) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request
}

/// Redirects are followed within the origin only: the key and the endpoint's headers are
/// never sent to another (reqwest drops `Authorization` there, not `x-api-key` nor a
/// header of the endpoint's own). A redirect elsewhere ends the look; the jobs then tell.
fn same_origin_only() -> reqwest::redirect::Policy {
    use promptgauge_client::transport::{MAX_REDIRECTS, same_origin};
    reqwest::redirect::Policy::custom(|attempt| {
        let elsewhere = attempt
            .previous()
            .first()
            .is_some_and(|first| !same_origin(first, attempt.url()));
        if attempt.previous().len() > MAX_REDIRECTS || elsewhere {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

/// How the preflight asks one target's servers: its HTTP client and protocol, the
/// credentials every job sends there, and how long each look may take.
struct Asker<'a> {
    client: reqwest::Client,
    protocol: &'a dyn Protocol,
    /// The target's key, sent as its protocol sends it.
    key: Option<&'a ApiKey>,
    /// The endpoint's own headers (name, value, read from a variable).
    headers: &'a [(String, String, bool)],
    /// The most one look waits.
    wait: Duration,
}

/// What a models list at `url` says.
async fn ask(asker: &Asker<'_>, url: &str) -> Answer {
    let Asker {
        ref client,
        protocol,
        key,
        headers,
        wait,
    } = *asker;
    let request = client.get(url).header("accept", "application/json");
    let request = credentials(request, protocol, key, headers);
    let deadline = tokio::time::Instant::now() + wait;
    let response = match tokio::time::timeout_at(deadline, request.send()).await {
        Err(_) => {
            return Answer::Dead(format!(
                "did not answer within {}",
                humantime::format_duration(wait)
            ));
        }
        Ok(Ok(r)) => r,
        Ok(Err(e)) if e.is_connect() || e.is_timeout() => {
            return Answer::Dead(if e.is_timeout() {
                "did not answer in time".into()
            } else {
                "refused the connection (or its host does not resolve)".into()
            });
        }
        Ok(Err(_)) => return Answer::Other,
    };
    let status = response.status().as_u16();
    match status {
        401 | 403 => Answer::Refused(status),
        200 => match tokio::time::timeout_at(deadline, bounded_body(response)).await {
            Ok(Ok(Some(body))) => {
                Answer::Listed(Some(protocol.model_ids(&body).unwrap_or_default()), None)
            }
            Ok(Ok(None)) => Answer::Listed(
                None,
                Some(format!(
                    "its model list is longer than {} and was not read to the end: the model was not checked",
                    promptgauge_suite::error::shown_size(MAX_MODELS_BYTES as u64)
                )),
            ),
            Ok(Err(_)) => Answer::Listed(None, None),
            Err(_) => Answer::Listed(
                None,
                Some(format!(
                    "its model list did not arrive within {}: the model was not checked",
                    humantime::format_duration(wait)
                )),
            ),
        },
        other => Answer::Status(other),
    }
}

/// The status of an empty request (`{"model": M}`, no messages) to the URL jobs are sent
/// to: a server with the route refuses it (400, 422) without generating or billing
/// anything; one without answers 404. `None` when nothing answered within `wait`.
async fn knock(asker: &Asker<'_>, url: &str, model: &str) -> Option<u16> {
    let Asker {
        ref client,
        protocol,
        key,
        headers,
        wait,
    } = *asker;
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(serde_json::json!({ "model": model }).to_string());
    let request = credentials(request, protocol, key, headers);
    match tokio::time::timeout(wait, request.send()).await {
        Ok(Ok(r)) => Some(r.status().as_u16()),
        _ => None,
    }
}

impl Preflight {
    /// The run's endpoint's findings, then the judge's: either may stop the run; only the
    /// endpoint's replicas are benched (a judge's dead replica is a warning).
    pub(crate) fn both(run: Preflight, judge: Preflight) -> Preflight {
        let mut warnings = run.warnings;
        warnings.extend(judge.warnings);
        warnings.extend(judge.dead.into_iter().map(|(_, why)| why));
        Preflight {
            stop: run.stop.or(judge.stop),
            warnings,
            dead: run.dead,
        }
    }
}

/// What is looked at: the run's endpoint, or its judge's.
pub(crate) struct Target<'a> {
    pub protocol: ProtocolKind,
    pub base_urls: &'a [String],
    pub model: &'a str,
    pub key: Option<&'a ApiKey>,
    pub key_env: &'a str,
    /// Its own request headers (`headers:`), variables read.
    pub headers: &'a [(String, String, bool)],
    /// How messages name it when it is not the run's endpoint (`the judge`).
    pub role: Option<&'a str>,
    /// The flag that sets its model (`--model`, `--judge-model`).
    pub model_flag: &'a str,
}

impl super::settings::ResolvedJudge {
    /// What the preflight looks at for the judge.
    pub(super) fn target(&self) -> Target<'_> {
        Target {
            protocol: self.info.protocol,
            base_urls: &self.base_urls,
            model: &self.model,
            key: self.api_key.as_ref(),
            key_env: &self.api_key_env,
            headers: &self.headers,
            role: Some("the judge"),
            model_flag: "--judge-model",
        }
    }
}

/// Asks each base URL for its models, all at once, each within `wait` (at most
/// [`MAX_WAIT`]) and [`MAX_MODELS_BYTES`].
pub(crate) async fn check(
    target: &Target<'_>,
    connect_timeout: Duration,
    wait: Duration,
) -> Preflight {
    let mut out = Preflight::default();
    for found in probe(target, connect_timeout, wait).await {
        match found {
            Found::Stop(why) => {
                out.stop = Some(named(target, why));
                return out;
            }
            Found::Warning(w) => out.warnings.push(named(target, w)),
            Found::Dead(i, why) => out.dead.push((i, named(target, why))),
        }
    }
    out
}

/// One look: a target, within its (connect, wait) timeouts.
pub(crate) struct Look<'a> {
    pub target: Target<'a>,
    pub timeouts: (Duration, Duration),
}

/// What a run looks at before its first job (and `check --probe` says): each of its
/// endpoints the simulator does not answer (the baseline first; in a run of several, each
/// named), and its judge, when the judge answers elsewhere or with another model. Each
/// within its own limits' timeouts.
pub(crate) fn looks<'a>(
    p: &'a super::Prepared,
    judge: Option<&'a super::settings::ResolvedJudge>,
) -> (Vec<Option<Look<'a>>>, Option<Look<'a>>) {
    let one = |e: &'a crate::app::settings::Endpoint, limits: &promptgauge_client::Limits, role| {
        (!e.base_urls.is_empty()).then(|| Look {
            target: Target {
                protocol: e.protocol,
                base_urls: &e.base_urls,
                model: &e.model,
                key: e.api_key.as_ref(),
                key_env: &e.api_key_env,
                headers: &e.headers,
                role,
                model_flag: if role.is_some() {
                    "its `model:` (or model= in --endpoint NAME=URL,model=M)"
                } else {
                    "--model"
                },
            },
            timeouts: (limits.connect_timeout, limits.first_token_timeout),
        })
    };
    let endpoints = if p.grid.is_empty() {
        vec![one(&p.endpoint, &p.bench.limits, None)]
    } else {
        p.grid
            .iter()
            .map(|g| one(&g.endpoint, &g.limits, Some(g.role())))
            .collect()
    };
    let judge = judge
        .filter(|j| !j.info.simulated && !j.is_endpoint(p))
        .map(|j| Look {
            target: j.target(),
            timeouts: (j.limits.connect_timeout, j.limits.first_token_timeout),
        });
    (endpoints, judge)
}

/// [`check`] of a look when there is one; else nothing found.
pub(crate) async fn check_if(look: Option<Look<'_>>) -> Preflight {
    match look {
        Some(l) => check(&l.target, l.timeouts.0, l.timeouts.1).await,
        None => Preflight::default(),
    }
}

/// A finding said of the judge says so first.
fn named(target: &Target<'_>, what: String) -> String {
    match target.role {
        Some(role) => format!("{role}: {what}"),
        None => what,
    }
}

/// One finding of the preflight.
enum Found {
    Stop(String),
    Warning(String),
    Dead(usize, String),
}

/// Asks each base URL for its models (and, at one without a list, the request's own URL):
/// what that finds, in order; a finding that stops the run ends the list.
async fn probe(target: &Target<'_>, connect_timeout: Duration, wait: Duration) -> Vec<Found> {
    let base_urls = target.base_urls;
    let mut out = Vec::new();
    let wait = wait.min(MAX_WAIT);
    let client = match reqwest::Client::builder()
        .connect_timeout(connect_timeout.min(wait))
        .redirect(same_origin_only())
        .build()
    {
        Ok(c) => c,
        Err(_) => return out,
    };
    let protocol = target.protocol.build();
    // A protocol without a models list: the first jobs tell.
    let Some(urls) = base_urls
        .iter()
        .map(|b| protocol.models_url(b))
        .collect::<Option<Vec<String>>>()
    else {
        return out;
    };
    let asker = Asker {
        client,
        protocol: protocol.as_ref(),
        key: target.key,
        headers: target.headers,
        wait,
    };
    let answers = futures_util::future::join_all(urls.iter().map(|u| ask(&asker, u))).await;
    let dead = answers
        .iter()
        .filter(|a| matches!(a, Answer::Dead(_)))
        .count();
    // Replicas with no route at all: the run stops only when every one is.
    let mut missing: Vec<(usize, String)> = Vec::new();
    for (i, (base, answer)) in base_urls.iter().zip(answers).enumerate() {
        let shown_base = promptgauge_client::secrets::redact_url(base);
        let shown = promptgauge_client::secrets::redact_url(&urls[i]);
        match answer {
            Answer::Dead(why) if dead == base_urls.len() => {
                out.push(Found::Stop(format!(
                    "{shown_base} {why}: nothing was sent. Is the server running, and is the base URL right?"
                )));
                return out;
            }
            Answer::Dead(why) => out.push(Found::Dead(i, format!("{shown_base} {why}"))),
            Answer::Refused(status) => {
                out.push(Found::Stop(refused(target, &shown, status)));
                return out;
            }
            Answer::Listed(listed, note) => {
                out.extend(listed_findings(target, &shown_base, listed, note));
            }
            Answer::Status(status) => {
                match unlisted(&asker, target.model, i, base, &shown, status).await {
                    Some(Found::Dead(i, why)) => missing.push((i, why)),
                    Some(found) => out.push(found),
                    None => {}
                }
            }
            Answer::Other => {}
        }
    }
    if missing.len() == base_urls.len()
        && let Some((_, why)) = missing.first()
    {
        out.push(Found::Stop(format!("{why} Nothing was sent")));
        return out;
    }
    out.extend(missing.into_iter().map(|(i, why)| Found::Dead(i, why)));
    out
}

/// Why a models list that wants a key stops the run: no key is sent there, its variable is
/// not set, or the key was refused.
fn refused(target: &Target<'_>, shown: &str, status: u16) -> String {
    let key_env = target.key_env;
    if key_env.is_empty() {
        format!(
            "{shown} wants a key (HTTP {status}), and none is sent there: name the variable that holds it with --judge-key-env VAR (or judge.api_key_env); nothing was sent"
        )
    } else if target.key.is_none() {
        format!("{shown} wants a key (HTTP {status}), and ${key_env} is not set; nothing was sent")
    } else {
        format!(
            "{shown} refused the API key (HTTP {status}): check the key in ${key_env} (its value is not shown); nothing was sent"
        )
    }
}

/// What a models list says: the server's note, and a model it does not list.
fn listed_findings(
    target: &Target<'_>,
    shown_base: &str,
    listed: Option<Vec<String>>,
    note: Option<String>,
) -> Vec<Found> {
    let (model, model_flag) = (target.model, target.model_flag);
    let mut out = Vec::new();
    if let Some(note) = note {
        out.push(Found::Warning(format!("{shown_base}: {note}")));
    }
    let listed = listed.unwrap_or_default();
    if !listed.is_empty() && !listed.iter().any(|m| m == model) {
        let shown_models: Vec<&str> = listed.iter().take(10).map(String::as_str).collect();
        out.push(Found::Warning(format!(
            "{shown_base} lists the models {}{}, not `{model}`: if the jobs fail, set {model_flag} to one of them (some servers answer to any name)",
            shown_models.join(", "),
            if listed.len() > 10 { ", …" } else { "" }
        )));
    }
    out
}

/// No models list at base URL `i`, `base` (some proxies have none; its list's URL,
/// `shown`, answered `status`): the request's own URL tells whether there is anything
/// there, with a body no server bills for (`model` named, for gateways that route by it).
/// Nothing there is `Found::Dead`.
async fn unlisted(
    asker: &Asker<'_>,
    model: &str,
    i: usize,
    base: &str,
    shown: &str,
    status: u16,
) -> Option<Found> {
    let protocol = asker.protocol;
    let url = protocol.url(base, model);
    let without_v1 = !base.trim_end_matches('/').ends_with("/v1");
    match knock(asker, &url, model).await {
        Some(404) => {
            let hint = if without_v1 {
                "the base URL probably lacks /v1."
            } else {
                "is the base URL (or the model) right?"
            };
            Some(Found::Dead(
                i,
                format!(
                    "{} answered 404 to an empty request for `{model}` (and {shown} answered {status}): there is no {} there, {hint}",
                    promptgauge_client::secrets::redact_url(&url),
                    protocol.path().trim_start_matches('/'),
                ),
            ))
        }
        None if status == 404 && without_v1 => Some(Found::Warning(format!(
            "{shown} answered 404: if the jobs fail with 404 too, the base URL probably lacks /v1"
        ))),
        _ => None,
    }
}
