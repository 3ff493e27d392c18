//! Tests of `mailbox`, in their own file beside it.

use super::*;

fn drain(rx: &mut MailboxReceiver<&'static str, (&'static str, u32)>) -> Vec<(&'static str, u32)> {
    std::iter::from_fn(|| rx.try_recv()).collect()
}

#[test]
fn over_capacity_the_latest_message_per_key_waits_and_is_counted() {
    let gauges = ChannelGauges::default();
    let (tx, mut rx) = mailbox(2, gauges.clone());
    for (key, n) in [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3)] {
        tx.send(key, (key, n));
    }
    assert_eq!(gauges.overflows.get(), 3);
    assert_eq!(gauges.peak.get(), 4, "2 queued + a and c waiting");
    // The queued ones first, then the newest of each key.
    assert_eq!(drain(&mut rx), [("a", 1), ("b", 1), ("a", 3), ("c", 1)]);
    assert_eq!(gauges.depth.get(), 0);
}

#[test]
fn while_messages_wait_a_freed_slot_does_not_overtake_them() {
    let (tx, mut rx) = mailbox(1, ChannelGauges::default());
    tx.send("a", ("a", 1));
    tx.send("a", ("a", 2)); // waits in the map
    assert_eq!(rx.try_recv(), Some(("a", 1)));
    tx.send("a", ("a", 3)); // the channel has room, the map is not empty
    assert_eq!(drain(&mut rx), [("a", 3)], "a=2 replaced, never after 3");
}

#[tokio::test]
async fn recv_returns_what_waits_then_none_when_the_senders_are_gone() {
    let (tx, mut rx) = mailbox(1, ChannelGauges::default());
    tx.send("a", ("a", 1));
    tx.send("b", ("b", 1));
    drop(tx);
    assert_eq!(rx.recv().await, Some(("a", 1)));
    assert_eq!(rx.recv().await, Some(("b", 1)));
    assert_eq!(rx.recv().await, None);
}

#[tokio::test]
async fn a_waiting_receiver_wakes_for_a_message() {
    let (tx, mut rx) = mailbox::<&str, u32>(4, ChannelGauges::default());
    let got = tokio::spawn(async move { rx.recv().await });
    tokio::task::yield_now().await;
    tx.send("a", 7);
    assert_eq!(got.await.ok().flatten(), Some(7));
}
