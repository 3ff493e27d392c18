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
async fn refusing_server(code: u16) -> (String, Arc<std::sync::Mutex<Vec<std::time::Instant>>>) {
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
        let inner = limited_client(kube::Config::new(url.parse().unwrap()), metrics, None).unwrap();
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
    let app =
        axum::Router::new().fallback(axum::routing::any(move |headers: axum::http::HeaderMap| {
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
        }));
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
