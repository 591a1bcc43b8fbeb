//! `/healthz`, `/livez` and `/readyz`, answered as kube-apiserver answers
//! them: `ok` when every check passes; with `?verbose` one line per check
//! and a verdict; `/livez/NAME` runs one check; `?exclude=NAME` leaves one
//! out. A failed check makes the answer `500`, with the list, so a probe
//! fails and a human sees which check. A *degraded* check is listed with
//! its reason as failed but does not fail the answer: `/readyz` stays 200
//! while the root serves, and says what needs a human (the
//! `stored-objects` check names quarantined objects). The checks themselves
//! are run by the caller; this module only words the answer (no IO).

use hyper::StatusCode;

/// The outcome of each check, by name, in the order they are listed. The
/// root runs `ping` (the server answers), `store` (the object store can
/// be read) and, for `/readyz`, `stored-objects` (none is quarantined).
pub(super) type Outcomes<'a> = [(&'a str, Outcome)];

/// How one check went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It passed.
    Passed,
    /// It failed; the reason is logged, not shown.
    Failed(String),
    /// Something needs a human, but the server serves: shown with its
    /// reason, and the answer stays 200.
    Degraded(String),
}

/// The status and text of `endpoint` (`healthz`, `livez`, `readyz`),
/// narrowed to `only` (the path's check) or widened by `verbose`, without
/// the checks named in `excluded`. `None` if `only` names no check.
pub(super) fn answer(
    endpoint: &str,
    only: Option<&str>,
    verbose: bool,
    excluded: &[&str],
    outcomes: &Outcomes<'_>,
) -> Option<(StatusCode, String)> {
    if let Some(name) = only {
        let (_, outcome) = outcomes.iter().find(|(check, _)| *check == name)?;
        return Some(match outcome {
            Outcome::Passed => (StatusCode::OK, "ok".into()),
            Outcome::Degraded(reason) => (StatusCode::OK, format!("{reason}\n")),
            Outcome::Failed(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: reason withheld\n".into(),
            ),
        });
    }
    let mut lines = String::new();
    let mut failed = false;
    for (name, outcome) in outcomes {
        if excluded.contains(name) {
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match outcome {
            Outcome::Passed => lines.push_str(&format!("[+]{name} ok\n")),
            Outcome::Degraded(reason) => {
                lines.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
            Outcome::Failed(_) => {
                failed = true;
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    if failed {
        lines.push_str(&format!("{endpoint} check failed\n"));
        return Some((StatusCode::INTERNAL_SERVER_ERROR, lines));
    }
    if !verbose {
        return Some((StatusCode::OK, "ok".into()));
    }
    lines.push_str(&format!("{endpoint} check passed\n"));
    Some((StatusCode::OK, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Vec<(&'static str, Outcome)> {
        vec![("ping", Outcome::Passed), ("store", Outcome::Passed)]
    }

    #[test]
    fn plain_verbose_and_single_checks() {
        assert_eq!(
            answer("livez", None, false, &[], &healthy()),
            Some((StatusCode::OK, "ok".into()))
        );
        assert_eq!(
            answer("readyz", None, true, &["store"], &healthy()),
            Some((
                StatusCode::OK,
                "[+]ping ok\n[+]store excluded: ok\nreadyz check passed\n".into()
            ))
        );
        assert_eq!(
            answer("livez", Some("ping"), false, &[], &healthy()),
            Some((StatusCode::OK, "ok".into()))
        );
        assert_eq!(answer("livez", Some("etcd"), false, &[], &healthy()), None);
    }

    #[test]
    fn a_failed_check_is_a_500_with_the_list() {
        let sick = [
            ("ping", Outcome::Passed),
            ("store", Outcome::Failed("sled".to_string())),
        ];
        let (code, text) = answer("healthz", None, false, &[], &sick).expect("known");
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            text,
            "[+]ping ok\n[-]store failed: reason withheld\nhealthz check failed\n"
        );
        // Excluding the failed check makes the rest pass.
        let (code, _) = answer("healthz", None, false, &["store"], &sick).expect("known");
        assert_eq!(code, StatusCode::OK);
        let (code, _) = answer("healthz", Some("store"), false, &[], &sick).expect("known");
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn a_degraded_check_is_named_and_the_answer_stays_ok() {
        let degraded = [
            ("ping", Outcome::Passed),
            (
                "stored-objects",
                Outcome::Degraded(
                    "1 corrupt object quarantined: configmaps default/\"deep\"".into(),
                ),
            ),
        ];
        let (code, text) = answer("readyz", None, true, &[], &degraded).expect("known");
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            text,
            "[+]ping ok\n[-]stored-objects failed: 1 corrupt object quarantined: \
             configmaps default/\"deep\"\nreadyz check passed\n"
        );
        assert_eq!(
            answer("readyz", None, false, &[], &degraded),
            Some((StatusCode::OK, "ok".into()))
        );
    }
}
