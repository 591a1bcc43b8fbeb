//! The controller's pacing of rebuilds and status reports.

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
