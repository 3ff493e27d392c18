//! Real control plane for tests.
