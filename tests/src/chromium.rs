//! Headless Chromium driven over the DevTools protocol, for the
//! dashboard's test: load a page, evaluate JavaScript in it, take a
//! screenshot. Chromium is Debian's (`scripts/test-deps` installs it).

use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use base64::Engine as _;
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// One headless Chromium with one page.
pub struct Browser {
    child: Child,
    socket: WebSocket<TcpStream>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium (1280×900) on a fresh profile and attaches to its page.
    pub fn launch() -> anyhow::Result<Self> {
        let profile = tempfile::tempdir()?;
        let child = Command::new("chromium")
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("chromium (Debian's chromium; scripts/test-deps installs it)")?;
        let mut browser = Browser {
            child,
            socket: connect_page(profile.path())?,
            next_id: 0,
            _profile: profile,
        };
        browser.call("Page.enable", json!({}))?;
        browser.call("Runtime.enable", json!({}))?;
        Ok(browser)
    }

    /// Sends `method` with `params` and returns its result, skipping the
    /// events that come meanwhile.
    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"id": id, "method": method, "params": params});
        self.socket.send(Message::text(request.to_string()))?;
        loop {
            let message = self
                .socket
                .read()
                .with_context(|| format!("{method}: no answer"))?;
            let Message::Text(text) = message else {
                continue;
            };
            let reply: Value = serde_json::from_str(text.as_str())?;
            if reply["id"] != id {
                continue;
            }
            if let Some(error) = reply.get("error") {
                bail!("{method}: {error}");
            }
            return Ok(reply["result"].clone());
        }
    }

    /// Loads `url` in the page.
    pub fn navigate(&mut self, url: &str) -> anyhow::Result<()> {
        let result = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(error) = result.get("errorText") {
            bail!("cannot load {url}: {error}");
        }
        Ok(())
    }

    /// The value of the JavaScript `expression` in the page.
    pub fn evaluate(&mut self, expression: &str) -> anyhow::Result<Value> {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        )?;
        if let Some(exception) = result.get("exceptionDetails") {
            bail!("{expression}: {exception}");
        }
        Ok(result["result"]["value"].clone())
    }

    /// A PNG of the page as it shows now.
    pub fn screenshot(&mut self) -> anyhow::Result<Vec<u8>> {
        let result = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        let data = result["data"].as_str().context("no screenshot data")?;
        Ok(base64::engine::general_purpose::STANDARD.decode(data)?)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.socket.close(None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The WebSocket of Chromium's first page, once Chromium wrote its port to
/// `profile/DevToolsActivePort`.
fn connect_page(profile: &Path) -> anyhow::Result<WebSocket<TcpStream>> {
    let port_file = profile.join("DevToolsActivePort");
    let port: u16 = crate::wait_for("Chromium's DevTools port", Duration::from_secs(30), || {
        match std::fs::read_to_string(&port_file) {
            Ok(text) => Ok(text
                .lines()
                .next()
                .and_then(|line| line.trim().parse().ok())),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    })?;
    let targets: Value = crate::wait_for("Chromium's page", Duration::from_secs(30), || {
        let list = http_get(port, "/json/list")?;
        let page = list
            .as_array()
            .into_iter()
            .flatten()
            .find(|target| target["type"] == "page")
            .cloned();
        Ok(page)
    })?;
    let url = targets["webSocketDebuggerUrl"]
        .as_str()
        .context("no webSocketDebuggerUrl")?;
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let (socket, _) = tungstenite::client(url, stream).context("the DevTools WebSocket")?;
    Ok(socket)
}

/// A JSON GET on Chromium's DevTools HTTP endpoint (HTTP/1.1: it answers
/// HTTP/1.0 with no body), read to its `Content-Length`.
fn http_get(port: u16, path: &str) -> anyhow::Result<Value> {
    use std::io::{BufRead as _, Read as _, Write as _};
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut reader = std::io::BufReader::new(stream);
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            bail!("{path}: the answer ended in its headers");
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let mut body = vec![0; length.context("no Content-Length")?];
    reader.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body)?)
}
