//! relaymesh's own kinds as the API server lists them: Placements (the
//! only stored kind, with its admission checks) and the read-only views of
//! the tree, each with its schema, short names and printer columns. The
//! catalogue is read once, when the server starts.

use relaymesh_apiserver::{Resource, Validator, Warner};
use serde_json::json;

use super::admission::{unknown_cluster_warning, validate_placement};
use super::groups::{MULTICLUSTER_GROUP, VERSION};
use super::schemas;
use crate::placement::{Specs, RELAYMESH_GROUP};

/// relaymesh's own kinds, each with its schema; Placements are admitted
/// into `specs`; `unknown_clusters` says which of the names it is given no
/// cluster of the tree has now, for the Placement's warnings.
pub(super) fn own_resources(
    specs: Specs,
    unknown_clusters: impl Fn(&[&str]) -> Vec<String> + Send + Sync + 'static,
) -> Vec<Resource> {
    let column =
        |name: &str, kind: &str, path: &str| json!({"name": name, "type": kind, "jsonPath": path});
    let wide = |name: &str, kind: &str, path: &str| json!({"name": name, "type": kind, "jsonPath": path, "priority": 1});
    let connected = column("Connected", "boolean", ".status.connected");
    vec![
        Resource::new(RELAYMESH_GROUP, VERSION, "placements", "Placement", true)
            .short_names(&["pl"])
            // `kubectl get all -n NS` shows what a namespace places next to
            // what it runs.
            .categories_also(&["all"])
            .printer_columns(vec![
                column("Selected", "integer", ".status.clusters.selected"),
                column("Ready", "integer", ".status.clusters.ready"),
            ])
            .schema(schemas::placement())
            .validator(Validator::new(move |namespace, placement| {
                validate_placement(&specs, namespace, placement)
            }))
            .warner(Warner::new(move |_, placement| {
                unknown_cluster_warning(placement, &unknown_clusters)
            })),
        Resource::new(RELAYMESH_GROUP, VERSION, "clusters", "Cluster", false)
            .read_only()
            .schema(schemas::cluster())
            .printer_columns(vec![
                connected.clone(),
                column("Reachable", "boolean", ".status.reachable"),
                column("Relay-Path", "string", ".status.relayPath"),
                // `-o wide`: what scheduling sees.
                wide("Cordoned", "boolean", ".status.cordoned"),
                wide("Drain", "string", ".status.drain"),
                wide("CPU", "string", ".status.capacity.cpu"),
                wide("Memory", "string", ".status.capacity.memory"),
                wide("Pods", "string", ".status.capacity.pods"),
            ]),
        Resource::new(RELAYMESH_GROUP, VERSION, "relays", "Relay", false)
            .read_only()
            .schema(schemas::node("Relay"))
            .printer_columns(vec![
                connected.clone(),
                column("Parent", "string", ".spec.parent"),
            ]),
        Resource::new(RELAYMESH_GROUP, VERSION, "agents", "Agent", false)
            .read_only()
            .schema(schemas::node("Agent"))
            .printer_columns(vec![connected, column("Parent", "string", ".spec.parent")]),
        Resource::new(
            MULTICLUSTER_GROUP,
            VERSION,
            "clusterprofiles",
            "ClusterProfile",
            false,
        )
        .short_names(&["cp"])
        .read_only()
        .schema(schemas::cluster_profile()),
    ]
}
