//! A tower layer on the kube client that counts every request by method (so "a
//! no-op reconcile sends zero writes" is measured rather than assumed) and, when
//! asked, holds requests to a client-side rate (`--client-qps`/`--client-burst`).

use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::Request;
use tower::{Layer, Service};

use super::metrics::Metrics;

/// A token bucket shared by every request of one client.
pub type Limiter = Arc<DefaultDirectRateLimiter>;

/// `None` when `qps` is 0 (no client-side limit: the API server's priority and
/// fairness still applies).
pub fn limiter(qps: u32, burst: u32) -> Option<Limiter> {
    let qps = NonZeroU32::new(qps)?;
    let burst = NonZeroU32::new(burst).unwrap_or(qps);
    Some(Arc::new(RateLimiter::direct(
        Quota::per_second(qps).allow_burst(burst),
    )))
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

impl<S, B> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
        self.metrics.count_request(req.method().as_str(), watch);
        // The inner future does nothing until polled, so waiting for a token
        // before polling it delays the request itself.
        let fut = self.inner.call(req);
        let limiter = self.limiter.clone();
        Box::pin(async move {
            if let Some(l) = limiter {
                l.until_ready().await;
            }
            fut.await
        })
    }
}

/// A client whose requests are counted into `metrics` and, with a limiter, paced.
pub fn counted_client(
    config: kube::Config,
    metrics: Arc<Metrics>,
) -> Result<kube::Client, kube::Error> {
    limited_client(config, metrics, None)
}

pub fn limited_client(
    config: kube::Config,
    metrics: Arc<Metrics>,
    limiter: Option<Limiter>,
) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CountRequests { metrics, limiter })
        .build())
}
