//! A tower layer on the kube client that counts every request by method, so
//! "a no-op reconcile sends zero writes" is measured rather than assumed.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

use super::metrics::Metrics;

#[derive(Clone)]
pub struct CountRequests(pub Arc<Metrics>);

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
        self.metrics.count_request(req.method().as_str(), watch);
        self.inner.call(req)
    }
}

/// A client whose requests are counted into `metrics`.
pub fn counted_client(
    config: kube::Config,
    metrics: Arc<Metrics>,
) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CountRequests(metrics))
        .build())
}
