//! Browser harness for the board's black-box tests (SPEC-0030 REQ-11): a real Chromium driven
//! over WebDriver (`chromedriver` + `fantoccini`), on loopback only.
//!
//! The test crate must also declare `mod support;` (this module mints sign-in links with
//! `support::run`). Typical use:
//!
//! ```ignore
//! let driver = Driver::start().await;                 // chromedriver on a free port
//! let browser = driver.session(Js::On).await;         // fresh headless Chromium profile
//! browser.sign_in(&server.base, &db.url, "owner").await; // one-time link, clicked in the page
//! browser.goto(&server.url("/board")).await;
//! let n = browser.execute("return document.querySelectorAll('.card').length", vec![]).await;
//! browser.screenshot("board").await;                  // target/board-screenshots/board.png
//! browser.close().await;
//! ```
//!
//! The browser's own time zone is [`BROWSER_TZ`] (set on the driver process, which Chromium
//! inherits), so "the viewer's local time" differs from both UTC and any policy zone a test uses.

#![allow(dead_code)]

pub mod world;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The time zone the browser runs in (no daylight saving, so expectations are stable).
pub const BROWSER_TZ: &str = "Asia/Tokyo";
/// How long a helper waits for the browser before failing the test.
pub const BROWSER_WAIT: Duration = Duration::from_secs(15);

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether a browser session runs page scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Js {
    On,
    Off,
}

/// A running `chromedriver`, shut down (with its browsers) on drop.
pub struct Driver {
    child: Option<Child>,
    port: u16,
    /// `http://127.0.0.1:PORT`, the WebDriver endpoint.
    pub url: String,
}

impl Driver {
    /// Starts chromedriver on a free loopback port and waits until it reports ready.
    pub async fn start() -> Driver {
        let port = free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .env("TZ", BROWSER_TZ)
            .env("LANG", "en_US.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver (is /usr/bin/chromedriver installed?)");
        let driver = Driver { child: Some(child), port, url: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = http_get(port, "/status") {
                let ready = status
                    .split_once("\r\n\r\n")
                    .and_then(|(_, body)| serde_json::from_str::<Value>(body).ok())
                    .is_some_and(|body| body["value"]["ready"] == true);
                if ready {
                    return driver;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not become ready on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens a fresh headless Chromium (its own temporary profile), with page scripts on or off.
    pub async fn session(&self, js: Js) -> Browser {
        let profile = tempfile::Builder::new().prefix("sbchrome-").tempdir().expect("profile dir");
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
            "--lang=en-US",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut options = json!({ "binary": CHROMIUM, "args": args });
        if js == Js::Off {
            options["prefs"] = json!({ "profile.managed_default_content_settings.javascript": 2 });
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), options);
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("open a WebDriver session");
        Browser { client, js, _profile: profile }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // `/shutdown` makes chromedriver quit its browsers too; a kill would orphan them.
        let _ = http_get(self.port, "/shutdown");
        for _ in 0..50 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One browser window, signed in or not. `client` is the raw fantoccini handle for anything the
/// helpers below do not cover (keys, cookies, forms).
pub struct Browser {
    pub client: Client,
    pub js: Js,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Signs `human` (name or id) in the way a person does: mints a one-time link with
    /// `switchboard admin login-link`, opens it, and presses the page's "Sign in" button
    /// (`#use-link`). Returns once the browser is on the board.
    pub async fn sign_in(&self, base: &str, database_url: &str, human: &str) {
        let link = login_link(base, database_url, human);
        self.goto(&link).await;
        self.client
            .find(Locator::Id("use-link"))
            .await
            .expect("the link page's #use-link button")
            .click()
            .await
            .expect("press #use-link");
        self.wait_for_path("/").await;
        assert!(self.session_cookie().await.is_some(), "signed in without a session cookie");
    }

    /// Navigates to an absolute URL and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its return value.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("execute {script}: {e}"))
    }

    /// The page's path (and query), e.g. `/queues/endpoint:x/q?cleared=3`.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("current url");
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// Waits (up to [`BROWSER_WAIT`]) until the page's path is `path`.
    pub async fn wait_for_path(&self, path: &str) {
        let deadline = Instant::now() + BROWSER_WAIT;
        loop {
            let now = self.client.current_url().await.expect("current url");
            if now.path() == path {
                return;
            }
            assert!(Instant::now() < deadline, "the browser stayed on {now}, expected path {path}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (up to [`BROWSER_WAIT`]) until an element matching `css` is on the page: after a
    /// form submission that lands on the same path, the new page is there only once it is.
    pub async fn wait_for_element(&self, css: &str) {
        self.client
            .wait()
            .at_most(BROWSER_WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css} within {BROWSER_WAIT:?}: {e}"));
    }

    /// The visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        let element = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("find {css}: {e}"));
        element.text().await.unwrap_or_else(|e| panic!("text of {css}: {e}"))
    }

    /// Presses the button whose text is `text` (a plain form's submit works with JavaScript off).
    pub async fn press_button(&self, text: &str) {
        let xpath = format!("//button[normalize-space()='{text}']");
        self.client.find(Locator::XPath(&xpath)).await.expect(text).click().await.expect(text);
    }

    /// The value of the form field `#id` (a text field, or a readonly one showing a secret).
    pub async fn field_value(&self, id: &str) -> String {
        let value = self.execute(&format!("return document.getElementById('{id}').value;"), vec![]).await;
        value.as_str().unwrap_or_else(|| panic!("no field #{id}")).to_string()
    }

    /// The `sb_session` cookie's value, if the browser holds one for the current site.
    pub async fn session_cookie(&self) -> Option<String> {
        let cookies = self.client.get_all_cookies().await.expect("cookies");
        cookies.iter().find(|c| c.name() == "sb_session").map(|c| c.value().to_string())
    }

    /// Saves a PNG of the viewport as `target/board-screenshots/NAME.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Ends the WebDriver session (closes the window).
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// `switchboard admin login-link HUMAN --base-url BASE --database-url URL`: the printed link.
pub fn login_link(base: &str, database_url: &str, human: &str) -> String {
    let (code, stdout, stderr) =
        crate::support::run(&["admin", "login-link", human, "--base-url", base, "--database-url", database_url], &[]);
    assert_eq!(code, 0, "admin login-link failed: {stderr}");
    let link = stdout.trim().to_string();
    assert!(link.starts_with(&format!("{base}/login/sbl_")), "unexpected login link: {link}");
    link
}

/// `target/board-screenshots`: under `CARGO_TARGET_DIR` when set, else the workspace's `target/`.
pub fn screenshot_dir() -> PathBuf {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if PathBuf::from(&dir).is_absolute() => PathBuf::from(dir),
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    };
    target.join("board-screenshots")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A blocking HTTP GET to chromedriver on loopback; the raw answer, or None if unreachable.
/// Chromedriver keeps the connection open whatever the request says, so the answer ends where
/// its `Content-Length` says, not at end of stream.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut answer = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        let read = stream.read(&mut chunk).ok()?;
        answer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&answer).into_owned();
        let complete = text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
            let length = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok()).flatten()
            });
            length.is_some_and(|length| body.len() >= length)
        });
        if complete || read == 0 {
            return Some(text);
        }
    }
}
