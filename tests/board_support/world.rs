//! The board tests' world: one database, one or more `switchboard serve` replicas on it, an
//! owner with a token, and the API, MCP, plain-HTTP and keyboard helpers the board tests use
//! beside the browser.

use super::{Browser, Driver, Js};
use crate::support::{Client, Server, add_human, data_dir};
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use fantoccini::Locator;
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use serde_json::{Value, json};
use std::collections::BTreeSet;

pub const LA: Tz = chrono_tz::America::Los_Angeles;
/// Long enough that no claim made by a test expires while it runs.
pub const LEASE: i64 = 3600;

/// One database, one or more `switchboard serve` processes on it, and an owner with a token.
pub struct World {
    pub db: engine::testing::TestDatabase,
    pub servers: Vec<(Server, tempfile::TempDir)>,
    /// The operator API on server 0, for the owner's setup and checks.
    pub api: Client,
    pub owner: String,
}

/// A vended endpoint: id (what board paths use), slug, `sbk_` key and scope string.
#[derive(Clone)]
pub struct Ep {
    pub id: String,
    pub slug: String,
    pub key: String,
    pub scope: String,
}

impl World {
    pub async fn start(replicas: usize) -> World {
        World::start_with(replicas, &[]).await
    }

    /// `replicas` servers with `env` set on each (e.g. `SWITCHBOARD_HOOKS_ALLOW_PRIVATE`).
    pub async fn start_with(replicas: usize, env: &[(&str, &str)]) -> World {
        let db = engine::testing::empty_database().await;
        let mut servers = Vec::new();
        for _ in 0..replicas {
            let dir = data_dir();
            let server = Server::start(&["--database-url", &db.url], env, dir.path());
            servers.push((server, dir));
        }
        let api = Client::new(&servers[0].0.base);
        let owner = add_human("owner", &["--database-url", &db.url]).1;
        World { db, servers, api, owner }
    }

    pub fn base(&self, replica: usize) -> &str {
        &self.servers[replica].0.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base(0))
    }

    /// Another human; returns their token.
    pub fn human(&self, name: &str) -> String {
        add_human(name, &["--database-url", &self.db.url]).1
    }

    pub async fn vend(&self, token: &str, name: &str, queues: &[&str]) -> Ep {
        let endpoint = self.api.vend(token, json!({"name": name, "queues": queues})).await;
        let slug = endpoint["slug"].as_str().expect("slug").to_string();
        Ep {
            id: endpoint["id"].as_str().expect("id").to_string(),
            scope: format!("endpoint:{slug}"),
            slug,
            key: endpoint["token"].as_str().expect("token").to_string(),
        }
    }

    pub async fn create(&self, token: &str, ep: &Ep, queue: &str, title: &str) -> String {
        let body = json!({"scope": ep.scope, "queue": queue, "title": title});
        let (status, answer) = self.api.post("/api/v1/todos", token, body).await;
        assert_eq!(status, 201, "create {title}: {answer}");
        answer["todo"]["id"].as_str().expect("todo id").to_string()
    }

    /// Creates `count` todos titled `{prefix} {n}` (n from 1), a few at a time.
    pub async fn create_many(&self, token: &str, ep: &Ep, queue: &str, prefix: &str, count: usize) -> Vec<String> {
        let mut ids = Vec::new();
        let titles: Vec<String> = (1..=count).map(|n| format!("{prefix} {n:03}")).collect();
        for chunk in titles.chunks(10) {
            let made = futures::future::join_all(chunk.iter().map(|t| self.create(token, ep, queue, t))).await;
            ids.extend(made);
        }
        ids
    }

    pub async fn policy(&self, token: &str, ep: &Ep, queue: &str, policy: Value) {
        let (status, body) = self.api.put_admission_policy(token, &ep.scope, queue, policy).await;
        assert_eq!(status, 200, "{body}");
    }

    /// `GET /api/v1/admission/{scope}/{queue}`: (status, body).
    pub async fn admission(&self, token: &str, ep: &Ep, queue: &str) -> (u16, Value) {
        self.api.get(&format!("/api/v1/admission/{}/{queue}", ep.scope), token).await
    }

    pub async fn todo_state(&self, token: &str, id: &str) -> String {
        let (status, body) = self.api.get(&format!("/api/v1/todos/{id}"), token).await;
        assert_eq!(status, 200, "GET todo {id}: {body}");
        body["todo"]["state"].as_str().expect("state").to_string()
    }

    pub async fn pending(&self, token: &str, ep: &Ep, queue: &str) -> BTreeSet<String> {
        let path = format!("/api/v1/todos?scope={}&queue={queue}&state=pending&limit=200", ep.scope);
        let (status, body) = self.api.get(&path, token).await;
        assert_eq!(status, 200, "list pending: {body}");
        body["todos"].as_array().expect("todos").iter().map(|t| t["id"].as_str().expect("id").to_string()).collect()
    }

    /// A browser session on `driver`, signed in as the owner on server `replica`.
    pub async fn owner_browser(&self, driver: &Driver, js: Js, replica: usize) -> Browser {
        let browser = driver.session(js).await;
        browser.sign_in(self.base(replica), &self.db.url, "owner").await;
        browser
    }
}

/// `claim_next` over MCP on `api`'s server; the claimed todo's id (None when nothing admitted).
pub async fn claim_next(api: &Client, ep: &Ep) -> Option<String> {
    let (is_error, answer) = api.tool(&ep.slug, &ep.key, "claim_next", json!({"lease_ttl_seconds": LEASE})).await;
    assert!(!is_error, "claim_next: {answer}");
    answer["todo"]["id"].as_str().map(str::to_string)
}

pub fn daily(max: i64, tz: &str) -> Value {
    json!({"max_in_flight": null, "max_claims_per_window": max, "window": {"period": "day", "tz": tz, "start": "00:00"}})
}

/// The start of the next day in `zone` after `now` (when a day window that starts at 00:00 resets).
pub fn next_midnight(zone: Tz, now: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = now.with_timezone(&zone).date_naive().succ_opt().expect("tomorrow");
    zone.from_local_datetime(&tomorrow.and_hms_opt(0, 0, 0).expect("midnight"))
        .earliest()
        .expect("local midnight exists")
        .with_timezone(&Utc)
}

/// The board as a browser would send it, but from a plain HTTP client carrying a session
/// cookie: exact statuses and bytes, no redirects followed.
pub struct Web {
    pub http: reqwest::Client,
    pub base: String,
    pub cookie: String,
}

/// Status, `Location` and body of one answer.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

impl Web {
    pub fn new(base: &str, cookie: &str) -> Web {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        Web { http, base: base.to_string(), cookie: cookie.to_string() }
    }

    pub async fn answer(request: reqwest::RequestBuilder) -> Page {
        let response = request.send().await.expect("HTTP request");
        let status = response.status().as_u16();
        let location = response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        Page { status, location, body: response.text().await.expect("body") }
    }

    pub async fn get(&self, path: &str) -> Page {
        let request =
            self.http.get(format!("{}{path}", self.base)).header("cookie", format!("sb_session={}", self.cookie));
        Web::answer(request).await
    }

    /// A form POST with an urlencoded body written by the caller.
    pub async fn post(&self, path: &str, form: &str) -> Page {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", format!("sb_session={}", self.cookie))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_string());
        Web::answer(request).await
    }
}

/// What the board table's row of the queue titled `title` shows, read from the DOM in one go:
/// `{status, used, in_flight, pending, resets, local, text}` (null when there is no such row).
/// `local` is the reset time in the viewer's zone once the script has localised it.
pub async fn read_row(browser: &Browser, title: &str) -> Value {
    browser
        .execute(
            r#"
            const row = [...document.querySelectorAll('table.queues tr.live-header')]
                .find(r => r.querySelector('th a').textContent.trim() === arguments[0]);
            if (!row) return null;
            const cell = i => row.cells[i].textContent.replace(/\s+/g, ' ').trim();
            const time = row.querySelector('time.local');
            return {
                status: cell(1), used: cell(2), in_flight: cell(3), pending: cell(4), resets: cell(5),
                local: time ? time.textContent : null,
                text: row.textContent.replace(/\s+/g, ' ').trim(),
            };
            "#,
            vec![json!(title)],
        )
        .await
}

/// Presses keys on whatever has focus (real key events; no element is clicked or targeted).
pub async fn press(browser: &Browser, keys: &[char]) {
    let mut actions = KeyActions::new("keyboard".into());
    for &key in keys {
        actions = actions.then(KeyAction::Down { value: key }).then(KeyAction::Up { value: key });
    }
    browser.client.perform_actions(actions).await.expect("key presses");
}

/// Ctrl+A: select all of the focused field.
pub async fn select_all(browser: &Browser) {
    let control = char::from(Key::Control);
    let actions = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: control })
        .then(KeyAction::Down { value: 'a' })
        .then(KeyAction::Up { value: 'a' })
        .then(KeyAction::Up { value: control });
    browser.client.perform_actions(actions).await.expect("ctrl+a");
}

/// `{id, tag, text}` of the focused element.
pub async fn focused(browser: &Browser) -> Value {
    browser
        .execute(
            "const e = document.activeElement; \
             return e ? {id: e.id, tag: e.tagName, text: e.textContent.trim()} : null;",
            vec![],
        )
        .await
}

/// Sets a text field's value the way a user does (clear, type).
pub async fn fill(browser: &Browser, id: &str, value: &str) {
    let field = browser.client.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("find #{id}: {e}"));
    field.clear().await.expect("clear field");
    field.send_keys(value).await.expect("type into field");
}

// SPEC-0030 REQ-11: the header says why work waits (used of limit, reset time in the policy's
// zone and the viewer's), and every waiting todo carries the deferred chip.
