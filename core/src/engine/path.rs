//! The lock path itself: made when missing (a container, or persistent with the lock's ACL), its
//! ACL checked before a protected lock queues under it, and the recipe a path already holds.

use std::sync::atomic::Ordering;

use zookeeper_client as zk;

use super::listing::{list, Listing};
use super::{Failed, Recipe};
use crate::error::{printable, Error, ErrorKind};
use crate::mode::Mode;
use crate::retry::{Reply, Requests};

pub(super) const CONTAINER: zk::CreateOptions<'static> = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());

/// Which incarnation of a lock path, with which ACL: its creation zxid and ACL version, from the
/// stat of a listing or of a getACL.
pub(super) type PathVersion = (i64, i32);

pub(super) fn path_version(stat: &zk::Stat) -> PathVersion {
    (stat.czxid, stat.aversion)
}

impl Recipe {
    /// Before this lock object's first create: refuses a path holding another recipe's nodes, so
    /// that a conflict is told before any node is made (and a protected lock checks an existing
    /// path's ACL before it creates anything).
    pub(super) async fn check_kinds(&self, mode: Mode, requests: &Requests<'_>) -> std::result::Result<(), Failed> {
        match requests.retry(|| list(requests.zk(), &self.path, self.protected())).await? {
            Ok(listing) => {
                Box::pin(self.check_path_acl(requests, listing.path)).await?;
                match self.conflict(mode, &listing) {
                    Some(err) => Err(Failed::Error(err)),
                    None => {
                        self.kinds_checked.store(true, Ordering::Release);
                        Ok(())
                    }
                }
            }
            Err(zk::Error::NoNode) => Ok(()),
            Err(err) => Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
        }
    }

    /// A child of another recipe in the listing, which a lock of `mode` must not share a path
    /// with.
    pub(super) fn conflict(&self, mode: Mode, listing: &Listing) -> Option<Error> {
        if listing.recipe.fits(mode) {
            return None;
        }
        let names = &listing.names;
        // Names as the server has them, escaped: another client chose them.
        if let Some(name) = names.iter().find(|name| crate::policy::marks_a_semaphore(name)) {
            let name = printable(name);
            let message = format!(
                "a lock cannot use this path: it is a semaphore's (it holds {name}); the lock would ignore the \
                 semaphore's rules, so use another path"
            );
            return Some(Error::recipe_conflict(message).with_path(&self.path));
        }
        let name = names.iter().find(|name| !mode.shares_path_with(name)).expect("a node of the other recipe");
        let other = Mode::of_node(name).expect("a node of no known lock shares any path");
        let name = printable(name);
        let (ours, theirs) = match mode {
            Mode::Exclusive => ("a mutex", "read/write lock"),
            _ => ("a read/write lock", "mutex"),
        };
        let message = format!(
            "{ours} cannot use this path: it holds {theirs} nodes ({other} node {name}); the two recipes would \
             ignore each other's rules, so use another path"
        );
        Some(Error::recipe_conflict(message).with_path(&self.path))
    }

    /// Creates the lock path and its missing ancestors as containers, which the server removes
    /// once they are empty again. A protected lock's path is persistent instead, with the lock's
    /// ACL: a container would go whenever the queue is empty, and anyone could make it again,
    /// open. Its ancestors stay open containers.
    pub(super) async fn make_parents(&self, requests: &Requests<'_>) -> std::result::Result<(), Failed> {
        let zk = requests.zk();
        if !self.protected() {
            return match requests.send(zk.mkdir(&self.path, &CONTAINER)).await? {
                Reply::Answered(Err(err)) => Err(Failed::Error(self.zk_error(err, "creating the lock path"))),
                _ => Ok(()),
            };
        }
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&self.zk_acl));
        let parent = &self.path[..self.path.rfind('/').unwrap_or_default()];
        // Twice at most: once more after making the parents. (The attempt's loop comes back here
        // if the parents are gone again.)
        for _ in 0..2 {
            match requests.send(zk.create(&self.path, &[], &options)).await? {
                Reply::Answered(Ok((stat, _))) => {
                    // Made by us with the lock's ACL: nothing to check.
                    *self.acl_checked.lock() = Some(path_version(&stat));
                    return Ok(());
                }
                // Someone else's (or ours, after a lost reply): its ACL is checked at the listing.
                Reply::Answered(Err(zk::Error::NodeExists)) | Reply::Reconnected => return Ok(()),
                Reply::Answered(Err(zk::Error::NoNode)) if !parent.is_empty() => match self.parent.get() {
                    // A protected semaphore's path, as its parts: an open container there would let
                    // anyone delete and make again an empty mutex or lease parent.
                    Some(semaphore) => Box::pin(semaphore.make_parents(requests)).await?,
                    None => {
                        if let Reply::Answered(Err(err)) = requests.send(zk.mkdir(parent, &CONTAINER)).await? {
                            return Err(Failed::Error(self.zk_error(err, "creating the lock path's parents")));
                        }
                    }
                },
                Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "creating the lock path"))),
            }
        }
        Ok(())
    }

    /// Who the server knows this session as (whoAmI, asked once per session): the identities
    /// an `auth:` entry became, x509 and shortened principals included. A server older than
    /// 3.7 cannot tell: then what the options say.
    async fn identities(&self, requests: &Requests<'_>) -> std::result::Result<crate::acl::Identities, Failed> {
        if let Some(identities) = requests.session.identities.get() {
            return Ok(identities.clone());
        }
        let identities = match requests.retry(|| requests.zk().list_auth_users()).await? {
            Ok(users) => self
                .client
                .identities
                .with_reported(users.iter().map(|user| (user.scheme().to_owned(), user.user().to_owned()))),
            Err(_) => self.client.identities.clone(),
        };
        Ok(requests.session.identities.get_or_init(|| async { identities }).await.clone())
    }

    /// Whether [`Recipe::check_path_acl`] has anything to do for this listing: a caller skips
    /// it (and the box its future would take) in the common case, an unprotected lock or a path
    /// checked already.
    pub(super) fn path_acl_to_check(&self, listed: Option<PathVersion>) -> bool {
        self.protected() && listed.is_some() && listed != *self.acl_checked.lock()
    }

    /// For a protected lock: refuses to go on under a lock path whose ACL grants others more
    /// than the lock's ACL (made open by someone else, or by a zklock without an ACL, say), as
    /// its nodes would not be protected. `listed` is the path's version at the listing; its
    /// ACL is read only when that is not the version already checked.
    pub(super) async fn check_path_acl(
        &self,
        requests: &Requests<'_>,
        listed: Option<PathVersion>,
    ) -> std::result::Result<(), Failed> {
        if !self.path_acl_to_check(listed) {
            return Ok(());
        }
        let (acl, stat) = match requests.retry(|| requests.zk().get_acl(&self.path)).await? {
            Ok(found) => found,
            // Gone since the listing: the next listing says what is there now.
            Err(zk::Error::NoNode) => return Ok(()),
            Err(err) => return Err(Failed::Error(self.zk_error(err, "reading the lock path's ACL"))),
        };
        let identities = &self.identities(requests).await?;
        let unverifiable = self.acl.unverifiable(&acl, identities);
        if !unverifiable.is_empty() {
            let unverifiable: Vec<String> = unverifiable.iter().map(ToString::to_string).collect();
            return Err(Failed::Error(self.error(
                ErrorKind::PermissionDenied,
                format!(
                    "the lock path's ACL has digest entries whose hashes the server hides from this client ({}), \
                     as it does from a client without ADMIN on the path: ZooKeeper reserves no digest user name, so \
                     they may be someone else's with the same user name, and lock nodes under the path would not be \
                     known to be protected. Give this client's own entry ADMIN (ALL, as CreatorAll does), or use \
                     another path",
                    unverifiable.join(", ")
                ),
            )));
        }
        if let Some(missing) = crate::acl::missing_rights(&acl, identities) {
            return Err(Failed::Error(self.error(
                ErrorKind::PermissionDenied,
                format!(
                    "the lock path's ACL ({}) does not grant this client ({identities}) {missing}, which a \
                     contender needs: connect with digest auth or SASL as a user the ACL names, or use another path",
                    crate::acl::describe(&acl)
                ),
            )));
        }
        let excess = self.acl.excess(&acl, identities);
        if excess.is_empty() {
            *self.acl_checked.lock() = Some(path_version(&stat));
            return Ok(());
        }
        let excess = self.acl.describe_excess(&excess, identities);
        Err(Failed::Error(self.error(
            ErrorKind::PermissionDenied,
            format!(
                "the lock path's ACL grants more than this lock's ACL ({}) allows: {}; lock nodes under it would \
                 not be protected (anyone it grants could delete a holder's node or queue). Use another path, or \
                 delete this one while it is empty, or set its ACL to the lock's",
                self.acl, excess
            ),
        )))
    }
}
