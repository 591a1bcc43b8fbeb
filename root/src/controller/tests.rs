//! The controller's pacing of status reports.

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
