//! Event reasons on Nodes and GpuNodeProfiles (the NFD CRD ones are in
//! [`nfd_crd_event_reasons`](super::nfd_crd_event_reasons)).

/// Node: `GpuReady` turned True.
pub const GPU_READY: &str = "GpuReady";
/// Node: `GpuReady` turned False; the verdict's reason is appended.
pub const GPU_NOT_READY_PREFIX: &str = "GpuNotReady";
/// Profile: `Ready` turned True.
pub const PROFILE_READY: &str = "ProfileReady";
/// Profile: `Ready` turned False.
pub const PROFILE_NOT_READY: &str = "ProfileNotReady";
/// Profile: the safety brake engaged.
pub const SAFETY_BRAKE_ENGAGED: &str = "SafetyBrakeEngaged";
/// Profile: the safety brake released.
pub const SAFETY_BRAKE_RELEASED: &str = "SafetyBrakeReleased";
/// Profile: escalations to `NoExecute` started to be held back (the
/// safety brake, or the `NoExecute` budget).
pub const NO_EXECUTE_HELD: &str = "NoExecuteHeld";
/// Node: gpuready wrote a DeviceTaintRule for one of its devices.
pub const DEVICE_TAINTED: &str = "DeviceTainted";
/// Node: gpuready deleted its DeviceTaintRule of a device (recovered, or
/// no longer gated by a profile).
pub const DEVICE_TAINT_REMOVED: &str = "DeviceTaintRemoved";
/// Node: the API server refused gpuready's write to it (the reason is in
/// the note).
pub const WRITE_REFUSED: &str = "WriteRefused";
/// Profile: a burst spent the profile's per-node Event budget; the note
/// counts the node Events not posted, by reason.
pub const NODE_EVENTS_HELD: &str = "NodeEventsHeld";
