//! Tests of `ledger`, in their own file beside it.

use super::*;
use futures::StreamExt;
use gpuready_core::plan::ConditionChange;
use gpuready_core::{GovernanceKind, NodeChanges};

const CFG: BrakeConfig = BrakeConfig {
    threshold: 0.5,
    window_seconds: 300,
    min_nodes: 3,
};

async fn take(s: &mut (impl Stream<Item = ObjectRef<CachedNode>> + Unpin)) -> Option<String> {
    tokio::time::timeout(Duration::from_millis(50), s.next())
        .await
        .ok()
        .flatten()
        .map(|r| r.name)
}

#[tokio::test]
async fn a_deferred_node_goes_back_to_kube_when_the_last_taint_work_finishes() {
    let ledger = Arc::new(Ledger::new(CFG, 8));
    let mut kube = Box::pin(ledger.clone().stream());
    ledger.ask("a", None);
    ledger.ask("b", None);
    assert_eq!(take(&mut kube).await.as_deref(), Some("a"));
    assert_eq!(take(&mut kube).await.as_deref(), Some("b"));
    let cond_only = NodeChanges {
        conditions: Some(ConditionChange {
            set: vec![],
            remove: vec!["GpuReadyDriver".into()],
        }),
        ..NodeChanges::default()
    };
    {
        let _a = ledger.start("a");
        let plan = PlannedWrite {
            node: "a",
            profile: Some("p"),
            changes: &cond_only,
            governance: GovernanceKind::Governed,
        };
        let s = ledger.step(plan, CrdView::Confirmed, Timestamp::now());
        assert_eq!(s, WriteStep::Defer, "b is still queued");
    }
    assert_eq!(ledger.deferred(), 1);
    assert_eq!(take(&mut kube).await, None);
    {
        let _b = ledger.start("b");
    }
    assert_eq!(take(&mut kube).await.as_deref(), Some("a"), "woken");
    assert_eq!(ledger.deferred(), 0);
}
