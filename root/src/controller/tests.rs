//! The controller's pacing of rebuilds and status reports, and what it stores
//! of the bundles it builds.

use super::*;

#[test]
fn a_slow_report_spaces_the_next_but_never_past_the_cap() {
    assert_eq!(status_pause(Duration::ZERO), DEBOUNCE);
    assert_eq!(status_pause(Duration::from_millis(5)), DEBOUNCE);
    assert_eq!(
        status_pause(Duration::from_millis(30)),
        Duration::from_millis(270)
    );
    assert_eq!(status_pause(Duration::from_secs(1)), MAX_STATUS_PAUSE);
    assert_eq!(status_pause(Duration::MAX), MAX_STATUS_PAUSE);
}

/// Sends `values` at the given offsets (ms) from now.
fn send_at(sender: broadcast::Sender<u32>, offsets: &[(u64, u32)]) {
    let offsets = offsets.to_vec();
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        for (at, value) in offsets {
            tokio::time::sleep_until(start + Duration::from_millis(at)).await;
            let _ = sender.send(value);
        }
        // Keep the channel open past the last send.
        tokio::time::sleep(Duration::from_secs(10)).await;
    });
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_changes_is_gathered_until_it_goes_quiet() {
    let (sender, mut events) = broadcast::channel(16);
    send_at(sender, &[(1, 1), (2, 2), (3, 3)]);
    let start = tokio::time::Instant::now();
    assert_eq!(gather(&mut events, |_| true).await, Some(()));
    assert_eq!(start.elapsed(), Duration::from_millis(3) + QUIET);
}

#[tokio::test(start_paused = true)]
async fn changes_that_keep_coming_are_gathered_for_the_debounce_at_most() {
    let (sender, mut events) = broadcast::channel(64);
    let steady: Vec<(u64, u32)> = (0..40).map(|i| (i * 10, i as u32)).collect();
    send_at(sender, &steady);
    let start = tokio::time::Instant::now();
    assert_eq!(gather(&mut events, |_| true).await, Some(()));
    assert_eq!(start.elapsed(), DEBOUNCE);
}

#[tokio::test(start_paused = true)]
async fn what_is_not_a_change_does_not_hold_the_rebuild() {
    let (sender, mut events) = broadcast::channel(16);
    // 7 is a status write: it arrives within the quiet window and must not
    // extend it.
    send_at(sender, &[(20, 7)]);
    let start = tokio::time::Instant::now();
    assert_eq!(gather(&mut events, |value| *value != 7).await, Some(()));
    assert_eq!(start.elapsed(), QUIET);
}

#[tokio::test(start_paused = true)]
async fn a_closed_feed_ends_the_gathering() {
    let (sender, mut events) = broadcast::channel::<u32>(16);
    drop(sender);
    assert_eq!(gather(&mut events, |_| true).await, None);
}

/// A placement built twice over the same objects: the second build's
/// bundle has no bytes (the first stored them).
fn built_twice() -> (placement::Packed, placement::Packed, placement::Encoder) {
    use serde_json::json;
    let spec = placement::PlacementSpec::from_object(&json!({
        "apiVersion": "relaymesh.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"workloads": [{"kind": "ConfigMap"}], "clusters": {"names": ["edge-1"]}},
    }))
    .expect("valid");
    let objects = [json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "conf", "namespace": "shop"}, "data": {"k": "v"}})];
    let mut encoder = placement::Encoder::new(placement::BundleEncoding::Zstd);
    let first = placement::build(&spec, &objects, &mut encoder).expect("packs");
    encoder.end_rebuild();
    let second = placement::build(&spec, &objects, &mut encoder).expect("packs");
    (first, second, encoder)
}

#[test]
fn an_unchanged_bundle_the_store_holds_is_not_stored_again() {
    let (mut first, mut second, encoder) = built_twice();
    assert!(second.bundle.is_none(), "not compressed again");
    let holds = |_: &BundleId| Ok::<_, std::convert::Infallible>(true);
    assert_eq!(bundle_to_store(holds, &encoder, &mut second), Ok(None));
    let lacks = |_: &BundleId| Ok::<_, std::convert::Infallible>(false);
    let bytes = first.bundle.clone().expect("encoded");
    assert_eq!(
        bundle_to_store(lacks, &encoder, &mut first),
        Ok(Some((BundleId::of(&bytes), bytes)))
    );
}

#[test]
fn a_bundle_gone_from_the_store_is_encoded_anew_under_its_id() {
    let (first, mut second, encoder) = built_twice();
    let lacks = |_: &BundleId| Ok::<_, std::convert::Infallible>(false);
    let stored = bundle_to_store(lacks, &encoder, &mut second)
        .ok()
        .flatten()
        .expect("stored again");
    assert_eq!(Some(stored.1), first.bundle, "the same bytes");
    assert_eq!(vec![stored.0], first.entry.bundles, "under the same id");
    assert_eq!(second.entry.bundles, first.entry.bundles);
}
