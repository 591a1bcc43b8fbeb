//! The Placement's schema: its spec as the placement parser reads it
//! (`topology/src/spec/placement.rs`, `topology/src/spec/rollout.rs`,
//! `relaymesh_topology::rules`), its status as the root writes it
//! (`root/src/placement/status.rs`, the daemon's rollout state).
//!
//! The schema only says which fields exist and their JSON types; the
//! parser still checks values (a label key, a percentage, a CEL
//! expression) and refuses with `422` naming the field.

use serde_json::{json, Value};

use super::{
    array, boolean, condition, int_or_string, integer, label_selector, number, object, open_object,
    string, strings,
};

/// The whole Placement: `spec` and `status` (`apiVersion`, `kind` and
/// `metadata` are added where the schema is served).
pub(crate) fn schema() -> Value {
    object(
        "Placement says which root objects (workloads) go to which edge clusters, and how new revisions of them roll out. The root places it down the tree of relays and writes its status.",
        &[("spec", spec()), ("status", status())],
    )
}

fn spec() -> Value {
    object(
        "What to place and where.",
        &[
            (
                "workloads",
                array(
                    "Which root objects travel: a list of terms, OR-ed; at least one. A term ANDs its fields; an absent field matches anything. relaymesh's own kinds never travel.",
                    workload_term(),
                ),
            ),
            ("clusters", clusters()),
            (
                "maxClusters",
                integer("An optional bound on the label-selected clusters (named ones do not count against it). Without it every matching cluster is selected."),
            ),
            (
                "spreadBy",
                string("A cluster label: the maxClusters bound is spread as evenly as possible over its values, in sorted order; clusters without the label are not candidates. Requires maxClusters."),
            ),
            (
                "adopt",
                boolean("Whether edge agents may take over objects that exist on their cluster without relaymesh's marks, where their cluster's owner allows it (edge-agent run --allow-adopt). Default false."),
            ),
            (
                "statusRules",
                array(
                    "CEL aggregations computed on every cluster from the objects the placement applied there, merged up the tree into status.rules. At most 16.",
                    status_rule(),
                ),
            ),
            (
                "statusGroupBy",
                strings("Cluster label keys whose values the phase counts are also summed by, into status.groups (relayctl status --by LABEL). Distinct, at most 4."),
            ),
            ("customization", customization()),
            ("rollout", rollout()),
        ],
    )
}

fn workload_term() -> Value {
    object(
        "One term of spec.workloads: the root objects that match every field it sets.",
        &[
            (
                "namespaces",
                strings("Namespaces the objects must be in. Absent: the Placement's own namespace, and cluster-scoped objects."),
            ),
            (
                "apiGroup",
                string("The objects' API group; \"\" is the core group."),
            ),
            ("kind", string("The objects' kind, as Deployment.")),
            ("names", strings("The objects' names.")),
            (
                "labelSelector",
                label_selector("A label selector on the objects' labels."),
            ),
        ],
    )
}

fn clusters() -> Value {
    object(
        "Where the workloads go: the clusters matching labelSelector (bounded by maxClusters), and the clusters named in names. At least one of the two.",
        &[
            (
                "labelSelector",
                label_selector("Selects clusters by their labels (Kubernetes semantics: matchLabels, and matchExpressions with In, NotIn, Exists, DoesNotExist)."),
            ),
            (
                "names",
                strings("Clusters selected by name, always, in addition to the label-selected ones, and not counted against maxClusters. A name no known cluster has is accepted with a warning: the cluster is selected once it joins."),
            ),
        ],
    )
}

fn status_rule() -> Value {
    object(
        "One status rule: a CEL expression over every object the placement applied on every cluster, aggregated up the tree. Each expression sees object (the live object, status included) and cluster ({name, labels}).",
        &[
            (
                "name",
                string("The rule's name: a DNS label, unique in the placement. Required."),
            ),
            (
                "select",
                string("CEL: the number to aggregate. Required for every aggregate but count."),
            ),
            (
                "filter",
                string("CEL, optional: the objects that count (those for which it is true)."),
            ),
            (
                "aggregate",
                string("How values combine: count, sum, min, max, avg or topk. Required."),
            ),
            (
                "groupBy",
                string("Optional cluster label key: values are also summarised per value of it."),
            ),
            (
                "limit",
                integer("For topk only: how many of the largest values status shows, 1 to 10; default 5."),
            ),
        ],
    )
}

fn customization() -> Value {
    object(
        "How each cluster's copy differs: templates, then overrides, expanded by each edge agent so every cluster gets the same bundle.",
        &[
            (
                "templates",
                boolean("Whether {{ cluster.name }}, {{ cluster.labels.KEY }} and {{ cluster.annotations.KEY }} in string values are expanded. Default true."),
            ),
            (
                "overrides",
                array(
                    "Patches applied in order after the templates, at most 64.",
                    object(
                        "One override: exactly one of mergePatch and jsonPatch, on the objects it matches, on the clusters it selects.",
                        &[
                            (
                                "clusterSelector",
                                label_selector("The clusters it applies on; absent: every cluster."),
                            ),
                            (
                                "objects",
                                object(
                                    "The objects it applies to; an absent field matches anything.",
                                    &[
                                        ("apiGroup", string("The objects' API group; \"\" is the core group.")),
                                        ("kind", string("The objects' kind.")),
                                        ("names", strings("The objects' names.")),
                                    ],
                                ),
                            ),
                            (
                                "mergePatch",
                                open_object("An RFC 7386 merge patch applied to each object."),
                            ),
                            (
                                "jsonPatch",
                                array(
                                    "RFC 6902 operations applied to each object; one that does not apply fails the placement on that cluster.",
                                    object(
                                        "One JSON patch operation.",
                                        &[
                                            ("op", string("add, remove, replace, move, copy or test.")),
                                            ("path", string("A JSON pointer into the object.")),
                                            ("from", string("move and copy: the JSON pointer to take the value from.")),
                                            (
                                                "value",
                                                json!({
                                                    "description": "add, replace and test: the value (any JSON).",
                                                    "x-kubernetes-preserve-unknown-fields": true,
                                                }),
                                            ),
                                        ],
                                    ),
                                ),
                            ),
                        ],
                    ),
                ),
            ),
        ],
    )
}

fn rollout() -> Value {
    object(
        "How new revisions of the workloads reach the clusters. Absent (or strategy All): every selected cluster at once.",
        &[
            (
                "strategy",
                string("All (default), Progressive (in waves of maxConcurrency) or Canary (first one cluster per value of canary.groupBy, then progressively)."),
            ),
            (
                "maxConcurrency",
                int_or_string("How many clusters may be updating at once: a count, or a percentage (\"25%\") of the selected clusters, rounded up. At least 1; default 1."),
            ),
            (
                "minSuccessTime",
                string("How long a cluster must be ready on the new revision before it counts as done, as 30s or 10m. Default 0s."),
            ),
            (
                "progressDeadline",
                string("A cluster not ready this long after it started the new revision counts as failed, as 10m. Default none."),
            ),
            (
                "maxFailures",
                int_or_string("More failed clusters than this halt the rollout: a count or a percentage. Default 0."),
            ),
            (
                "orderBy",
                string("A cluster label: clusters with the smallest values go first (numerically when every value is a number); clusters without it last."),
            ),
            (
                "canary",
                object(
                    "Canary only: the first wave.",
                    &[(
                        "groupBy",
                        string("A cluster label: the first wave is one cluster per value of it. Absent: a single cluster."),
                    )],
                ),
            ),
            (
                "paused",
                boolean("No new wave starts while true (relayctl rollout pause and resume)."),
            ),
            (
                "gates",
                strings("Condition types that must all be True in status.conditions for a wave to start; at most 8."),
            ),
            (
                "maxUnavailablePerGroup",
                object(
                    "Progressive or Canary: at most max clusters in flight (updating or failed) per group. The groups are the subtrees of the root's children (groupBy: Relays, the default) or the values of a cluster label (label).",
                    &[
                        (
                            "max",
                            int_or_string("The budget per group: a count, or a percentage of the group's selected clusters (rounded up, at least one). Required, at least 1."),
                        ),
                        (
                            "groupBy",
                            string("Relays: a group per subtree of the root's children. Exclusive with label."),
                        ),
                        (
                            "label",
                            string("A cluster label: a group per value. Exclusive with groupBy; orderBy must be absent or the same label."),
                        ),
                    ],
                ),
            ),
        ],
    )
}

fn status() -> Value {
    object(
        "What the tree reported, as the root writes it.",
        &[
            (
                "observedGeneration",
                integer("The generation of the spec the root placed."),
            ),
            (
                "revision",
                string("The workloads' revision the status describes: the bundle the root last decided."),
            ),
            ("clusters", cluster_counts()),
            (
                "failing",
                array(
                    "The first 10 failing clusters by name, with their agents' messages.",
                    object(
                        "A failing cluster.",
                        &[
                            ("cluster", string("The cluster's name.")),
                            ("message", string("Why it fails (Kind ns/name: reason).")),
                        ],
                    ),
                ),
            ),
            (
                "conditions",
                array(
                    "Applied, Ready, Degraded and (with maxClusters) Satisfied, written by the root; other conditions (a rollout's gates) are kept as they are.",
                    condition(),
                ),
            ),
            (
                "handover",
                object(
                    "While the placement's clusters change: the clusters it leaves keep their copies until every cluster it selects is ready.",
                    &[(
                        "leavingClusters",
                        strings("The clusters the placement leaves."),
                    )],
                ),
            ),
            (
                "rules",
                array(
                    "The result of each status rule.",
                    rule_result(true),
                ),
            ),
            (
                "groups",
                array(
                    "The phase counts per value of each statusGroupBy label.",
                    object(
                        "One label's groups.",
                        &[
                            ("label", string("The label key.")),
                            (
                                "groups",
                                array(
                                    "The first 32 values in order; past them one row with other: true.",
                                    object(
                                        "The clusters with one value of the label.",
                                        &[
                                            ("key", string("The value; \"\" for clusters without the label.")),
                                            ("other", boolean("The row of the values past the first 32.")),
                                            ("clusters", integer("The clusters that reported.")),
                                            ("ready", integer("The ready ones.")),
                                            ("failed", integer("The failed ones.")),
                                        ],
                                    ),
                                ),
                            ),
                        ],
                    ),
                ),
            ),
            ("rollout", rollout_status()),
        ],
    )
}

fn cluster_counts() -> Value {
    object(
        "The selected clusters by phase, merged up the tree.",
        &[
            ("selected", integer("The clusters the placement selects.")),
            ("pending", integer("Selected clusters that have not reported.")),
            ("applied", integer("Clusters that applied the workloads, not ready yet.")),
            ("ready", integer("Clusters whose workloads are ready.")),
            ("failed", integer("Clusters that report a failure.")),
            ("offline", integer("Clusters below a disconnected link.")),
            (
                "updated",
                integer("Clusters running the revision in status.revision."),
            ),
            (
                "unknown",
                strings("Names in spec.clusters.names that match no known cluster."),
            ),
            (
                "shortfall",
                integer("With maxClusters: how many clusters the bound asks for that no open matching cluster can give."),
            ),
            ("message", string("One failure: cluster: Kind ns/name: reason.")),
        ],
    )
}

/// A status rule's result; `nested` adds `groups` and `other`, which hold
/// the same fields but no further nesting.
fn rule_result(nested: bool) -> Value {
    let mut fields = vec![
        ("value", number("The count, sum, smallest, largest or average value (null with none); absent for topk.")),
        ("count", integer("How many values there are.")),
        (
            "top",
            array(
                "topk: the largest values, largest first, at most the rule's limit.",
                object(
                    "One value and the cluster it came from.",
                    &[
                        ("cluster", string("The cluster.")),
                        ("value", number("The value.")),
                    ],
                ),
            ),
        ),
    ];
    if !nested {
        fields.insert(0, ("key", string("The value of the rule's groupBy label.")));
        return object("One group's result.", &fields);
    }
    fields.insert(0, ("name", string("The rule's name.")));
    fields.insert(1, ("aggregate", string("The rule's aggregate.")));
    fields.push((
        "groups",
        array(
            "With groupBy: the result per value of the label.",
            rule_result(false),
        ),
    ));
    fields.push((
        "other",
        object(
            "The values of the groups past the first 32, folded together.",
            &[
                ("value", number("As the rule's value.")),
                ("count", integer("How many values there are.")),
                (
                    "top",
                    array(
                        "topk: the largest values.",
                        object(
                            "One value and the cluster it came from.",
                            &[
                                ("cluster", string("The cluster.")),
                                ("value", number("The value.")),
                            ],
                        ),
                    ),
                ),
            ],
        ),
    ));
    object("One rule's result.", &fields)
}

fn rollout_status() -> Value {
    let counts = |description: &str| {
        object(
            description,
            &[
                ("waiting", integer("Clusters not in a wave yet.")),
                (
                    "updating",
                    integer("Clusters updating to the newest revision."),
                ),
                ("succeeded", integer("Clusters done with it.")),
                ("failed", integer("Clusters that failed it.")),
            ],
        )
    };
    object(
        "Where a staged rollout stands (with a strategy other than All, or a history).",
        &[
            ("strategy", string("The rollout's strategy.")),
            ("revision", string("The newest revision.")),
            (
                "previousRevision",
                string("What the clusters outside the wave run: the last revision that completed."),
            ),
            (
                "phase",
                string("Progressing, Paused, Gated, Halted, Complete, Promoted or Aborted."),
            ),
            ("message", string("Why, in words.")),
            (
                "startedAt",
                string("When the newest revision started (RFC 3339)."),
            ),
            ("canaryDone", boolean("Whether the canary wave succeeded.")),
            ("admitted", integer("The wave the root handed down.")),
            (
                "reached",
                integer("How many clusters the relays found for it."),
            ),
            (
                "clusters",
                counts("The selected clusters by rollout state."),
            ),
            (
                "groups",
                array(
                    "With maxUnavailablePerGroup: each group's counts.",
                    object(
                        "One group.",
                        &[
                            ("name", string("The group: a child relay or a label value.")),
                            ("selected", integer("Its selected clusters.")),
                            ("admitted", integer("Its part of the wave.")),
                            ("updating", integer("Its clusters updating.")),
                            ("succeeded", integer("Its clusters done.")),
                            ("failed", integer("Its clusters failed.")),
                        ],
                    ),
                ),
            ),
            (
                "history",
                array(
                    "The last 10 revisions' outcomes, newest first.",
                    object(
                        "One revision's outcome.",
                        &[
                            ("revision", string("The revision.")),
                            (
                                "outcome",
                                string("Complete, Promoted, Aborted or Superseded."),
                            ),
                            ("startedAt", string("When it started (RFC 3339).")),
                            ("at", string("When it ended (RFC 3339).")),
                        ],
                    ),
                ),
            ),
        ],
    )
}
