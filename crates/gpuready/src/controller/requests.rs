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
mod tests {
    //! The stack's order is what these pin: with kube's built-in retry below the
    //! counting layer, a throttled request was retried up to 15 times unseen.
    //! A loopback server answers 429 a set number of times, then 200.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::StatusCode as AxumStatus;
    use axum::routing::get;

    use super::*;

    async fn throttling_server(refusals: usize) -> (String, Arc<AtomicUsize>) {
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let app = Router::new().route(
            "/version",
            get(move || {
                let counter = counter.clone();
                async move {
                    if counter.fetch_add(1, Ordering::SeqCst) < refusals {
                        (AxumStatus::TOO_MANY_REQUESTS, "slow down".to_owned())
                    } else {
                        (AxumStatus::OK, "{}".to_owned())
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), seen)
    }

    fn client_for(url: &str, metrics: Arc<Metrics>, limiter: Option<Limiter>) -> kube::Client {
        let config = kube::Config::new(url.parse().unwrap());
        limited_client(config, metrics, limiter).unwrap()
    }

    /// Attempts counted as `GET` in `api_requests_total`.
    fn gets_counted(metrics: &Metrics) -> u64 {
        metrics
            .requests
            .get_or_create(&crate::controller::metrics::Method {
                method: "GET".to_owned(),
            })
            .get()
    }

    async fn get_version(client: &kube::Client) -> Result<String, kube::Error> {
        client
            .request_text(Request::get("/version").body(Vec::new()).unwrap())
            .await
    }

    #[tokio::test]
    async fn every_retry_of_a_throttled_request_is_counted() {
        let (url, seen) = throttling_server(3).await;
        let metrics = Arc::new(Metrics::default());
        let client = client_for(&url, metrics.clone(), None);
        get_version(&client).await.unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 4, "3 refusals, then success");
        assert_eq!(
            gets_counted(&metrics),
            4,
            "each attempt passes the counting layer"
        );
        let refused = metrics
            .retryable_responses
            .get_or_create(&Code {
                code: "429".to_owned(),
            })
            .get();
        assert_eq!(refused, 3);
    }

    #[tokio::test]
    async fn retries_are_bounded_and_the_error_reaches_the_caller() {
        let (url, seen) = throttling_server(usize::MAX).await;
        let metrics = Arc::new(Metrics::default());
        let client = client_for(&url, metrics.clone(), None);
        assert!(get_version(&client).await.is_err());
        // 1 try + 4 retries, then gpuready's per-object backoff takes over.
        assert_eq!(seen.load(Ordering::SeqCst), 5);
        assert_eq!(gets_counted(&metrics), 5);
    }

    #[tokio::test]
    async fn retries_wait_for_the_client_side_rate_limit() {
        let (url, seen) = throttling_server(3).await;
        let metrics = Arc::new(Metrics::default());
        // 2 per second with a burst of 1: four attempts need at least 1.5 s.
        let client = client_for(&url, metrics, limiter(2, 1));
        let start = std::time::Instant::now();
        get_version(&client).await.unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 4);
        assert!(
            start.elapsed() >= Duration::from_millis(1400),
            "retries bypassed the limiter: {:?}",
            start.elapsed()
        );
    }

    /// A loopback server that answers every write with `code` and
    /// `Retry-After: 1`, recording when each write arrived.
    async fn refusing_server(
        code: u16,
    ) -> (String, Arc<std::sync::Mutex<Vec<std::time::Instant>>>) {
        use axum::routing::any;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(any(move || {
            let log = log.clone();
            async move {
                log.lock()
                    .map(|mut l| l.push(std::time::Instant::now()))
                    .ok();
                (
                    axum::http::StatusCode::from_u16(code).unwrap(),
                    [("Retry-After", "1")],
                    "{}",
                )
            }
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), seen)
    }

    /// The retry of a 429/503 sleeps inside the client stack (Retry-After:
    /// 1 s); the fence closes meanwhile: the retry must not leave. Before the
    /// fence was checked per attempt, a deposed leader sent 28 such writes
    /// after its renew deadline (issue 24).
    #[tokio::test]
    async fn no_retry_leaves_after_the_fence_closes() {
        for code in [429, 503, 504] {
            let (url, seen) = refusing_server(code).await;
            let metrics = Arc::new(Metrics::default());
            let inner =
                limited_client(kube::Config::new(url.parse().unwrap()), metrics, None).unwrap();
            let fence = crate::controller::lease::fence::Fence::new();
            let deadline = std::time::Instant::now() + Duration::from_millis(300);
            fence.extend_to(deadline);
            let client = crate::controller::lease::fence::fenced_client(inner, fence.clone());
            let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
            let result = api
                .patch(
                    "n",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(serde_json::json!({})),
                )
                .await;
            let why = format!("{:?}", result.err());
            assert!(why.contains("Fenced"), "{code}: {why}");
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 1, "{code}: the first attempt only");
            assert!(
                seen.iter().all(|t| *t < deadline),
                "{code}: a write after the deadline"
            );
        }
    }

    /// A loopback server sees `gpuready/<version>` on what a client built
    /// from an identified configuration sends (kube's own, and gpuready's stack).
    #[tokio::test]
    async fn every_request_carries_gpureadys_user_agent() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(axum::routing::any(
            move |headers: axum::http::HeaderMap| {
                let log = log.clone();
                async move {
                    let ua = headers
                        .get("user-agent")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    log.lock().map(|mut l| l.push(ua)).ok();
                    "{}"
                }
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        crate::cluster::identify(&mut config);
        crate::cluster::identify(&mut config);
        assert_eq!(config.headers.len(), 1, "set once");
        let metrics = Arc::new(Metrics::default());
        for client in [
            kube::Client::try_from(config.clone()).unwrap(),
            limited_client(config, metrics, None).unwrap(),
        ] {
            let _ = client
                .request_text(http::Request::get("/version").body(Vec::new()).unwrap())
                .await;
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        for ua in seen {
            assert_eq!(ua, format!("gpuready/{}", env!("CARGO_PKG_VERSION")));
        }
    }
}
