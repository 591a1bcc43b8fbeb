//! The audit log: one JSON line per request that asks to change something
//! (every method but GET), allowed or not, with who asked.
//!
//! The file lives in the root's data directory (`audit.log`, mode 0600) and
//! is only ever appended to. A line is written after the reply is known, so
//! it holds the status code. Lines look like
//! `{"time":"…","user":"alice","groups":["operators"],"method":"POST",
//! "path":"/apis/apps/v1/namespaces/default/deployments","code":201,
//! "remote":"127.0.0.1:50412"}`.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use super::tls::PeerIdentity;

/// An append-only audit file.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

/// One audited request.
#[derive(Debug, Serialize)]
struct Line<'a> {
    time: String,
    user: &'a str,
    groups: &'a [String],
    method: &'a str,
    path: &'a str,
    code: u16,
    remote: String,
}

impl AuditLog {
    /// Opens (creating, mode 0600) the audit file at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(options.open(path)?),
        })
    }

    /// Appends the line of one request. A failed write is logged, not
    /// returned: the request has already been answered.
    pub(super) fn record(
        &self,
        peer: &PeerIdentity,
        method: &str,
        path: &str,
        code: u16,
        remote: SocketAddr,
    ) {
        let (user, groups) = match peer {
            PeerIdentity::Verified(user) => (user.name.as_str(), user.groups.as_slice()),
            PeerIdentity::Anonymous => ("system:anonymous", &[][..]),
            PeerIdentity::Rejected(_) => ("system:unauthenticated", &[][..]),
        };
        let line = Line {
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            user,
            groups,
            method,
            path,
            code,
            remote: remote.to_string(),
        };
        let Ok(mut text) = serde_json::to_vec(&line) else {
            return;
        };
        text.push(b'\n');
        let written = match self.file.lock() {
            Ok(mut file) => file.write_all(&text),
            Err(_) => Err(std::io::Error::other("the audit log's lock is poisoned")),
        };
        if let Err(error) = written {
            tracing::error!(path = %self.path.display(), %error, "cannot write the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::User;

    #[test]
    fn each_request_is_one_json_line_with_the_user() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path).expect("open");
        let alice = PeerIdentity::Verified(User {
            name: "alice".into(),
            groups: vec!["operators".into()],
        });
        let remote: SocketAddr = "127.0.0.1:1234".parse().expect("an address");
        log.record(&alice, "POST", "/api/v1/namespaces", 201, remote);
        log.record(&PeerIdentity::Anonymous, "DELETE", "/api/v1/x", 401, remote);
        drop(log);
        // Reopening appends.
        AuditLog::open(&path)
            .expect("reopen")
            .record(&alice, "PATCH", "/p", 403, remote);
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["user"], "alice");
        assert_eq!(lines[0]["groups"][0], "operators");
        assert_eq!(lines[0]["code"], 201);
        assert_eq!(lines[1]["user"], "system:anonymous");
        assert_eq!(lines[2]["method"], "PATCH");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
