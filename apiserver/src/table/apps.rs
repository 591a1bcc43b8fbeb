//! The columns of the `apps` group's workloads (deployments, replica sets
//! and replication controllers, stateful sets, daemon sets): their
//! replicas' progress, and their pod template when wide.

use serde_json::json;

use super::cells::{labels, number, replicas};
use super::column::{column, containers_column, images_column, selector_column, KindColumns};

/// Deployments: ready of desired replicas, updated and available ones.
pub(super) fn deployments() -> KindColumns {
    (
        vec![
            column("Ready", "string", |o, _| {
                json!(format!(
                    "{}/{}",
                    number(o, "/status/readyReplicas"),
                    replicas(o)
                ))
            }),
            column("Up-to-date", "integer", |o, _| {
                json!(number(o, "/status/updatedReplicas"))
            }),
            column("Available", "integer", |o, _| {
                json!(number(o, "/status/availableReplicas"))
            }),
        ],
        vec![containers_column(), images_column(), selector_column()],
    )
}

/// ReplicaSets and ReplicationControllers: desired, current and ready
/// replicas.
pub(super) fn replica_sets() -> KindColumns {
    (
        vec![
            column("Desired", "integer", |o, _| json!(replicas(o))),
            column("Current", "integer", |o, _| {
                json!(number(o, "/status/replicas"))
            }),
            column("Ready", "integer", |o, _| {
                json!(number(o, "/status/readyReplicas"))
            }),
        ],
        vec![containers_column(), images_column(), selector_column()],
    )
}

/// StatefulSets: ready of desired replicas; kubectl shows no selector for
/// them.
pub(super) fn stateful_sets() -> KindColumns {
    (
        vec![column("Ready", "string", |o, _| {
            json!(format!(
                "{}/{}",
                number(o, "/status/readyReplicas"),
                replicas(o)
            ))
        })],
        vec![containers_column(), images_column()],
    )
}

/// DaemonSets: their pods by stage, counted per node, and where they may
/// run.
pub(super) fn daemon_sets() -> KindColumns {
    (
        vec![
            column("Desired", "integer", |o, _| {
                json!(number(o, "/status/desiredNumberScheduled"))
            }),
            column("Current", "integer", |o, _| {
                json!(number(o, "/status/currentNumberScheduled"))
            }),
            column("Ready", "integer", |o, _| {
                json!(number(o, "/status/numberReady"))
            }),
            column("Up-to-date", "integer", |o, _| {
                json!(number(o, "/status/updatedNumberScheduled"))
            }),
            column("Available", "integer", |o, _| {
                json!(number(o, "/status/numberAvailable"))
            }),
            column("Node Selector", "string", |o, _| {
                json!(labels(o.pointer("/spec/template/spec/nodeSelector")))
            }),
        ],
        vec![containers_column(), images_column(), selector_column()],
    )
}
