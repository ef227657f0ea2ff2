//! SPEC-0030 REQ-11 Accessibility (issue #12): every page of the board passes an axe-core scan
//! at WCAG 2.1 AA with zero violations, in a real browser (headless Chromium) against the real
//! binary on real PostgreSQL, with JavaScript on (what a person sees) and the board in the
//! states that change what a page shows: a queue with no budget, an exhausted one whose work
//! waits, claimed and finished work, a policy editor showing a field error, the confirmation
//! pages, the audit history, the capacity settings of an admin and of a non-admin, the error
//! page, the sign-in pages, the endpoint pages (with a shift, a presence override and a notify
//! hook shown; a refused shift; a hook's secret shown once; a hook's test outcome), every step of
//! the vend wizard, the budget preview, and the webhook and operator token pages; the exhausted
//! queue's page carries its usage charts.
//!
//! axe-core is installed from the npm registry at set-up into `target/axe-core/` (never
//! committed) and injected into each page through WebDriver. Each scanned page is also saved
//! as a screenshot under `target/board-screenshots/a11y-*.png` for a reviewer.

mod board_support;
mod support;

use board_support::{Browser, Driver, Js, login_link, screenshot_dir};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use support::{Client, Server, add_human, data_dir, run};

/// The axe-core release the scan runs (pinned, so a new rule cannot turn CI red overnight).
const AXE_CORE_VERSION: &str = "4.14.1";
/// The rule sets of WCAG 2.1 levels A and AA.
const WCAG_21_AA_TAGS: [&str; 4] = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

/// `target/axe-core/node_modules/axe-core/axe.min.js`, installed with npm on first use.
fn axe_source() -> String {
    let prefix = screenshot_dir().parent().expect("target dir").join("axe-core");
    let script = prefix.join("node_modules/axe-core/axe.min.js");
    let installed = std::fs::read_to_string(prefix.join("node_modules/axe-core/package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|package| package["version"] == AXE_CORE_VERSION);
    if !installed {
        std::fs::create_dir_all(&prefix).expect("create target/axe-core");
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--no-save", "--prefix"])
            .arg(&prefix)
            .arg(format!("axe-core@{AXE_CORE_VERSION}"))
            .status()
            .expect("run npm (is npm installed? .ci/run installs it)");
        assert!(status.success(), "npm install axe-core@{AXE_CORE_VERSION} failed: {status}");
    }
    std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("read {}: {e}", script.display()))
}

/// Scans the page the browser shows; the violations, one line each (rule, impact, first nodes).
async fn violations(browser: &Browser, axe: &str) -> Vec<String> {
    let loaded = browser.execute(&format!("{axe}\n;return typeof window.axe;"), vec![]).await;
    assert_eq!(loaded, json!("object"), "axe-core did not load into the page");
    let script = "const done = arguments[arguments.length - 1];\
        axe.run(document, { runOnly: { type: 'tag', values: arguments[0] } })\
          .then(r => done(r.violations.map(v => `${v.id} (${v.impact}): ${v.help} at ` +\
                v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))))\
          .catch(e => done(['axe failed: ' + e]));";
    let answer = browser
        .client
        .execute_async(script, vec![json!(WCAG_21_AA_TAGS)])
        .await
        .unwrap_or_else(|e| panic!("run axe: {e}"));
    answer
        .as_array()
        .expect("a list of violations")
        .iter()
        .map(|line| line.as_str().unwrap_or("?").to_string())
        .collect()
}

/// Two humans (an admin who owns the work, and a member with nothing), a queue with no budget
/// and an exhausted one with waiting, claimed and finished work, and a policy change history.
struct Fixture {
    server: Server,
    db_url: String,
    scope: String,
    webhook_id: String,
    pending_id: String,
    claimed_id: String,
    _db: engine::testing::TestDatabase,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    // Hooks may name loopback, so the fixture's hook (to a closed port) is accepted.
    let env = [("SWITCHBOARD_HOOKS_ALLOW_PRIVATE", "1")];
    let server = Server::start(&["--database-url", &db.url], &env, dir.path());
    let (code, stdout, stderr) = run(&["admin", "human", "add", "ada", "--admin", "--database-url", &db.url], &[]);
    assert_eq!(code, 0, "admin human add --admin: {stderr}");
    let ada: Value = serde_json::from_str(stdout.trim()).expect("json");
    let ada = ada["token"].as_str().expect("token").to_string();
    add_human("max", &["--database-url", &db.url]);
    let api = Client::new(&server.base);
    let endpoint = api.vend(&ada, json!({"name": "worker", "queues": ["inbox", "metered"]})).await;
    let slug = endpoint["slug"].as_str().expect("slug").to_string();
    let key = endpoint["token"].as_str().expect("token").to_string();
    let scope = format!("endpoint:{}", endpoint["id"].as_str().expect("id"));
    let day = |max: u32| {
        json!({"max_in_flight": null, "max_claims_per_window": max,
                                "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}})
    };
    let (status, body) = api.put_admission_policy(&ada, &scope, "metered", day(3)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.put_admission_policy(&ada, &scope, "metered", day(2)).await;
    assert_eq!(status, 200, "{body}");
    let mut ids = Vec::new();
    for (queue, title) in
        [("metered", "summarise <b>report</b>"), ("metered", "triage"), ("metered", "reply"), ("inbox", "file")]
    {
        let (status, body) =
            api.post("/api/v1/todos", &ada, json!({"scope": scope, "queue": queue, "title": title})).await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["todo"]["id"].as_str().expect("id").to_string());
    }
    // Two claims exhaust the day's budget of 2; one of them completes, so every lane has work.
    let (failed, first) = api.tool(&slug, &key, "claim", json!({"id": ids[0]})).await;
    assert!(!failed, "{first}");
    let (failed, done) = api.tool(&slug, &key, "complete", json!({"id": ids[0]})).await;
    assert!(!failed, "{done}");
    let (failed, second) = api.tool(&slug, &key, "claim", json!({"id": ids[1]})).await;
    assert!(!failed, "{second}");
    let targets = json!([{"scope": scope, "queue": "inbox"}]);
    let (status, webhook) = api.post("/api/v1/webhooks", &ada, json!({"name": "ci", "targets": targets})).await;
    assert_eq!(status, 201, "{webhook}");
    // The endpoint page's presence and hooks part shows a shift, an override and a hook.
    let (status, body) =
        api.post(&format!("/api/v1/endpoints/{slug}/hooks"), &ada, json!({"url": CLOSED_HOOK_URL})).await;
    assert_eq!(status, 201, "{body}");
    let http = reqwest::Client::new();
    for (path, body) in [
        ("shift", json!({"shift": "TZ=America/Los_Angeles Mon-Fri 09:00-17:00"})),
        ("presence", json!({"presence": "out"})),
    ] {
        let answer = http
            .put(server.url(&format!("/api/v1/endpoints/{slug}/{path}")))
            .bearer_auth(&ada)
            .json(&body)
            .send()
            .await
            .expect("PUT");
        assert_eq!(answer.status().as_u16(), 200, "PUT {path}");
    }
    Fixture {
        server,
        db_url: db.url.clone(),
        scope,
        webhook_id: webhook["id"].as_str().expect("webhook id").to_string(),
        pending_id: ids[2].clone(),
        claimed_id: ids[1].clone(),
        _db: db,
        _dir: dir,
    }
}

/// A hook URL nothing listens on: its test call fails at once, which the page then shows.
const CLOSED_HOOK_URL: &str = "http://127.0.0.1:9/hook";

/// The endpoint page's push states (issue #29) that only a form brings about: a refused shift
/// at its field, a new hook's secret shown once, and a hook's test outcome.
async fn scan_the_endpoint_push_states(scan: &mut Scan<'_>, browser: &Browser, endpoint_path: &str) {
    browser.goto(&scan.server.url(endpoint_path)).await;
    browser
        .execute(
            "const f = document.getElementById('shift'); f.value = 'TZ=Mars/Olympus_Mons Mon-Fri 09:00-17:00';             f.form.submit(); return true;",
            vec![],
        )
        .await;
    browser.wait_for_element("#shift-error").await;
    scan.check(browser, "endpoint-shift-error", "endpoint-shift-error".to_string()).await;
    browser
        .execute(
            &format!(
                "const f = document.getElementById('hook-url'); f.value = '{CLOSED_HOOK_URL}?second';                 f.form.submit(); return true;"
            ),
            vec![],
        )
        .await;
    browser.wait_for_element("#secret").await;
    scan.check(browser, "endpoint-hook-secret", "endpoint-hook-secret".to_string()).await;
    browser.goto(&scan.server.url(endpoint_path)).await;
    browser.execute("document.querySelector(\"form[action$='/test'] button\").click(); return true;", vec![]).await;
    browser.wait_for_element("#hook-test-outcome").await;
    scan.check(browser, "endpoint-hook-tested", "endpoint-hook-tested".to_string()).await;
    scan.scanned += 3;
}

/// The scan's findings: the violations of every page, and how many pages the owner's scan saw.
struct Scan<'a> {
    axe: &'a str,
    server: &'a Server,
    failures: Vec<String>,
    scanned: usize,
}

impl<'a> Scan<'a> {
    fn new(axe: &'a str, server: &'a Server) -> Scan<'a> {
        Scan { axe, server, failures: Vec::new(), scanned: 0 }
    }

    /// Opens `path` and scans it, counted.
    async fn page(&mut self, browser: &Browser, name: &str, path: &str) {
        browser.goto(&self.server.url(path)).await;
        self.check(browser, name, format!("{name} ({path})")).await;
        self.scanned += 1;
    }

    /// Scans what the browser shows now (not counted) and keeps a screenshot `a11y-{name}`.
    async fn check(&mut self, browser: &Browser, name: &str, label: String) {
        let found = violations(browser, self.axe).await;
        browser.screenshot(&format!("a11y-{name}")).await;
        if !found.is_empty() {
            self.failures.push(format!("{label}:\n  {}", found.join("\n  ")));
        }
    }
}

/// The claimed todo's lease counts down (issue #12: "lease countdown").
async fn assert_the_lease_counts_down(browser: &Browser, world: &Fixture) {
    browser.goto(&world.server.url(&format!("/todos/{}", world.claimed_id))).await;
    let countdown = browser.text(".countdown").await;
    let counting = countdown
        .strip_prefix("(in ")
        .and_then(|rest| rest.strip_suffix(" s)"))
        .is_some_and(|rest| rest.split(" min ").all(|n| n.parse::<u32>().is_ok()) && rest.split(" min ").count() <= 2);
    assert!(counting, "the lease countdown reads {countdown:?}");
}

/// The policy editor showing a field error: submit an unknown zone through the form.
async fn show_the_editor_with_a_field_error(browser: &Browser, world: &Fixture, budget_path: &str) {
    browser.goto(&world.server.url(budget_path)).await;
    browser
        .execute(
            "const tz = document.getElementById('tz');\
             tz.value = 'Mars/Olympus_Mons'; tz.form.submit(); return true;",
            vec![],
        )
        .await;
    // The refusal answers on the same path: wait for its page, not for the old one.
    browser.wait_for_element("#tz-error").await;
    let error_shown = browser.execute("return document.body.innerText.includes('Mars/Olympus_Mons');", vec![]).await;
    assert_eq!(error_shown, json!(true), "the editor should echo the refused zone next to its field");
}

/// The vend wizard (issue #29), each step scanned as the owner walks it: the details with a
/// field error, the grant, the consent screen and the page that shows the token once.
async fn scan_the_vend_wizard(scan: &mut Scan<'_>, browser: &Browser) {
    scan.page(browser, "vend-details", "/endpoints/new").await;
    let next = "document.querySelector('button[value=next]').click(); return true;";
    browser
        .execute(
            &format!("document.getElementById('name').value = 'scanner'; document.getElementById('queues').value = 'not a queue'; {next}"),
            vec![],
        )
        .await;
    browser.wait_for_element("#queues-error").await;
    scan.check(browser, "vend-details-error", "vend-details-error".to_string()).await;
    browser.execute(&format!("document.getElementById('queues').value = 'inbox'; {next}"), vec![]).await;
    browser.wait_for_element("#verb-list_todos").await;
    scan.check(browser, "vend-grant", "vend-grant".to_string()).await;
    browser.execute(next, vec![]).await;
    browser.wait_for_element("button[value=create]").await;
    scan.check(browser, "vend-consent", "vend-consent".to_string()).await;
    browser.execute("document.querySelector('button[value=create]').click(); return true;", vec![]).await;
    browser.wait_for_element("#token").await;
    scan.check(browser, "vend-done", "vend-done".to_string()).await;
    scan.scanned += 4;
}

/// The policy editor's preview of a budget (issue #29), over the fixture's real claims.
async fn show_the_budget_preview(browser: &Browser, world: &Fixture, budget_path: &str) {
    browser.goto(&world.server.url(budget_path)).await;
    browser.execute("document.querySelector('button[value=preview]').click(); return true;", vec![]).await;
    browser.wait_for_element("#preview-deferred").await;
}

/// The webhook and token forms (issue #29) showing a field error, and the pages that show a
/// secret once (with their copy buttons, JavaScript being on).
async fn scan_the_secret_forms(scan: &mut Scan<'_>, browser: &Browser, scope: &str) {
    browser.goto(&scan.server.url("/webhooks/new")).await;
    let submit = "document.querySelector('main form button[type=submit]').click(); return true;";
    browser
        .execute(
            &format!("document.getElementById('name').value = 'scanner'; document.getElementById('targets').value = 'nowhere'; {submit}"),
            vec![],
        )
        .await;
    browser.wait_for_element("#targets-error").await;
    scan.check(browser, "webhook-new-error", "webhook-new-error".to_string()).await;
    browser.execute(&format!("document.getElementById('targets').value = '{scope}/inbox'; {submit}"), vec![]).await;
    browser.wait_for_element("#secret").await;
    scan.check(browser, "webhook-secret", "webhook-secret".to_string()).await;
    browser.goto(&scan.server.url("/tokens")).await;
    let mint = "document.querySelector('form[action=\"/tokens/new\"] button').click(); return true;";
    browser.execute(&format!("document.getElementById('expires_in_days').value = 'soon'; {mint}"), vec![]).await;
    browser.wait_for_element("#expires_in_days-error").await;
    scan.check(browser, "tokens-error", "tokens-error".to_string()).await;
    browser.execute(&format!("document.getElementById('expires_in_days').value = ''; {mint}"), vec![]).await;
    browser.wait_for_element("#token").await;
    scan.check(browser, "token-once", "token-once".to_string()).await;
    scan.scanned += 4;
}

/// The scan itself must see violations: an image without text and a button without a name,
/// added to a page, are reported, so a silent scan means a clean page, not a dead scan.
async fn assert_the_scan_sees_a_planted_violation(browser: &Browser, world: &Fixture, axe: &str) {
    browser.goto(&world.server.url("/")).await;
    browser
        .execute(
            "const img = document.createElement('img'); img.src = '/assets/board.css';\
             const button = document.createElement('button');\
             document.getElementById('main').append(img, button); return true;",
            vec![],
        )
        .await;
    let canary = violations(browser, axe).await;
    for rule in ["image-alt", "button-name"] {
        assert!(canary.iter().any(|line| line.starts_with(rule)), "axe missed {rule}: {canary:?}");
    }
}

// SPEC-0030 REQ-11 (Accessibility: WCAG 2.1 AA across every page)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_every_board_page_passes_axe_core_at_wcag_21_aa() {
    let axe = axe_source();
    let world = fixture().await;
    let driver = Driver::start().await;
    let browser = driver.session(Js::On).await;
    let mut scan = Scan::new(&axe, &world.server);

    // Signed out: the sign-in form, with and without its error, and a login link's page.
    scan.page(&browser, "login", "/login").await;
    let link = login_link(&world.server.base, &world.db_url, "ada");
    let link_path = link.strip_prefix(&world.server.base).expect("link on this server").to_string();
    scan.page(&browser, "login-link", &link_path).await;
    browser.sign_in(&world.server.base, &world.db_url, "ada").await;

    let queue = |queue: &str, rest: &str| format!("/queues/{}/{queue}{rest}", world.scope);
    let endpoint = world.scope.strip_prefix("endpoint:").expect("an endpoint scope");
    let pages = [
        ("board", "/".to_string()),
        ("queue-exhausted", queue("metered", "")),
        ("queue-no-budget", queue("inbox", "")),
        ("todo-pending", format!("/todos/{}", world.pending_id)),
        ("todo-claimed", format!("/todos/{}", world.claimed_id)),
        ("clear-confirm", queue("metered", "/clear")),
        ("policy-editor", queue("metered", "/budget")),
        ("policy-editor-new", queue("inbox", "/budget")),
        ("policy-clear-confirm", queue("metered", "/budget/clear")),
        ("audit", queue("metered", "/audit")),
        ("capacity-admin", "/settings/capacity".to_string()),
        ("endpoints", "/endpoints".to_string()),
        ("endpoint", format!("/endpoints/{endpoint}")),
        ("endpoint-delete", format!("/endpoints/{endpoint}/delete")),
        ("webhooks", "/webhooks".to_string()),
        ("webhook-new", "/webhooks/new".to_string()),
        ("webhook-delete", format!("/webhooks/{}/delete", world.webhook_id)),
        ("tokens", "/tokens".to_string()),
        ("not-found", queue("nowhere", "")),
    ];
    for (name, path) in &pages {
        scan.page(&browser, name, path).await;
    }

    assert_the_lease_counts_down(&browser, &world).await;
    show_the_editor_with_a_field_error(&browser, &world, &queue("metered", "/budget")).await;
    scan.check(&browser, "policy-editor-error", "policy-editor-error".to_string()).await;
    scan.scanned += 1;
    scan_the_vend_wizard(&mut scan, &browser).await;
    scan_the_endpoint_push_states(&mut scan, &browser, &format!("/endpoints/{endpoint}")).await;
    show_the_budget_preview(&browser, &world, &queue("metered", "/budget")).await;
    scan.check(&browser, "policy-preview", "policy-preview".to_string()).await;
    scan.scanned += 1;
    scan_the_secret_forms(&mut scan, &browser, &world.scope).await;
    browser.close().await;

    // A human who may read but not change the capacity setting sees another form of the page.
    let member = driver.session(Js::On).await;
    member.sign_in(&world.server.base, &world.db_url, "max").await;
    for (name, path) in [("board-empty", "/"), ("capacity-member", "/settings/capacity")] {
        member.goto(&world.server.url(path)).await;
        scan.check(&member, name, format!("{name} ({path})")).await;
    }
    assert_the_scan_sees_a_planted_violation(&member, &world, &axe).await;
    member.close().await;

    let Scan { scanned, failures, .. } = scan;
    assert!(scanned >= pages.len() + 16, "scanned only {scanned} pages");
    assert!(failures.is_empty(), "axe-core found WCAG 2.1 AA violations:\n{}", failures.join("\n"));
    let shots: Vec<PathBuf> = std::fs::read_dir(screenshot_dir())
        .expect("screenshot dir")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("a11y-")))
        .collect();
    assert!(shots.len() >= pages.len(), "expected a screenshot per page, found {shots:?}");
}
