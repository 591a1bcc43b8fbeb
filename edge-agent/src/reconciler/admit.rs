//! What must hold before one object of a pass is written: it was
//! customized for this cluster, the agent's policy allows its category and
//! the namespace it lands in, that namespace exists (relaymesh creates it,
//! and records that it did, when the bundles do not carry it), and, if the
//! object exists already, it is the agent's own, or the placement asks to
//! adopt it and the policy allows adoption where it lands (see
//! [`crate::policy`]). A refused object is left alone and reported, and the
//! pass goes on with the rest.

use std::collections::{BTreeMap, BTreeSet};

use super::error::ReconcileError;
use super::state::Reconciler;
use crate::applier::ApplyError;
use crate::manifest::{Manifest, ObjectRef};
use crate::policy::{self, Refusal, Takeover};

/// Why an object of a pass is not written.
pub(super) struct Skipped {
    /// What the placement's status says of it.
    pub(super) reason: String,
    /// The policy (or the object's customization) refused it: another try
    /// would refuse it again, so it makes the pass no retry, and it is not
    /// the agent's to watch for drift.
    pub(super) refused: bool,
}

impl Skipped {
    fn refused(reason: String) -> Self {
        Self {
            reason,
            refused: true,
        }
    }

    fn failed(reason: String) -> Self {
        Self {
            reason,
            refused: false,
        }
    }
}

/// The checks before writing the objects of one pass, with what they know
/// of the whole pass.
pub(super) struct Admission<'a> {
    /// Why some objects could not be customized for this cluster.
    not_customized: &'a BTreeMap<ObjectRef, String>,
    /// The namespaces the bundles carry: applied with them, not created.
    bundled_namespaces: BTreeSet<&'a str>,
    /// The namespaces made sure of so far, so each costs one request.
    checked_namespaces: BTreeSet<String>,
    /// The ApplySets of this agent's placements: a live object labelled
    /// with one of them is the agent's own.
    applysets: BTreeSet<String>,
    /// The placement asks to adopt existing objects.
    adopt: bool,
}

impl<'a> Admission<'a> {
    /// The checks for a pass writing `manifests`, `not_customized` saying
    /// which could not be customized, for a placement that asks to `adopt`
    /// existing objects or not. Read after the placement's own record is
    /// written, so its ApplySet counts among the agent's.
    pub(super) fn new(
        reconciler: &Reconciler,
        manifests: &'a BTreeMap<ObjectRef, Manifest>,
        not_customized: &'a BTreeMap<ObjectRef, String>,
        adopt: bool,
    ) -> Result<Self, ReconcileError> {
        let bundled_namespaces = manifests
            .keys()
            .filter(|object| object.group.is_empty() && object.kind == "Namespace")
            .map(|object| object.name.as_str())
            .collect();
        let applysets = reconciler
            .inventory
            .placements()?
            .into_values()
            .map(|record| record.applyset_id)
            .collect();
        Ok(Self {
            not_customized,
            bundled_namespaces,
            checked_namespaces: BTreeSet::new(),
            applysets,
            adopt,
        })
    }

    /// Whether `manifest` may be written now; creates its namespace if
    /// the bundles do not carry it and it is missing.
    pub(super) async fn admit(
        &mut self,
        reconciler: &mut Reconciler,
        manifest: &Manifest,
    ) -> Result<Result<(), Skipped>, ReconcileError> {
        let reference = &manifest.reference;
        if let Some(error) = self.not_customized.get(reference) {
            // Never applied half-customized: the cluster reports why
            // (a label it lacks), and what it runs stays as it was.
            return Ok(Err(Skipped::refused(format!("customization: {error}"))));
        }
        let namespace = match check_policy(reconciler, manifest).await {
            Ok(Ok(namespace)) => namespace,
            Ok(Err(refusal)) => return Ok(Err(Skipped::refused(refusal.to_string()))),
            Err(error) => {
                tracing::warn!(object = %reference, %error, "cannot tell where the object lands");
                return Ok(Err(Skipped::failed(error.to_string())));
            }
        };
        if let Some(namespace) = &reference.namespace {
            if !self.bundled_namespaces.contains(namespace.as_str())
                && self.checked_namespaces.insert(namespace.clone())
            {
                if let Err(error) = ensure_namespace(reconciler, namespace).await? {
                    return Ok(Err(Skipped::failed(format!(
                        "namespace {namespace}: {error}"
                    ))));
                }
            }
        }
        if manifest.create_only {
            // A create-only object that exists is left as it is anyway.
            return Ok(Ok(()));
        }
        let landing = Landing {
            namespace: namespace.as_deref(),
            applysets: &self.applysets,
        };
        match check_takeover(reconciler, manifest, landing, self.adopt).await? {
            Ok(()) => Ok(Ok(())),
            Err(Blocked::Refused(refusal)) => Ok(Err(Skipped {
                reason: refusal.to_string(),
                // The object may go away (retried); the policy stays.
                refused: matches!(refusal, Refusal::Category { .. }),
            })),
            Err(Blocked::Failed(error)) => Ok(Err(Skipped::failed(error.to_string()))),
        }
    }
}

/// Creates `namespace` if it is missing, recording that relaymesh did.
async fn ensure_namespace(
    reconciler: &mut Reconciler,
    namespace: &str,
) -> Result<Result<(), ApplyError>, ReconcileError> {
    match reconciler.applier.ensure_namespace(namespace).await {
        Ok(true) => {
            let mut created = reconciler.inventory.created_namespaces()?;
            created.insert(namespace.to_string());
            reconciler
                .inventory
                .set_created_namespaces(&created)
                .await?;
            Ok(Ok(()))
        }
        Ok(false) => Ok(Ok(())),
        Err(error) => Ok(Err(error)),
    }
}

/// Whether the agent's policy lets it write `manifest`, judged on its body
/// and on the namespace it lands in (for a namespaced kind written without
/// one, the client's default namespace), which it returns (`None` for a
/// cluster-scoped object). The category alone decides first, so a refused
/// kind costs no discovery.
async fn check_policy(
    reconciler: &mut Reconciler,
    manifest: &Manifest,
) -> Result<Result<Option<String>, Refusal>, ApplyError> {
    let reference = &manifest.reference;
    let mut namespace = reference.namespace.clone();
    let mut verdict = reconciler
        .policy
        .check(reference, &manifest.body, namespace.as_deref());
    if verdict.is_ok() && namespace.is_none() {
        namespace = reconciler.applier.namespace_of(reference).await?;
        verdict = reconciler
            .policy
            .check(reference, &manifest.body, namespace.as_deref());
    }
    if let Err(refusal) = &verdict {
        let category = match refusal {
            Refusal::Category { category } => category.name(),
            _ => "",
        };
        tracing::warn!(object = %reference, category, reason = %refusal, "refused by the apply policy");
    }
    Ok(verdict.map(|()| namespace))
}

/// Why an object was not written.
enum Blocked {
    /// The policy or the adoption rule refused it.
    Refused(Refusal),
    /// The live object could not be read.
    Failed(ApplyError),
}

/// Where an object lands, for the takeover check.
#[derive(Clone, Copy)]
struct Landing<'a> {
    /// Its namespace (`None` for a cluster-scoped object).
    namespace: Option<&'a str>,
    /// The ApplySets of this agent's placements: a live object labelled
    /// with one of them is the agent's own.
    applysets: &'a BTreeSet<String>,
}

/// Whether the agent may write over the live object of `manifest`: it does
/// not exist, it is the agent's own, or the placement asks to `adopt` it
/// and the policy allows adoption where it lands (then it is recorded as
/// adopted before it is touched).
async fn check_takeover(
    reconciler: &mut Reconciler,
    manifest: &Manifest,
    landing: Landing<'_>,
    adopt: bool,
) -> Result<Result<(), Blocked>, ReconcileError> {
    let reference = &manifest.reference;
    let live = match reconciler.applier.get(reference).await {
        Ok(live) => live,
        Err(error) => {
            tracing::warn!(object = %reference, %error, "cannot read the live object");
            return Ok(Err(Blocked::Failed(error)));
        }
    };
    let ownership = live
        .as_ref()
        .map(|live| policy::ownership(live.metadata.labels.as_ref(), landing.applysets));
    match reconciler
        .policy
        .check_takeover(reference, landing.namespace, ownership, adopt)
    {
        Ok(Takeover::Update) => Ok(Ok(())),
        Ok(Takeover::Create) => {
            // Adopted once, gone since: what the agent creates now is its own.
            let mut adopted = reconciler.inventory.adopted()?;
            if adopted.remove(reference) {
                reconciler.inventory.set_adopted(&adopted).await?;
            }
            Ok(Ok(()))
        }
        Ok(Takeover::Adopt) => {
            let mut adopted = reconciler.inventory.adopted()?;
            if adopted.insert(reference.clone()) {
                reconciler.inventory.set_adopted(&adopted).await?;
                tracing::info!(object = %reference, "adopting an existing object (spec.adopt: true); it will be released, not deleted, when it leaves");
            }
            Ok(Ok(()))
        }
        Err(refusal) => {
            tracing::warn!(object = %reference, reason = %refusal, "refused to take over an object relaymesh did not create");
            Ok(Err(Blocked::Refused(refusal)))
        }
    }
}
