//! zklock: placeholder
