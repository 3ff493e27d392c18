//! Write fencing: a replica sends a write only while it holds the leader lease
//! and has renewed it within the renew deadline. The [`Fence`] holds the
//! instant until which writes are allowed (fed by the lease guard in
//! `leader.rs`); [`fenced_client`] wraps the client every reconciler, the status
//! task, the NFD task and the Event recorder use. It refuses a write once that
//! instant has passed, and tags every write it lets through with the fence
//! ([`FenceTag`]), so the client stack below checks the fence again before
//! *each attempt* — a retry of a 429/503/504 sleeps inside the stack, maybe
//! past the deadline, and is refused there (`requests.rs`), so work already in
//! flight stops writing at once, retries included. The lease itself is renewed
//! through a client without the fence.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Method, Request, Response};
use kube::client::Body;
use tokio::sync::Notify;
use tower::{BoxError, Service};

use crate::controller::error::Error;

/// Until when this replica may write. Starts closed; the lease guard extends it
/// after each renewal it sees; once revoked it never opens again (the replica
/// stops and restarts as a candidate).
#[derive(Debug)]
pub struct Fence {
    base: Instant,
    /// Milliseconds after `base` until which writes pass; 0: closed.
    until_ms: AtomicU64,
    revoked: AtomicBool,
    opened: Notify,
}

impl Fence {
    pub fn new() -> Arc<Fence> {
        Arc::new(Fence {
            base: Instant::now(),
            until_ms: AtomicU64::new(0),
            revoked: AtomicBool::new(false),
            opened: Notify::new(),
        })
    }

    /// Allows writes until `until` (never moves the limit back).
    pub fn extend_to(&self, until: Instant) {
        if self.revoked.load(Ordering::Acquire) {
            return;
        }
        let ms = u64::try_from(until.saturating_duration_since(self.base).as_millis())
            .unwrap_or(u64::MAX);
        self.until_ms.fetch_max(ms, Ordering::AcqRel);
        self.opened.notify_waiters();
    }

    /// Closes the fence for good; wakes [`Fence::wait_open`], which then
    /// answers false at once instead of at its limit.
    pub fn revoke(&self) {
        self.revoked.store(true, Ordering::Release);
        self.until_ms.store(0, Ordering::Release);
        self.opened.notify_waiters();
    }

    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }

    /// The instant writes stop being allowed; `None` while closed.
    pub fn valid_until(&self) -> Option<Instant> {
        if self.is_revoked() {
            return None;
        }
        match self.until_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(self.base + Duration::from_millis(ms)),
        }
    }

    pub fn is_open(&self) -> bool {
        self.valid_until().is_some_and(|u| Instant::now() < u)
    }

    /// Waits up to `limit` for the fence to open; false if it did not.
    pub async fn wait_open(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let opened = self.opened.notified();
            if self.is_open() {
                return true;
            }
            if self.is_revoked() || tokio::time::timeout_at(deadline, opened).await.is_err() {
                return self.is_open();
            }
        }
    }
}

/// Carried in the extensions of every write the fenced client lets through:
/// the client stack checks it before each attempt (kube's retry policy copies
/// extensions into every retried request).
#[derive(Clone, Debug)]
pub struct FenceTag(pub Arc<Fence>);

impl FenceTag {
    /// `Err` once the fence is closed: the attempt must not leave.
    pub fn check<B>(req: &Request<B>) -> Result<(), Error> {
        match req.extensions().get::<FenceTag>() {
            Some(tag) if !tag.0.is_open() => Err(Error::Fenced(format!(
                "{} {}",
                req.method(),
                req.uri().path()
            ))),
            _ => Ok(()),
        }
    }
}

/// Reads pass always: a fenced replica may still watch and judge.
fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A client whose writes pass only while `fence` is open.
pub fn fenced_client(client: kube::Client, fence: Arc<Fence>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    kube::Client::new(
        Fenced {
            inner: client,
            fence,
        },
        namespace,
    )
}

#[derive(Clone)]
pub struct Fenced {
    inner: kube::Client,
    fence: Arc<Fence>,
}

impl Service<Request<Body>> for Fenced {
    type Response = Response<Body>;
    // Boxed so kube's own errors come out of the outer client unchanged (it
    // downcasts them back), and a refusal arrives as `kube::Error::Service`.
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // kube::Client::send waits for its own buffer's readiness.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let client = self.inner.clone();
        let fence = self.fence.clone();
        Box::pin(async move {
            // Checked here, as the request is about to leave, not when the work
            // was planned: a reconcile that started as leader cannot finish as
            // a second leader.
            if !is_read(req.method()) && !fence.is_open() {
                return Err(Box::new(Error::Fenced(format!(
                    "{} {}",
                    req.method(),
                    req.uri().path()
                ))) as BoxError);
            }
            if !is_read(req.method()) {
                req.extensions_mut().insert(FenceTag(fence));
            }
            client.send(req).await.map_err(|e| Box::new(e) as BoxError)
        })
    }
}

#[cfg(test)]
mod tests;
