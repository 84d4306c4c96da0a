//! The `acl=` argument of `Client.lock`, `Client.read_write_lock` and `Client.semaphore`: a
//! preset's name, or custom `(perms, scheme, id)` entries, as the core's `Acl`. The core checks
//! what it means.

use pyo3::prelude::*;
use pyo3::types::PyString;
use zklock::{Acl, AclEntry, Perms};

use crate::error::invalid_argument;

const USAGE: &str =
    "acl must be \"open\", \"creator_all_world_read\", \"creator_all\" or a list of (perms, scheme, id) \
     tuples with perms from zklock.PERM_*";

/// The core's ACL for `acl` (None: open), or `InvalidArgumentError` naming the lock path.
pub(crate) fn from_py(py: Python<'_>, path: &str, acl: Option<&Bound<'_, PyAny>>) -> PyResult<Acl> {
    let Some(acl) = acl.filter(|acl| !acl.is_none()) else { return Ok(Acl::Open) };
    if let Ok(name) = acl.cast::<PyString>() {
        return match name.extract::<String>()?.as_str() {
            "open" => Ok(Acl::Open),
            "creator_all_world_read" => Ok(Acl::CreatorAllWorldRead),
            "creator_all" => Ok(Acl::CreatorAll),
            other => Err(invalid_argument(py, path, format!("{USAGE}, not {other:?}"))),
        };
    }
    let Ok(items) = acl.try_iter() else {
        return Err(invalid_argument(py, path, format!("{USAGE}, not {}", acl.repr()?)));
    };
    let mut entries = Vec::new();
    for (i, item) in items.enumerate() {
        let item = item?;
        let Ok((perms, scheme, id)) = item.extract::<(u32, String, String)>() else {
            return Err(invalid_argument(py, path, format!("{USAGE}; entry {i} is {}", item.repr()?)));
        };
        let Some(perms) = Perms::from_bits(perms) else {
            return Err(invalid_argument(
                py,
                path,
                format!("acl entry {i} has perms {perms:#x}: only zklock.PERM_* bits"),
            ));
        };
        entries.push(AclEntry::new(perms, scheme, id));
    }
    Ok(Acl::Custom(entries))
}
