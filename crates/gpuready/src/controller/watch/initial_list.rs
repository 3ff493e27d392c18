//! How a watch gets its first state: a streaming list (one watch with
//! `sendInitialEvents`, objects one at a time, no page of 500 Nodes held at
//! once) where the API server serves it, a paged LIST where it refuses one.
//! kube-runtime's watcher takes one strategy for the life of its stream and
//! retries a refused streaming list forever — and Kubernetes 1.33 ships the
//! WatchList feature gate off, answering such a watch with 422. So the stream
//! here starts streaming and, at the first refusal, says so once and goes on
//! with a paged LIST for the rest of the process. Kept here because
//! kube-runtime has no fallback between the two.

use std::fmt::Debug;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tracing::warn;

/// `--initial-list`: how the Node watch gets its first state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// A streaming list, or a paged LIST where the API server refuses one.
    #[default]
    Auto,
    /// A paged LIST (500 objects a page), as before streaming lists existed.
    Paged,
}

type Item<K> = Result<watcher::Event<K>, watcher::Error>;

/// The watcher of `api` with `config`, its first state got as `initial` says.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    initial: InitialList,
) -> BoxStream<'static, Item<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    if initial == InitialList::Paged {
        return watcher(api, config).boxed();
    }
    let streaming = watcher(api.clone(), config.clone().streaming_lists()).boxed();
    futures::stream::unfold(
        (streaming, Some((api, config))),
        |(mut inner, mut fallback)| async move {
            loop {
                let item = inner.next().await?;
                if let Err(e) = &item
                    && refused(e)
                    && let Some((api, config)) = fallback.take()
                {
                    warn!(
                        kind = %K::kind(&Default::default()), error = %e,
                        "the API server refuses streaming lists (WatchList off?); listing in pages instead"
                    );
                    inner = watcher(api, config).boxed();
                    continue;
                }
                return Some((item, (inner, fallback)));
            }
        },
    )
    .boxed()
}

/// A streaming list the server does not serve: the 422 kube-apiserver 1.37
/// answers with the WatchList gate off (tests/api/initial_list.rs). Any other
/// error is the watch's own, and the watcher retries it as it would a paged
/// LIST's.
fn refused(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 422)
}
