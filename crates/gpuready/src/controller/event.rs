//! An Event as the Events API keeps it: one constructor for every Event
//! gpuready posts, so the note's length limit is said once. A leaf module:
//! the watches and the writers both build Events, and neither imports the
//! other's floor for it.

use kube::runtime::events::{Event, EventType};

/// What the Events API keeps of a note (1 kB) and of a reason (128
/// characters): longer ones are cut here, in one place, so the API server
/// never refuses an Event for its length.
const NOTE_LIMIT: usize = 1000;
const REASON_LIMIT: usize = 128;

/// An Event about its object alone (no secondary object), its reason and
/// note cut to what the Events API keeps.
pub fn event(type_: EventType, reason: &str, action: &str, note: &str) -> Event {
    Event {
        type_,
        reason: reason.chars().take(REASON_LIMIT).collect(),
        note: Some(note.chars().take(NOTE_LIMIT).collect()),
        action: action.into(),
        secondary: None,
    }
}

/// `GpuNodeProfile <name>: ` before a node Event's note, when a profile
/// governs the node.
pub fn profile_prefix(profile: Option<&str>) -> String {
    profile
        .map(|p| format!("GpuNodeProfile {p}: "))
        .unwrap_or_default()
}
