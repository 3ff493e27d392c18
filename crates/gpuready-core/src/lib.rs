//! Pure readiness engine.
