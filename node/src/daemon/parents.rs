//! Candidate parents on the daemon's side (see
//! [`relaymesh_protocol::parents`]).
//!
//! At the root: sign the grant a multi-parent token makes, and sign it again
//! naming the parent the core found the node under. At a relay: decide
//! whether a node another candidate admitted may attach here. On the node:
//! adopt the candidate the uplink reached after the parent went silent,
//! and have it renew the certificate through its own issuer.

use relaymesh_protocol::{CandidateParent, Parents, Role};

use std::time::Duration;

use super::{now, Daemon, DaemonError};
use crate::config::ParentConfig;
use crate::pki;
use crate::transport::{join, uplink};
use relaymesh_core::Now;

/// What the uplink dials once the parent has been silent for `grace`, if
/// the node has candidate parents.
pub(super) fn failover(
    candidates: &[CandidateParent],
    grace: Duration,
) -> Option<uplink::Failover> {
    (!candidates.is_empty()).then(|| uplink::Failover {
        candidates: candidates.iter().map(join::parent_config).collect(),
        grace,
    })
}

impl Daemon {
    /// At the root: grants `node` the candidate parents `candidates`, or
    /// takes its grant back (a token with one parent replaces it).
    pub(super) fn grant_parents(
        &mut self,
        now: Now,
        node: &str,
        candidates: Option<Vec<CandidateParent>>,
    ) -> Result<(), String> {
        let key = Parents::key_for(node);
        let Some(candidates) = candidates else {
            if self.core.entry(&key).is_some() {
                tracing::info!(%node, "took back a node's candidate parents");
                self.core.remove_local(now, &key);
            }
            return Ok(());
        };
        let grant = Parents {
            node: node.to_string(),
            candidates,
            // Named again by the core as soon as the node shows up.
            current: None,
        };
        let entry = grant.to_entry().map_err(|error| error.to_string())?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| "the root cannot sign the grant".to_string())?;
        tracing::info!(%node, candidates = ?grant.candidates.iter().map(|c| &c.name).collect::<Vec<_>>(), "granted candidate parents");
        self.core.upsert_local(now, entry);
        Ok(())
    }

    /// At the root, after the keys of candidate parents changed (a
    /// rotation of the mesh CA: the root's new CA, relays' new issuer
    /// keys): every grant names its candidates' current keys, signed
    /// again, so a node renewed onto a new key fails over to them.
    pub(super) fn regrant_current_keys(&mut self, now: Now) {
        let identity = self.shared.identity.get();
        let Some(root_key) = identity
            .issuer
            .as_ref()
            .filter(|_| identity.is_root())
            .and_then(|issuer| pki::public_key_sha256(&issuer.cert_der).ok())
        else {
            return;
        };
        let grants: Vec<Parents> = self
            .core
            .entries_with_prefix(relaymesh_protocol::parents::KEY_PREFIX)
            .filter_map(Parents::from_entry)
            .filter_map(Result::ok)
            .collect();
        for grant in grants {
            let Some(grant) = with_current_keys(grant, |name| match name == identity.name {
                true => Some(root_key),
                false => self.store.issuer_key(name).ok().flatten(),
            }) else {
                continue;
            };
            if self.publish_signed(now, grant.to_entry()) {
                tracing::info!(node = %grant.node, "a candidate parent's key changed: granted its candidates again");
            }
        }
    }

    /// At the root: sign the grant naming the parent the node is under.
    pub(super) fn settle_parents(&mut self, now: Now, grant: Parents) {
        if self.publish_signed(now, grant.to_entry()) {
            tracing::info!(node = %grant.node, parent = ?grant.current, "named a node's parent in its grant");
        }
    }

    /// Whether `node` (an agent or a relay presenting `chain`, leaf first) may have
    /// this relay as parent without having been admitted here: the root
    /// granted it this relay among its candidates, and its certificate was
    /// signed by another one's issuer key, as the root recorded it.
    pub(super) fn may_attach(
        &self,
        node: &str,
        role: Role,
        chain: &[Vec<u8>],
    ) -> Result<(), String> {
        let identity = self.shared.identity.get();
        let signer = pki::chain_signer_key(chain, &identity.anchors());
        let path = pki::chain_issuer_path(chain, &identity.anchors());
        attach_decision(
            self.core.grant(node).as_ref(),
            self.core.name(),
            node,
            role,
            signer,
        )
        .map_err(|why| format!("{why} (issued through the issuers named {path:?})"))
    }

    /// At start: a node that re-parented and stopped before its new parent
    /// renewed its certificate asks for that renewal again (its
    /// certificate still comes from the old parent's issuer).
    pub(super) fn rehome_if_needed(&mut self) {
        let Some(parent) = self.shared.config.parent.as_ref() else {
            return;
        };
        let Some(candidate) = self.candidate(&parent.name) else {
            return;
        };
        let identity = self.shared.identity.get();
        let signer = pki::chain_signer_key(&identity.tls_chain_der, &identity.anchors());
        if signer.as_ref().ok() != Some(&candidate.issuer_key) {
            let issued = pki::chain_issuer_path(&identity.tls_chain_der, &identity.anchors());
            tracing::info!(parent = %parent.name, ?issued, "this node's certificate is not its parent's yet: asking it to renew");
            self.renewal.rehome(&candidate, self.core.renewal(), now());
        }
    }

    /// This node's candidate parent `name`, if it is one.
    fn candidate(&self, name: &str) -> Option<CandidateParent> {
        self.candidates
            .iter()
            .find(|candidate| candidate.name == name)
            .cloned()
    }

    /// This node moved on the root's order: its new parent is its only one
    /// from now on (the root took its grant back when it ordered the move).
    pub(super) fn drop_candidates(&mut self) -> Result<(), DaemonError> {
        if self.candidates.is_empty() {
            return Ok(());
        }
        self.store.set_candidates(&[])?;
        self.candidates.clear();
        self.renewal.set_candidates(Vec::new());
        if let Some(failover) = &self.failover {
            failover.send_replace(None);
        }
        tracing::info!("moved: the new parent is this node's only parent now");
        Ok(())
    }

    /// The uplink connected to `parent`: if that is another candidate than
    /// the configured parent (the parent was silent for longer than the
    /// grace period), adopt it: stored, dialed from now on, told to the core,
    /// and asked to renew this node's certificate through its issuer.
    pub(super) fn fail_over_if_elsewhere(
        &mut self,
        now: Now,
        parent: &ParentConfig,
    ) -> Result<(), DaemonError> {
        let configured = self.shared.config.parent.as_ref().map(|p| p.name.as_str());
        if configured == Some(parent.name.as_str()) {
            return Ok(());
        }
        let Some(candidate) = self.candidate(&parent.name) else {
            tracing::error!(parent = %parent.name, "the uplink reached a relay that is no candidate parent");
            return Ok(());
        };
        let Some(mut config) = self.store.config()? else {
            return Ok(());
        };
        config.parent = Some(parent.clone());
        self.store.set_config(&config)?;
        self.shared.make_mut().config = std::sync::Arc::new(config);
        if let Some(dial) = &self.parent_config {
            dial.send_replace(parent.clone());
        }
        self.core.fail_over(now, &parent.name);
        self.renewal.rehome(&candidate, self.core.renewal(), now);
        tracing::warn!(parent = %parent.name, "re-parented to a candidate parent");
        Ok(())
    }
}

/// Whether `node` in `role`, whose certificate was signed by the issuer key
/// `signer` (the hash of its SubjectPublicKeyInfo, see
/// [`pki::chain_signer_key`]), may have relay `here` as parent under
/// `grant`; why not, if not. Keys, never names: a relay above a candidate
/// can make an issuer certificate in the candidate's name, not with its key.
fn attach_decision(
    grant: Option<&Parents>,
    here: &str,
    node: &str,
    role: Role,
    signer: Result<[u8; 32], String>,
) -> Result<(), String> {
    let Some(grant) = grant else {
        return Err(format!(
            "{role} {node:?} was not admitted by this relay and the root granted it no candidate parents"
        ));
    };
    if !grant.allows(here) {
        return Err(format!(
            "the root did not grant {role} {node:?} this relay ({here:?}) as a parent"
        ));
    }
    let signer = signer?;
    let issued_by_candidate = grant
        .candidates
        .iter()
        .any(|candidate| candidate.name != here && candidate.issuer_key == signer);
    if !issued_by_candidate {
        return Err(format!(
            "issuer key mismatch: {role} {node:?}'s certificate was signed by none of its candidate parents' issuer keys as the root recorded them"
        ));
    }
    Ok(())
}

/// `grant` naming each candidate by its key now (`key_of`, `None` if not
/// known), if one changed.
fn with_current_keys(
    mut grant: Parents,
    key_of: impl Fn(&str) -> Option<[u8; 32]>,
) -> Option<Parents> {
    let mut changed = false;
    for candidate in &mut grant.candidates {
        if let Some(key) = key_of(&candidate.name).filter(|key| *key != candidate.issuer_key) {
            candidate.issuer_key = key;
            changed = true;
        }
    }
    changed.then_some(grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_names_its_candidates_current_keys() {
        let rotated = |name: &str| pki::sha256(format!("new {name}").as_bytes());
        assert!(with_current_keys(grant(), |name| Some(key(name))).is_none());
        assert!(with_current_keys(grant(), |_| None).is_none());
        let again = with_current_keys(grant(), |name| match name {
            "us" => Some(rotated(name)),
            _ => None,
        })
        .expect("us has a new key");
        let keys: Vec<_> = again
            .candidates
            .iter()
            .map(|candidate| (candidate.name.as_str(), candidate.issuer_key))
            .collect();
        assert_eq!(keys, [("eu-west", key("eu-west")), ("us", rotated("us"))]);
        assert_eq!(again.current, grant().current);
    }

    fn grant() -> Parents {
        let candidate = |name: &str, issuers: &[&str]| CandidateParent {
            name: name.into(),
            addresses: Vec::new(),
            issuers: issuers.iter().map(|issuer| issuer.to_string()).collect(),
            issuer_key: key(name),
        };
        Parents {
            node: "edge".into(),
            candidates: vec![candidate("eu-west", &["eu"]), candidate("us", &[])],
            current: Some("eu-west".into()),
        }
    }

    /// A stand-in for the issuer key of relay `name`.
    fn key(name: &str) -> [u8; 32] {
        pki::sha256(name.as_bytes())
    }

    fn signed_by(relay: &str) -> Result<[u8; 32], String> {
        Ok(key(relay))
    }

    #[test]
    fn a_candidate_serves_a_node_another_candidate_admitted() {
        let grant = grant();
        let decide = |here: &str, role: Role, issued: Result<[u8; 32], String>| {
            attach_decision(Some(&grant), here, "edge", role, issued)
        };
        assert_eq!(decide("us", Role::Agent, signed_by("eu-west")), Ok(()));
        assert_eq!(decide("eu-west", Role::Agent, signed_by("us")), Ok(()));
        // A relay with candidate parents too.
        assert_eq!(decide("us", Role::Relay, signed_by("eu-west")), Ok(()));
        for (here, role, issued, why) in [
            ("ap", Role::Agent, signed_by("eu-west"), "did not grant"),
            // Minted by a relay that is no candidate, or by one above a
            // candidate with an issuer it made in the candidate's name.
            (
                "us",
                Role::Agent,
                signed_by("mallory"),
                "issuer key mismatch",
            ),
            ("us", Role::Agent, signed_by("eu"), "issuer key mismatch"),
            ("us", Role::Agent, signed_by("us"), "issuer key mismatch"),
            (
                "us",
                Role::Agent,
                Err("the chain does not lead to the mesh CA".into()),
                "mesh CA",
            ),
        ] {
            let refused = decide(here, role, issued).expect_err("refused");
            assert!(refused.contains(why), "{here} {role}: {refused}");
        }
        let none = attach_decision(None, "us", "edge", Role::Agent, signed_by("eu-west"));
        assert!(none.expect_err("refused").contains("no candidate parents"));
    }
}
