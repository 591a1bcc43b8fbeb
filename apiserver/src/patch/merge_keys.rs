//! The schema table of built-in list merge strategies.
//!
//! Kubernetes reads a list's patch strategy (`patchStrategy`,
//! `patchMergeKey`, `listType`, `listMapKeys`) from the Go struct tags of the
//! built-in types. We do not carry the OpenAPI schema; instead this module
//! keeps a small table of the named types that matter to `kubectl apply`
//! (`ObjectMeta`, `PodSpec`, `Container`, the workload specs that hold a pod
//! template, `ServiceSpec`) and of how one type's fields lead to another.
//! Walking it from a kind's root finds `containers` under any workload's pod
//! template: `spec.template.spec.containers` for a Deployment,
//! `spec.jobTemplate.spec.template.spec.containers` for a CronJob.
//!
//! Lists the table does not know are atomic: a patch or an apply replaces
//! them whole. Kinds that are not built in (custom resources) only get the
//! `ObjectMeta` entries.

/// What kind of node a position in an object is, as far as the table knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schema {
    /// The object itself, of the given kind.
    Root(RootKind),
    /// `ObjectMeta`, wherever it appears (objects, pod and job templates).
    ObjectMeta,
    /// The `spec` of Deployment, ReplicaSet, DaemonSet, StatefulSet,
    /// ReplicationController and Job: reaches a pod template at `template`.
    WorkloadSpec,
    /// A `PodTemplateSpec`: `metadata` and a `PodSpec`.
    PodTemplate,
    /// CronJob's `spec`: reaches a job template at `jobTemplate`.
    CronJobSpec,
    /// A `JobTemplateSpec`: `metadata` and a job spec.
    JobTemplate,
    /// `PodSpec`.
    PodSpec,
    /// `Container` (also init and ephemeral containers).
    Container,
    /// `ServiceSpec`.
    ServiceSpec,
    /// The `status` of any built-in kind: only `conditions` is keyed.
    Status,
    /// Anything else: maps merge, lists are atomic.
    Unknown,
}

/// The kinds whose roots the table distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RootKind {
    /// `Pod`: `spec` is a `PodSpec`.
    Pod,
    /// `PodTemplate`: `template` is a `PodTemplateSpec`.
    PodTemplate,
    /// A workload whose `spec.template` is a pod template.
    Workload,
    /// `CronJob`.
    CronJob,
    /// `Service`.
    Service,
    /// Another built-in kind: `metadata` and `status` only.
    OtherBuiltin,
    /// A custom resource: `metadata` only.
    Custom,
}

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Replaced whole (the default; Kubernetes `atomic`).
    Atomic,
    /// A set of primitives: union on merge (`patchStrategy: merge` on a list
    /// of scalars, `listType: set`), e.g. `finalizers`.
    Set,
    /// A list of maps merged element-wise. `keys[0]` is the strategic merge
    /// patch `patchMergeKey`; all of `keys` are the server-side apply
    /// `listMapKeys` (e.g. `containerPort` and `protocol`).
    Keyed {
        /// The key fields, the strategic merge key first.
        keys: &'static [&'static str],
    },
}

impl Schema {
    /// The root schema of an object of `kind`.
    pub(crate) fn root(kind: &str, builtin: bool) -> Schema {
        let root = match (builtin, kind) {
            (false, _) => RootKind::Custom,
            (true, "Pod") => RootKind::Pod,
            (true, "PodTemplate") => RootKind::PodTemplate,
            (
                true,
                "Deployment"
                | "ReplicaSet"
                | "DaemonSet"
                | "StatefulSet"
                | "ReplicationController"
                | "Job",
            ) => RootKind::Workload,
            (true, "CronJob") => RootKind::CronJob,
            (true, "Service") => RootKind::Service,
            (true, _) => RootKind::OtherBuiltin,
        };
        Schema::Root(root)
    }

    /// The schema of the map-valued field `field` of this node (or of the
    /// elements of the list `field`).
    pub(crate) fn child(self, field: &str) -> Schema {
        use RootKind as R;
        match (self, field) {
            (Schema::Root(_), "metadata")
            | (Schema::PodTemplate | Schema::JobTemplate, "metadata") => Schema::ObjectMeta,
            (Schema::Root(R::Pod), "spec") => Schema::PodSpec,
            (Schema::Root(R::PodTemplate), "template") => Schema::PodTemplate,
            (Schema::Root(R::Workload), "spec") => Schema::WorkloadSpec,
            (Schema::Root(R::CronJob), "spec") => Schema::CronJobSpec,
            (Schema::Root(R::Service), "spec") => Schema::ServiceSpec,
            (Schema::Root(R::Custom), _) => Schema::Unknown,
            (Schema::Root(_), "status") => Schema::Status,
            (Schema::WorkloadSpec, "template") => Schema::PodTemplate,
            (Schema::CronJobSpec, "jobTemplate") => Schema::JobTemplate,
            (Schema::JobTemplate, "spec") => Schema::WorkloadSpec,
            (Schema::PodTemplate, "spec") => Schema::PodSpec,
            (Schema::PodSpec, "containers" | "initContainers" | "ephemeralContainers") => {
                Schema::Container
            }
            _ => Schema::Unknown,
        }
    }

    /// How the list-valued field `field` of this node merges.
    pub(crate) fn list_strategy(self, field: &str) -> ListStrategy {
        const NAME: &[&str] = &["name"];
        let keyed = |keys| ListStrategy::Keyed { keys };
        match (self, field) {
            (Schema::ObjectMeta, "finalizers") => ListStrategy::Set,
            (Schema::ObjectMeta, "ownerReferences") => keyed(&["uid"]),
            (
                Schema::PodSpec,
                "containers"
                | "initContainers"
                | "ephemeralContainers"
                | "volumes"
                | "imagePullSecrets"
                | "resourceClaims"
                | "schedulingGates",
            ) => keyed(NAME),
            (Schema::PodSpec, "hostAliases") => keyed(&["ip"]),
            (Schema::PodSpec, "topologySpreadConstraints") => {
                keyed(&["topologyKey", "whenUnsatisfiable"])
            }
            (Schema::Container, "env") => keyed(NAME),
            (Schema::Container, "ports") => keyed(&["containerPort", "protocol"]),
            (Schema::Container, "volumeMounts") => keyed(&["mountPath"]),
            (Schema::Container, "volumeDevices") => keyed(&["devicePath"]),
            (Schema::ServiceSpec, "ports") => keyed(&["port", "protocol"]),
            (Schema::Status, "conditions") => keyed(&["type"]),
            // tolerations, envFrom, volumeClaimTemplates, args, command and
            // everything not listed: atomic, as in Kubernetes.
            _ => ListStrategy::Atomic,
        }
    }
}

/// Fields of the object root and of `metadata` that no manager owns: the
/// object's identity and what the server maintains.
pub(crate) fn is_stripped(at_root: bool, in_metadata: bool, field: &str) -> bool {
    (at_root && matches!(field, "apiVersion" | "kind"))
        || (in_metadata
            && matches!(
                field,
                "name"
                    | "namespace"
                    | "uid"
                    | "resourceVersion"
                    | "creationTimestamp"
                    | "generation"
                    | "selfLink"
                    | "managedFields"
                    | "deletionTimestamp"
                    | "deletionGracePeriodSeconds"
            ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(kind: &str, path: &[&str], list: &str) -> ListStrategy {
        let schema = path.iter().fold(Schema::root(kind, true), |schema, field| {
            schema.child(field)
        });
        schema.list_strategy(list)
    }

    #[test]
    fn containers_are_found_under_every_workload_template() {
        let name = ListStrategy::Keyed { keys: &["name"] };
        assert_eq!(walk("Pod", &["spec"], "containers"), name);
        for kind in [
            "Deployment",
            "StatefulSet",
            "DaemonSet",
            "ReplicaSet",
            "Job",
        ] {
            assert_eq!(
                walk(kind, &["spec", "template", "spec"], "containers"),
                name
            );
        }
        let cron = ["spec", "jobTemplate", "spec", "template", "spec"];
        assert_eq!(walk("CronJob", &cron, "initContainers"), name);
        assert_eq!(
            walk(
                "Deployment",
                &["spec", "template", "spec", "containers"],
                "env"
            ),
            name
        );
    }

    #[test]
    fn unknown_lists_are_atomic() {
        assert_eq!(walk("Pod", &["spec"], "tolerations"), ListStrategy::Atomic);
        assert_eq!(
            walk("StatefulSet", &["spec"], "volumeClaimTemplates"),
            ListStrategy::Atomic
        );
        let custom = Schema::root("Widget", false).child("spec");
        assert_eq!(custom.list_strategy("containers"), ListStrategy::Atomic);
        let meta = Schema::root("Widget", false).child("metadata");
        assert_eq!(meta.list_strategy("finalizers"), ListStrategy::Set);
    }
}
