//! The Rust examples of zklock's README and docs site: see the `[[example]]`s in Cargo.toml.
