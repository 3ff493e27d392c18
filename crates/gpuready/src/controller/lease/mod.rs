//! Who may write: leader election on a Lease, and the write fence every
//! request passes, closed once the lease is not renewed in time.

pub mod fence;
pub mod leader;
