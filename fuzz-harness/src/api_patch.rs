//! The API's patch handling (`relaymesh_apiserver::patch`): a live object
//! and a request body through JSON patch, merge patch, strategic merge patch
//! and server-side apply, then `track_update` as the handlers call it.
//!
//! Input: one byte choosing the patch kind and the object's type, then the
//! live object (JSON), the body and the field manager, separated by 0xff.
//! Properties: a patch never changes `apiVersion`, `kind` or the name and
//! never touches the fields the server owns; a merge patch and an apply are
//! idempotent (applying the same body to the result changes nothing); a
//! result is never deeper than the API's depth limit.

use crate::split_parts;
use relaymesh_apiserver::patch::{apply_patch, track_update, PatchKind, TypeInfo};
use serde_json::Value;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let [live, body, manager] = split_parts(rest, 3)[..] else {
        return;
    };
    let live: Option<Value> = serde_json::from_slice(live).ok();
    let manager = String::from_utf8_lossy(manager).into_owned();
    let type_info = type_info(choice >> 4);
    let kind = match choice & 0x7 {
        0 => PatchKind::Json,
        1 => PatchKind::Merge,
        2 => PatchKind::StrategicMerge,
        3 | 4 => PatchKind::Apply {
            field_manager: manager.clone(),
            force: choice & 0x7 == 4,
        },
        _ => PatchKind::Apply {
            field_manager: "kubectl".into(),
            force: choice & 0x8 != 0,
        },
    };
    let Ok(mut patched) = apply_patch(&kind, live.as_ref(), body, &type_info) else {
        return;
    };
    assert!(patched.is_object(), "a patch produced {patched}");
    // A patch never makes an object deeper than the store takes.
    assert!(
        relaymesh_apiserver::depth::check_value(&patched).is_ok(),
        "a patch result deeper than the limit"
    );
    if let Some(live) = &live {
        for pointer in [
            "/apiVersion",
            "/kind",
            "/metadata/name",
            "/metadata/resourceVersion",
            "/metadata/uid",
            "/metadata/creationTimestamp",
        ] {
            assert_eq!(
                patched.pointer(pointer),
                live.pointer(pointer),
                "{pointer} changed"
            );
        }
    } else {
        assert_eq!(patched["apiVersion"], type_info.api_version.as_str());
        assert_eq!(patched["kind"], type_info.kind.as_str());
    }
    if matches!(kind, PatchKind::Merge | PatchKind::Apply { .. }) {
        let again = apply_patch(&kind, Some(&patched), body, &type_info)
            .expect("the same patch applies to its own result");
        assert_eq!(again, patched, "the patch is not idempotent");
    }
    if !matches!(kind, PatchKind::Apply { .. }) {
        track_update(live.as_ref(), &mut patched, &manager);
        assert!(patched.is_object());
    }
}

/// The type of the patched object: two built-in kinds with merge keys, a
/// built-in without list merge keys, and a custom resource.
fn type_info(choice: u8) -> TypeInfo {
    let (api_version, kind, builtin) = match choice % 4 {
        0 => ("apps/v1", "Deployment", true),
        1 => ("v1", "Service", true),
        2 => ("v1", "ConfigMap", true),
        _ => ("example.com/v1", "Widget", false),
    };
    TypeInfo {
        api_version: api_version.into(),
        kind: kind.into(),
        builtin,
    }
}
