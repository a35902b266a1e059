//! Requests-per-minute and tokens-per-minute limits (`governor`'s GCRA), on tokio's clock so
//! tests can pause it. A job reserves its estimated prompt tokens plus `max_tokens` before
//! each attempt is sent; the wait is not latency.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// governor's clock on tokio time: instants are durations since the limiter was made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokioClock {
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

/// A request that no wait would let through: it asks for more than a limit's whole budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NeverFits {
    #[error("insufficient capacity")]
    Capacity,
    #[error("a request reserving {tokens} tokens can never fit tokens_per_minute {per_minute}")]
    Tokens { tokens: u32, per_minute: u32 },
}

pub(crate) struct Limits {
    clock: TokioClock,
    requests: Option<Limiter>,
    tokens: Option<Limiter>,
    tokens_per_minute: Option<u32>,
}

impl Limits {
    /// Requests are spaced evenly (no burst); tokens may burst up to a minute's budget.
    pub(crate) fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>) -> Self {
        let clock = TokioClock {
            origin: tokio::time::Instant::now(),
        };
        let requests = requests_per_minute
            .and_then(NonZeroU32::new)
            .and_then(|rpm| {
                Quota::with_period(Duration::from_secs(60) / rpm.get())
                    .map(|q| RateLimiter::direct_with_clock(q.allow_burst(NonZeroU32::MIN), clock))
            });
        let tokens = tokens_per_minute
            .and_then(NonZeroU32::new)
            .map(|tpm| RateLimiter::direct_with_clock(Quota::per_minute(tpm), clock));
        Limits {
            clock,
            requests,
            tokens,
            tokens_per_minute,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_none() && self.tokens.is_none()
    }

    /// Waits until one request of `tokens` fits both budgets. Errs when it never can.
    pub(crate) async fn reserve(&self, tokens: u32) -> Result<(), NeverFits> {
        if let Some(limiter) = &self.requests {
            wait(limiter, NonZeroU32::MIN, &self.clock).await?;
        }
        if let (Some(limiter), Some(n)) = (&self.tokens, NonZeroU32::new(tokens)) {
            wait(limiter, n, &self.clock)
                .await
                .map_err(|_| NeverFits::Tokens {
                    tokens,
                    per_minute: self.tokens_per_minute.unwrap_or(0),
                })?;
        }
        Ok(())
    }
}

async fn wait(limiter: &Limiter, n: NonZeroU32, clock: &TokioClock) -> Result<(), NeverFits> {
    loop {
        match limiter.check_n(n) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(clock.now());
                tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
            }
            Err(_) => return Err(NeverFits::Capacity),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_are_spaced_evenly() {
        let limits = Limits::new(Some(120), None);
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..5 {
            limits.reserve(1).await.unwrap();
            at.push(start.elapsed().as_millis());
        }
        // 120 a minute: one every 500 ms, the first at once.
        assert_eq!(at, vec![0, 500, 1000, 1500, 2000]);
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_burst_then_refill() {
        let limits = Limits::new(None, Some(6000));
        let start = tokio::time::Instant::now();
        limits.reserve(6000).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The bucket is empty: 3000 more tokens take half a minute to come back.
        limits.reserve(3000).await.unwrap();
        let waited = start.elapsed().as_secs_f64();
        assert!((29.9..30.1).contains(&waited), "{waited}");
        assert!(limits.reserve(6001).await.is_err());
    }
}
