//! Node bindings: filled in by issue 6.
