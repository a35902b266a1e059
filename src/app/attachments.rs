//! A bench's files checked against where they go, before anything is sent
//! (docs/guide/attachments.md): every file each variant places, at each endpoint of the
//! run, must be one its protocol has a part for in that turn, no larger than the
//! endpoint's `limits.max_file_bytes` (by default its kind's strictest provider limit), and
//! a request's files together within `limits.max_request_bytes`.

use promptgauge_client::attachment::Attachment;
use promptgauge_client::{ChatMessage, Limits, ProtocolKind};
use promptgauge_suite::{Bench, Case, InputError, InputErrors, Variant};

/// Where a run's requests go, as its files see it.
pub(super) struct Recipient<'a> {
    /// `endpoint NAME`, or `the endpoint` for a run of one.
    pub said: String,
    pub protocol: ProtocolKind,
    pub limits: &'a Limits,
}

/// Every PDF the cases give by URL (not fetched: its pages are not known before it is
/// sent) counted at `pages`, the most any endpoint of the run reads
/// (`limits.max_pdf_pages`): what `check`'s estimate, `--budget`'s holds and the
/// tokens-per-minute reservations assume of it, so none falls short of what the provider
/// may bill.
pub(super) fn count_url_documents_at(bench: &mut Bench, pages: u32) {
    use promptgauge_client::attachment::{FileTokens, Kind};
    let at_limit = |f: &mut std::sync::Arc<Attachment>| {
        if f.kind == Kind::Pdf && f.url().is_some() {
            std::sync::Arc::make_mut(f).tokens = FileTokens::pdf(u64::from(pages));
        }
    };
    for case in &mut bench.cases {
        case.files.iter_mut().for_each(at_limit);
        for placed in case.messages.iter_mut().flat_map(|m| m.files.iter_mut()) {
            at_limit(&mut placed.file);
        }
    }
}

/// The most errors said at once: the rest are of the same kind.
const MOST: usize = 20;

/// Checks every file every selected variant (`variants`) places, for each case, at each
/// recipient.
pub(super) fn check(
    bench: &Bench,
    variants: &[usize],
    recipients: &[Recipient<'_>],
) -> Result<(), InputErrors> {
    let mut errors: Vec<InputError> = Vec::new();
    let with_files = bench
        .cases
        .iter()
        .filter(|c| !c.files.is_empty() || c.messages.iter().any(|m| !m.files.is_empty()));
    for case in with_files {
        for &v in variants {
            let variant = &bench.variants[v];
            // Rendering errors are the templates' check's to say.
            let Ok(messages) = bench.templates.render(v, case, variant) else {
                continue;
            };
            for r in recipients {
                errors.extend(check_request(case, variant, &messages, r));
            }
            if errors.len() >= MOST {
                return Err(InputErrors(errors));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InputErrors(errors))
    }
}

/// One request's files at one recipient: each carried where it is, within the limits.
fn check_request(
    case: &Case,
    variant: &Variant,
    messages: &[ChatMessage],
    r: &Recipient<'_>,
) -> Vec<InputError> {
    let mut errors = Vec::new();
    let mut request_bytes = 0u64;
    for m in messages {
        for placed in &m.files {
            let f = &placed.file;
            request_bytes += f.sent_bytes();
            if let Err(why) = r.protocol.carries(f.kind, &m.role, f.url().is_some()) {
                errors.push(
                    InputError::new(
                        case.location.clone(),
                        format!(
                            "case `{}`, variant `{}`, {}: {} ({}): {why}",
                            case.id,
                            variant.name,
                            r.said,
                            f.origin,
                            f.kind.said()
                        ),
                    )
                    .fix(format!(
                        "send it where {} takes it, leave it out of this variant (`files: none` in {}), or choose another endpoint",
                        r.protocol,
                        variant.path.display()
                    )),
                );
            }
            let most = r
                .limits
                .max_file_bytes
                .map_or(f.kind.default_limit(), |b| b as u64);
            if f.size > most {
                errors.push(too_large(case, f, most, r));
            }
        }
    }
    let most = r.limits.max_request_bytes as u64;
    if request_bytes > most {
        errors.push(
            InputError::new(
                case.location.clone(),
                format!(
                    "case `{}`, variant `{}`: its files add {} to a request to {}, more than its limit of {} (limits.max_request_bytes)",
                    case.id,
                    variant.name,
                    mib(request_bytes),
                    r.said,
                    mib(most)
                ),
            )
            .fix("attach fewer or smaller files to this case, or raise limits.max_request_bytes where the provider takes more"),
        );
    }
    errors
}

fn too_large(case: &Case, f: &Attachment, most: u64, r: &Recipient<'_>) -> InputError {
    InputError::new(
        case.location.clone(),
        format!(
            "case `{}`: {} is {}, more than {}'s limit of {} for {}",
            case.id,
            f.origin,
            mib(f.size),
            r.said,
            mib(most),
            f.kind.said()
        ),
    )
    .fix("shrink it (a smaller image, fewer pages), or raise limits.max_file_bytes for that endpoint if its provider takes more")
}

/// Bytes as people read them.
fn mib(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}
