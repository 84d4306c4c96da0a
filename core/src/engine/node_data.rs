//! What a lock node holds: the [`crate::Identity`] of its owner, written in place.

use serde::{Deserialize, Serialize};

use super::Recipe;
use crate::owners::Owner;

/// Who a lock node belongs to, as recorded in its data (JSON) by zklock in any language.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Host name of the process.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// The owner's label (see [`Owner::with_label`]).
    pub owner: String,
    /// The language of the caller: `rust`, `c`, `python` or `node`.
    pub lang: String,
    /// The lock's identifier, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
}

impl Recipe {
    pub(crate) fn node_data(&self, owner: &Owner) -> Vec<u8> {
        let mut data = Vec::with_capacity(128);
        self.write_node_data(owner, &mut data);
        data
    }

    /// The length of [`Recipe::node_data`], with nothing allocated.
    pub(super) fn node_data_len(&self, owner: &Owner) -> usize {
        let mut counted = Counted(0);
        self.write_node_data(owner, &mut counted);
        counted.0
    }

    /// Writes the node's [`crate::Identity`], borrowing every field: many waiters begin at once,
    /// and the copies would only be freed again.
    fn write_node_data(&self, owner: &Owner, out: impl std::io::Write) {
        let host = &self.client.identity;
        let identity = IdentityOf {
            host: &host.host,
            pid: host.pid,
            owner: LabelOf(owner),
            lang: &host.language,
            identifier: self.identifier.as_deref(),
        };
        serde_json::to_writer(out, &identity).expect("identity serializes")
    }
}

/// [`crate::Identity`] as written, borrowed: the same fields under the same names (a test checks
/// that what it writes reads back as an `Identity`).
#[derive(serde::Serialize)]
struct IdentityOf<'a, O> {
    host: &'a str,
    pid: u32,
    owner: O,
    lang: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    identifier: Option<&'a str>,
}

/// An owner's label ([`Owner::label`]) as a JSON string, written in place.
struct LabelOf<'a>(&'a Owner);

impl serde::Serialize for LabelOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.label_display())
    }
}

/// A writer that only counts.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{IdentityOf, LabelOf};
    use crate::engine::Identity;
    use crate::owners::Owner;

    #[test]
    fn the_borrowed_identity_reads_back_as_an_identity() {
        let owners = [Owner::with_label(7, "thread:worker-3"), Owner::new(1 << 63)];
        for (owner, identifier) in owners.iter().zip([None, Some("billing \"nightly\" job")]) {
            let written = IdentityOf { host: "host-1", pid: 42, owner: LabelOf(owner), lang: "node", identifier };
            let read: Identity = serde_json::from_slice(&serde_json::to_vec(&written).unwrap()).unwrap();
            let expected = Identity {
                host: "host-1".to_owned(),
                pid: 42,
                owner: owner.label(),
                lang: "node".to_owned(),
                identifier: identifier.map(str::to_owned),
            };
            assert_eq!(read, expected);
            // Field for field, as the owned struct writes it (other clients parse these bytes).
            assert_eq!(serde_json::to_vec(&written).unwrap(), serde_json::to_vec(&expected).unwrap());
        }
    }
}
