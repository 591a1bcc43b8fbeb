//! The live dashboard the root serves on its API listener at
//! `/dashboard/`: plain HTML, CSS and JavaScript compiled into the binary,
//! no build chain. The page holds no data: its script reads the API (the
//! relays, clusters and placements, then their watches) with the
//! credentials of whoever opened it, so the API's authentication and RBAC
//! decide what it shows, and it only sends GET requests
//! (docs/dashboard.md).

use hyper::header::HeaderValue;
use hyper::{Response, StatusCode};
use relaymesh_apiserver::http::{reply, ApiBody};
use relaymesh_apiserver::ApiError;

/// Where the dashboard is served.
pub const PATH: &str = "/dashboard";

/// The files of the page: (name, content type, content).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("dashboard/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("dashboard/style.css"),
    ),
];

/// Whether `path` is one of the dashboard's files (any authenticated user
/// may read them: they are the same for everyone and hold no data).
pub fn is_asset_path(path: &str) -> bool {
    asset_name(path).is_some_and(|name| find(name).is_some())
}

/// The file `path` names: `index.html` for the dashboard itself.
pub fn asset_name(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(PATH)?;
    match rest.trim_start_matches('/') {
        "" => Some("index.html"),
        name if rest.starts_with('/') => Some(name),
        _ => None,
    }
}

fn find(name: &str) -> Option<&'static (&'static str, &'static str, &'static str)> {
    ASSETS.iter().find(|(file, _, _)| *file == name)
}

/// The reply for the file `name`, with headers that keep the page to its
/// own scripts and out of other sites' frames.
pub fn asset(name: &str) -> Result<Response<ApiBody>, ApiError> {
    let (_, content_type, content) =
        find(name).ok_or_else(|| ApiError::NotFound(format!("the dashboard has no {name}")))?;
    let mut response = reply(StatusCode::OK, content_type, content.as_bytes().to_vec());
    let headers = response.headers_mut();
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_dashboards_files_only() {
        assert_eq!(asset_name("/dashboard"), Some("index.html"));
        assert_eq!(asset_name("/dashboard/"), Some("index.html"));
        assert_eq!(asset_name("/dashboard/app.js"), Some("app.js"));
        assert_eq!(asset_name("/dashboardx"), None);
        assert!(is_asset_path("/dashboard/style.css"));
        assert!(!is_asset_path("/dashboard/../api/v1/secrets"));
        assert!(!is_asset_path("/dashboard/secret.txt"));
        assert!(asset("nothing").is_err());
    }

    #[test]
    fn the_script_only_reads() {
        let script = find("app.js").expect("app.js").2;
        assert!(script.contains("fetch("));
        // fetch() without a method is a GET; nothing else sends.
        for sender in [
            "method",
            "XMLHttpRequest",
            "sendBeacon",
            "WebSocket",
            "<form",
        ] {
            assert!(!script.contains(sender), "the script may not use {sender}");
        }
    }
}
