//! The bundle decoder: the bytes of a bundle as the edge agent reads them
//! (`relaymesh_edge_agent::manifest::parse_bundle`), and the root's
//! canonical packing (`relaymesh_root::placement::pack`) of whatever JSON
//! array arrives. Packing must be canonical (packing a packed bundle's
//! objects again gives the same bytes, so the same objects always get the
//! same `BundleId`), and a packed bundle must parse wherever its objects
//! did. A JSON array compressed as the root compresses bundles reads as
//! the array did.

use relaymesh_edge_agent::manifest::{parse_bundle, PART_OF_LABEL};
use relaymesh_protocol::bundle_encoding::compress;
use relaymesh_protocol::BundleId;
use relaymesh_root::placement::pack;
use serde_json::Value;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let parsed = parse_bundle(data, "applyset-fuzz");
    if let Ok(manifests) = &parsed {
        for manifest in manifests {
            assert_eq!(manifest.reference.name, manifest.body["metadata"]["name"]);
            // Labels that are not a map are left as they are: the cluster's
            // API server refuses such an object, and the root's API never
            // stores one (validation.rs).
            let Some(labels) = manifest.body.pointer("/metadata/labels") else {
                panic!("{} has no labels after parsing", manifest.reference);
            };
            if labels.is_object() {
                assert_eq!(labels[PART_OF_LABEL], "applyset-fuzz");
            }
        }
    }
    let Ok(objects) = serde_json::from_slice::<Vec<Value>>(data) else {
        return;
    };
    let compressed = parse_bundle(&compress(data), "applyset-fuzz");
    assert_eq!(
        compressed.as_ref().ok(),
        parsed.as_ref().ok(),
        "compressing changed what the bundle reads as: {compressed:?} / {parsed:?}"
    );
    let packed = pack(&objects.iter().collect::<Vec<_>>());
    let repacked_objects: Vec<Value> =
        serde_json::from_slice(&packed).expect("a packed bundle is a JSON array");
    assert_eq!(repacked_objects.len(), objects.len());
    let repacked = pack(&repacked_objects.iter().collect::<Vec<_>>());
    assert_eq!(
        BundleId::of(&repacked),
        BundleId::of(&packed),
        "packing is not canonical:\n{}\n{}",
        String::from_utf8_lossy(&packed),
        String::from_utf8_lossy(&repacked)
    );
    let packed_parsed = parse_bundle(&packed, "applyset-fuzz");
    assert_eq!(
        packed_parsed.is_ok(),
        parsed.is_ok(),
        "packing changed whether the bundle parses: {packed_parsed:?} / {parsed:?}"
    );
}
