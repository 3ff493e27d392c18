//! gpuready's client stack. Every attempt of every request — first tries and
//! retries alike — passes through one layer that counts it by method (so "a
//! no-op reconcile sends zero writes" is measured rather than assumed) and, when
//! asked, holds it to a client-side rate (`--client-qps`/`--client-burst`).
//!
//! Layers, outermost first:
//!
//! 1. retry: gpuready's own policy for 429/503/504 (see [`retry_policy`]);
//! 2. fence + limit + count (this module's [`CountRequests`]): each attempt
//!    waits for the rate limiter, then — right before it leaves — a write the
//!    fenced client tagged ([`FenceTag`]) is refused if the fence closed
//!    meanwhile (a retry that slept past the renew deadline never goes out),
//!    and only what leaves is counted;
//! 3. a buffer (makes the stack cloneable, which retrying needs);
//! 4. kube's own stack (auth, headers, tracing) with kube's built-in retry
//!    switched off: left on, it sits *below* everything a `with_layer` adds, so
//!    its up-to-15 retries were neither counted nor rate-limited.

use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::{Request, Response, StatusCode};
use kube::client::retry::RetryPolicy;
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::controller::lease::fence::FenceTag;
use crate::controller::metrics::{Code, Metrics};

/// A token bucket shared by every request of one client.
pub type Limiter = Arc<DefaultDirectRateLimiter>;

/// Requests the buffer holds before callers wait (far above gpuready's
/// concurrency plus its watches).
const BUFFER: usize = 1024;

/// `None` when `qps` is 0 (no client-side limit: the API server's priority and
/// fairness still applies).
pub fn limiter(qps: u32, burst: u32) -> Option<Limiter> {
    let qps = NonZeroU32::new(qps)?;
    let burst = NonZeroU32::new(burst).unwrap_or(qps);
    Some(Arc::new(RateLimiter::direct(
        Quota::per_second(qps).allow_burst(burst),
    )))
}

/// gpuready's retry of throttled or unavailable responses (429, 503, 504):
/// 4 retries from 100 ms doubling to 5 s, honouring the server's Retry-After.
/// Bounded on purpose: what still fails goes back to the caller, whose own
/// backoff (per node, per watch) takes over instead of a request waiting
/// minutes inside the client. Retries are not sent for bodies that cannot be
/// replayed (watch streams are not retried here; the watcher's backoff is).
pub fn retry_policy() -> RetryPolicy {
    // The parameters are constants that satisfy min ≤ max; the fallback is kube's
    // own default (500 ms to 5 s, 3 retries).
    RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(5), 4, true)
        .unwrap_or_default()
}

#[derive(Clone)]
pub struct CountRequests {
    pub metrics: Arc<Metrics>,
    pub limiter: Option<Limiter>,
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.metrics.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
    limiter: Option<Limiter>,
}

impl<S, B, R> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is awaited on the clone that sends the request, after the
        // rate limiter: reserving the inner service here and then waiting for
        // a token would hold a buffer slot idle.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
        let metrics = self.metrics.clone();
        let limiter = self.limiter.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            if let Some(l) = limiter {
                l.until_ready().await;
            }
            // After the limiter's wait, which may itself outlast the deadline.
            FenceTag::check(&req).map_err(|e| Box::new(e) as BoxError)?;
            metrics.count_request(req.method().as_str(), watch);
            let response = inner.oneshot(req).await.map_err(Into::into)?;
            let status = response.status();
            if matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS
                    | StatusCode::SERVICE_UNAVAILABLE
                    | StatusCode::GATEWAY_TIMEOUT
            ) {
                metrics
                    .retryable_responses
                    .get_or_create(&Code {
                        code: status.as_u16().to_string(),
                    })
                    .inc();
            }
            Ok(response)
        })
    }
}

/// gpuready's client: retry above count + limit above kube's stack (whose own
/// retry is off), so every attempt is counted and paced.
pub fn limited_client(
    mut config: kube::Config,
    metrics: Arc<Metrics>,
    limiter: Option<Limiter>,
) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    crate::cluster::identify(&mut config);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&BufferLayer::new(BUFFER))
        .with_layer(&CountRequests { metrics, limiter })
        .with_layer(&RetryLayer::new(retry_policy()))
        .build())
}

#[cfg(test)]
mod tests;
