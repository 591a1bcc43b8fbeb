//! What `relay inspect` and `edge-agent inspect` print: a stopped node's
//! store, summarised as JSON for people and tests.

use serde_json::{json, Value};

use relaymesh_protocol::BundleId;

use crate::store::{Store, StoreError};

/// A JSON summary of everything `store` holds, or `None` if it holds no node.
/// Bundles are re-hashed, so `verified` says whether the bytes on disk are
/// still the bundle their id names, and `encoding` whether they are the
/// objects' JSON or zstd (`json`, `zstd`; null if nothing is stored).
/// `served` holds, per child, the bundle transfers this node completed to
/// it (in all, and per bundle still held).
pub fn summary(store: &Store) -> Result<Option<Value>, StoreError> {
    let Some(identity) = store.identity()? else {
        return Ok(None);
    };
    let config = store.config()?;
    let persisted = store.load()?;
    let mut bundles = Vec::new();
    for (id, size) in store.bundle_sizes()? {
        let (verified, encoding) = read_back(store, &id)?;
        bundles.push(
            json!({"id": id.to_hex(), "size": size, "verified": verified, "encoding": encoding}),
        );
    }
    // Per child: its totals, and each held bundle it was served.
    let mut served = serde_json::Map::new();
    for (child, total) in &persisted.served_totals {
        let bundles: Vec<Value> = persisted
            .served
            .iter()
            .filter(|((_, to), _)| to == child)
            .map(|((id, _), count)| {
                json!({"id": id.to_hex(), "times": count.times, "bytes": count.bytes})
            })
            .collect();
        served.insert(
            child.clone(),
            json!({"times": total.times, "bytes": total.bytes, "bundles": bundles}),
        );
    }
    let parent = config.as_ref().and_then(|c| c.parent.as_ref());
    Ok(Some(json!({
        "name": identity.name,
        "role": identity.role.as_str(),
        "root": identity.is_root(),
        // When its TLS certificate expires (Unix seconds): a node stopped
        // past it renews within its parent's grace period when it is back.
        "certificateNotAfter": crate::pki::expiry(&identity).ok(),
        "parent": parent.map(|p| &p.name),
        "listen": config.as_ref().and_then(|c| c.listen.clone()),
        "labels": config.as_ref().map(|c| c.labels.clone()).unwrap_or_default(),
        "epoch": persisted.epoch,
        "head": persisted.head,
        "parentRevision": persisted.parent_position.map(|p| p.revision),
        "ancestors": persisted.ancestors,
        "entries": persisted.entries.keys().collect::<Vec<_>>(),
        "bundles": bundles,
        "served": served,
        "nodes": persisted.nodes.keys().collect::<Vec<_>>(),
        "digest": store.digest()?,
        // The store's layout: the format this open found, the release that
        // opened it before, and the backup taken if this open migrated it.
        "store": {
            "format": crate::store::STORE_FORMAT,
            "formatFound": store.opened().found,
            "lastOpenedBy": store.opened().written_by,
            "backup": store.opened().backup,
        },
    })))
}

/// Whether the chunks stored for `id` hash to it, read one at a time, and
/// the encoding its first chunk shows. A bundle with a chunk missing is not
/// verified; a store that fails is an error.
fn read_back(store: &Store, id: &BundleId) -> Result<(bool, Option<&'static str>), StoreError> {
    let Some(mut chunks) = store.bundle_chunks(id)? else {
        return Ok((false, None));
    };
    let mut hasher = BundleId::hasher();
    let mut encoding = None;
    loop {
        match chunks.next_chunk() {
            Ok(Some(chunk)) => {
                encoding.get_or_insert_with(|| {
                    if relaymesh_protocol::bundle_encoding::is_compressed(&chunk) {
                        "zstd"
                    } else {
                        "json"
                    }
                });
                hasher.update(&chunk);
            }
            Ok(None) => return Ok((hasher.finish() == *id, encoding)),
            Err(StoreError::BundleIncomplete { .. }) => return Ok((false, encoding)),
            Err(error) => return Err(error),
        }
    }
}
