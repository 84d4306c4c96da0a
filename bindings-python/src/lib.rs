//! Python bindings: filled in by issue 5.
