//! Issue #29, item 2: presence, shift and notify hooks on the owner's endpoint page, in a real
//! browser (headless Chromium over WebDriver, JavaScript off) against the real binary on real
//! PostgreSQL. What the page sets shows through the operator API; an invalid shift is 400 with
//! its error at the field and changes nothing; a hook's signing secret is shown once, on a page
//! no cache keeps; a test call to a local receiver shows its outcome; another human's endpoint
//! answers every form with the same 404 as an unknown one; a forged form is 403 and changes
//! nothing. Screenshots land in `target/board-screenshots/endpoint-push-*.png`.

mod board_support;
mod push_support;
mod support;

use board_support::world::{Ep, Web, World, fill};
use board_support::{Browser, Driver, Js};
use fantoccini::Locator;
use push_support::{Answer, Receiver};
use serde_json::{Value, json};
use std::time::Duration;

/// Lets hooks call the test's receiver on loopback.
const ALLOW_PRIVATE: (&str, &str) = ("SWITCHBOARD_HOOKS_ALLOW_PRIVATE", "1");
const SHIFT: &str = "TZ=America/Los_Angeles Mon-Fri 09:00-17:00";

/// Clicks the first element matching `css`.
async fn click(browser: &Browser, css: &str) {
    browser
        .client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("find {css}: {e}"))
        .click()
        .await
        .expect(css);
}

/// Waits until the page's `css` element reads something containing `wanted` (a form that
/// answers on the path it was on is only known to be done once its page shows).
async fn wait_for_text(browser: &Browser, css: &str, wanted: &str) -> String {
    let deadline = tokio::time::Instant::now() + board_support::BROWSER_WAIT;
    loop {
        let found = browser.client.find(Locator::Css(css)).await.ok();
        if let Some(element) = found
            && let Ok(text) = element.text().await
            && text.contains(wanted)
        {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{css} never read {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /api/v1/endpoints/{ref}/presence` as `token`.
async fn presence(world: &World, token: &str, ep: &Ep) -> Value {
    let (status, body) = world.api.get(&format!("/api/v1/endpoints/{}/presence", ep.slug), token).await;
    assert_eq!(status, 200, "presence: {body}");
    body
}

/// `GET /api/v1/endpoints/{ref}/hooks` as `token`: the hooks.
async fn hooks(world: &World, token: &str, ep: &Ep) -> Vec<Value> {
    let (status, body) = world.api.get(&format!("/api/v1/endpoints/{}/hooks", ep.slug), token).await;
    assert_eq!(status, 200, "hooks: {body}");
    body["hooks"].as_array().expect("hooks").clone()
}

/// The signed-in browser's CSRF token (the sign-out form carries it on every page) and a plain
/// HTTP client with its session, for exact statuses, headers and bytes.
async fn web_of(world: &World, browser: &Browser) -> (String, Web) {
    let csrf = browser
        .execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    (csrf, Web::new(world.base(0), &browser.session_cookie().await.expect("cookie")))
}

/// The `<p>` whose id is `id` in a page's HTML, up to its end (empty when there is none).
fn paragraph<'a>(html: &'a str, id: &str) -> &'a str {
    let Some(start) = html.find(&format!("id=\"{id}\"")) else { return "" };
    let rest = &html[start..];
    &rest[..rest.find("</p>").unwrap_or(rest.len())]
}

/// `form` urlencoded.
fn encode(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&")
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sets the endpoint out by the owner's override from the page, checks the API says so (until
/// cleared, with no shift), then clears the override and checks it is in by default again.
async fn set_out_then_clear_from_the_page(world: &World, browser: &Browser, ep: &Ep) {
    click(browser, "#presence-out").await;
    browser.press_button("Set presence").await;
    wait_for_text(browser, "#presence-now", "out").await;
    let answer = presence(world, &world.owner, ep).await;
    assert_eq!((answer["presence"].as_str(), answer["source"].as_str()), (Some("out"), Some("override")), "{answer}");
    assert_eq!(answer["until"], Value::Null, "with no shift, out lasts until cleared: {answer}");
    browser.press_button("Clear the override").await;
    wait_for_text(browser, "#presence-now", "by default").await;
    let answer = presence(world, &world.owner, ep).await;
    assert_eq!((answer["presence"].as_str(), answer["source"].as_str()), (Some("in"), Some("default")), "{answer}");
}

/// Saves a shift in an unknown zone from the page: the error names the zone at the field, the
/// typed text is kept and the field is marked invalid.
async fn refuse_an_unknown_zone_at_the_field(browser: &Browser) {
    fill(browser, "shift", "TZ=Mars/Olympus_Mons Mon-Fri 09:00-17:00").await;
    browser.press_button("Save the shift").await;
    browser.wait_for_element("#shift-error").await;
    let error = browser.text("#shift-error").await;
    assert!(error.contains("Mars/Olympus_Mons"), "the error names the zone: {error}");
    assert_eq!(browser.field_value("shift").await, "TZ=Mars/Olympus_Mons Mon-Fri 09:00-17:00", "the text was lost");
    let marked = browser
        .execute(
            "const f = document.getElementById('shift'); \
             return [f.getAttribute('aria-invalid'), f.getAttribute('aria-describedby')];",
            vec![],
        )
        .await;
    assert_eq!(marked, json!(["true", "shift-hint shift-error"]), "the field is not marked invalid");
    browser.screenshot("endpoint-push-shift-error").await;
}

/// Posts a bad shift, a bad presence and a clock-in for 30 seconds over plain HTTP to the endpoint
/// page's forms: each is 400 with its error at its field.
async fn refuse_bad_presence_forms_over_plain_http(web: &Web, csrf: &str, page: &str) {
    let refused = web.post(&format!("{page}/shift"), &encode(&[("csrf", csrf), ("shift", "Mon-Fri 9-5")])).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.contains("id=\"shift-error\"") && refused.body.contains("Mon-Fri 9-5"), "{}", refused.body);
    let refused = web.post(&format!("{page}/presence"), &encode(&[("csrf", csrf), ("presence", "away")])).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.contains("id=\"presence-error\""), "{}", refused.body);
    let refused = web
        .post(&format!("{page}/presence"), &encode(&[("csrf", csrf), ("presence", "in"), ("for_seconds", "30")]))
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.contains("id=\"for_seconds-error\""), "{}", refused.body);
}

// Issue #29: presence and a shift set from the page, with JavaScript off, are what the API
// answers; an invalid shift shows its error at the field, keeps the typed text and changes
// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_and_shift_set_from_the_page_show_through_the_api() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let page = format!("/endpoints/{}", ep.id);
    browser.goto(&world.url(&page)).await;
    let now = browser.text("#presence-now").await;
    assert!(now.starts_with("in") && now.contains("by default"), "a new endpoint is in by default: {now}");
    assert_eq!(browser.text("#presence-shift").await, "none");
    browser.screenshot("endpoint-push-presence").await;

    // Out, by the owner's override: the API says so, and the page offers to clear it.
    set_out_then_clear_from_the_page(&world, &browser, &ep).await;

    // A shift, typed as the hint shows it.
    fill(&browser, "shift", SHIFT).await;
    browser.press_button("Save the shift").await;
    wait_for_text(&browser, "#presence-shift", "Mon-Fri").await;
    let answer = presence(&world, &world.owner, &ep).await;
    assert_eq!(answer["shift"], SHIFT, "{answer}");
    assert_eq!(answer["source"], "shift", "{answer}");
    assert!(answer["until"].is_string(), "a shift always has a next change: {answer}");
    assert!(browser.text("#presence-until").await.contains("in the shift's zone"));

    // In for two hours: never past the shift's next change, as the API's clock-in rules say.
    click(&browser, "#presence-in").await;
    click(&browser, "#for_seconds option[value='7200']").await;
    browser.press_button("Set presence").await;
    wait_for_text(&browser, "#presence-now", "override").await;
    let answer = presence(&world, &world.owner, &ep).await;
    assert_eq!((answer["presence"].as_str(), answer["source"].as_str()), (Some("in"), Some("override")), "{answer}");
    let until = chrono::DateTime::parse_from_rfc3339(answer["until"].as_str().expect("until")).expect("rfc3339");
    let left = until.signed_duration_since(chrono::Utc::now()).num_seconds();
    assert!((0..=7200).contains(&left), "clocked in for {left} s, not at most two hours: {answer}");
    browser.screenshot("endpoint-push-shift").await;

    // An unknown zone: refused at the field, the text kept, nothing changed.
    let before = presence(&world, &world.owner, &ep).await;
    refuse_an_unknown_zone_at_the_field(&browser).await;
    assert_eq!(presence(&world, &world.owner, &ep).await, before, "a refused shift changed the presence");

    // The same refusal over plain HTTP: 400, the endpoint page with the error at `shift`.
    let (csrf, web) = web_of(&world, &browser).await;
    refuse_bad_presence_forms_over_plain_http(&web, &csrf, &page).await;
    assert_eq!(presence(&world, &world.owner, &ep).await, before, "a refused form changed the presence");

    // Saved forms answer 303 to the page; an empty shift removes it.
    let saved = web.post(&format!("{page}/shift"), &encode(&[("csrf", &csrf), ("shift", "")])).await;
    assert_eq!((saved.status, saved.location.as_deref()), (303, Some(format!("{page}#presence").as_str())));
    assert_eq!(presence(&world, &world.owner, &ep).await["shift"], Value::Null);
    browser.close().await;
}

// Issue #29: a hook added from the page is listed by the API and its secret shown once, on a
// page no cache keeps; testing it calls a local receiver and shows the outcome; removing it
// removes it from the API's listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_added_tested_and_removed_from_the_page() {
    let world = World::start_with(1, &[ALLOW_PRIVATE]).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let receiver = Receiver::start(Answer::Ok).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let page = format!("/endpoints/{}", ep.id);
    browser.goto(&world.url(&page)).await;
    assert!(browser.text("#no-hooks").await.contains("No hooks"));

    // A URL the hook rules refuse: the error at the field, the text kept, nothing added.
    fill(&browser, "hook-url", "ftp://example.com/hook").await;
    browser.press_button("Add the hook").await;
    browser.wait_for_element("#hook-url-error").await;
    assert!(browser.text("#hook-url-error").await.contains("http or https"));
    assert_eq!(browser.field_value("hook-url").await, "ftp://example.com/hook");
    assert_eq!(hooks(&world, &world.owner, &ep).await, Vec::<Value>::new(), "a refused hook was added");

    // Added: the secret once, then the API lists the hook (never its secret).
    fill(&browser, "hook-url", &receiver.url).await;
    click(&browser, "#ignore_presence").await;
    browser.press_button("Add the hook").await;
    browser.wait_for_element("#secret").await;
    let secret = browser.field_value("secret").await;
    assert!(secret.starts_with("whsec_"), "the secret shown: {secret}");
    assert_eq!(browser.field_value("hook-url").await, receiver.url);
    browser.screenshot("endpoint-push-hook-secret").await;
    let listed = hooks(&world, &world.owner, &ep).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((&listed[0]["url"], &listed[0]["ignore_presence"]), (&json!(receiver.url), &json!(true)));
    let hook_id = listed[0]["id"].as_str().expect("hook id").to_string();
    browser.goto(&world.url(&page)).await;
    let shown = browser.text(&format!("#hook-{hook_id}")).await;
    assert!(shown.contains(&receiver.url) && shown.contains("enabled"), "the hook's row: {shown}");
    let source = browser.client.source().await.expect("page source");
    assert!(!source.contains(&secret), "the endpoint page shows the secret again");

    // Tested: the receiver gets a signed test call and the page says it was delivered.
    click(&browser, &format!("#hook-{hook_id} form[action$='/test'] button")).await;
    let outcome = wait_for_text(&browser, "#hook-test-outcome", "delivered").await;
    assert!(outcome.contains("HTTP 200") && outcome.contains(&receiver.url), "outcome: {outcome}");
    let hits = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!((&hits[0].body["type"], &hits[0].body["hook_id"]), (&json!("hook.test"), &json!(hook_id)));
    browser.screenshot("endpoint-push-hook-tested").await;

    // Over plain HTTP: the secret page is never stored; a failing receiver's outcome is shown.
    let (csrf, web) = web_of(&world, &browser).await;
    let failing = Receiver::start(Answer::Fail).await;
    let request = web
        .http
        .post(format!("{}{page}/hooks", web.base))
        .header("cookie", format!("sb_session={}", web.cookie))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", &csrf), ("url", &failing.url)]));
    let answer = request.send().await.expect("POST hooks");
    assert_eq!(answer.status().as_u16(), 200);
    let cache = answer.headers().get("cache-control").and_then(|v| v.to_str().ok()).map(str::to_string);
    assert_eq!(cache.as_deref(), Some("no-store"), "the secret page may be cached");
    assert!(answer.text().await.expect("body").contains("whsec_"));
    let failing_id = hooks(&world, &world.owner, &ep)
        .await
        .iter()
        .find(|h| h["url"] == failing.url.as_str())
        .and_then(|h| h["id"].as_str())
        .expect("the second hook")
        .to_string();
    let tested = web.post(&format!("{page}/hooks/{failing_id}/test"), &encode(&[("csrf", &csrf)])).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    let outcome = paragraph(&tested.body, "hook-test-outcome");
    assert!(outcome.contains("<strong>failed</strong>") && outcome.contains("500"), "outcome: {outcome}");
    let removed = web.post(&format!("{page}/hooks/{failing_id}/remove"), &encode(&[("csrf", &csrf)])).await;
    assert_eq!((removed.status, removed.location.as_deref()), (303, Some(format!("{page}#hooks").as_str())));

    // Removed from the page: gone from the API's listing.
    browser.goto(&world.url(&page)).await;
    click(&browser, &format!("#hook-{hook_id} form[action$='/remove'] button")).await;
    browser.wait_for_element("#no-hooks").await;
    assert_eq!(hooks(&world, &world.owner, &ep).await, Vec::<Value>::new(), "the hook was not removed");
    browser.close().await;
}

// Issue #29, SPEC-0030 REQ-11: another human's endpoint answers every push form byte for byte
// as an unknown endpoint does, and changes nothing; so does another endpoint's hook id. A forged
// CSRF token is 403 and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_humans_endpoint_push_forms_are_the_same_404_and_forged_forms_change_nothing() {
    let world = World::start_with(1, &[ALLOW_PRIVATE]).await;
    let receiver = Receiver::start(Answer::Ok).await;
    let stranger = world.human("stranger");
    let theirs = world.vend(&stranger, "private", &["secret"]).await;
    let (status, body) = world
        .api
        .post(&format!("/api/v1/endpoints/{}/hooks", theirs.slug), &stranger, json!({"url": receiver.url}))
        .await;
    assert_eq!(status, 201, "{body}");
    let their_hook = body["hook"]["id"].as_str().expect("hook id").to_string();
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let (csrf, web) = web_of(&world, &browser).await;
    browser.close().await;
    let their_presence = presence(&world, &stranger, &theirs).await;
    let their_hooks = hooks(&world, &stranger, &theirs).await;

    let forms = |csrf: &str, hook: &str| {
        vec![
            ("/presence".to_string(), encode(&[("csrf", csrf), ("presence", "out")])),
            ("/presence/clear".to_string(), encode(&[("csrf", csrf)])),
            ("/shift".to_string(), encode(&[("csrf", csrf), ("shift", SHIFT)])),
            ("/hooks".to_string(), encode(&[("csrf", csrf), ("url", &receiver.url)])),
            (format!("/hooks/{hook}/test"), encode(&[("csrf", csrf)])),
            (format!("/hooks/{hook}/remove"), encode(&[("csrf", csrf)])),
        ]
    };
    for reference in [&theirs.id, &theirs.slug] {
        for (suffix, form) in forms(&csrf, &their_hook) {
            let foreign = web.post(&format!("/endpoints/{reference}{suffix}"), &form).await;
            let unknown = web.post(&format!("/endpoints/no-such-endpoint{suffix}"), &form).await;
            assert_eq!(foreign.status, 404, "POST foreign{suffix}: {foreign:?}");
            assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "POST {suffix} differs");
        }
    }
    // Their hook id under my endpoint is the same 404 as a hook id that does not exist.
    let mine = world.vend(&world.owner, "research", &["inbox"]).await;
    for action in ["test", "remove"] {
        let form = encode(&[("csrf", &csrf)]);
        let foreign = web.post(&format!("/endpoints/{}/hooks/{their_hook}/{action}", mine.id), &form).await;
        let unknown = web.post(&format!("/endpoints/{}/hooks/no-such-hook/{action}", mine.id), &form).await;
        assert_eq!(foreign.status, 404, "{action} their hook: {foreign:?}");
        assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "{action} differs");
    }
    assert_eq!(presence(&world, &stranger, &theirs).await, their_presence, "a refused form changed their presence");
    assert_eq!(hooks(&world, &stranger, &theirs).await, their_hooks, "a refused form changed their hooks");
    assert!(receiver.hits().is_empty(), "a refused test called their hook: {:?}", receiver.hits());

    // My own endpoint, with a forged token: 403 for every form, and nothing changes.
    let (status, body) = world
        .api
        .post(&format!("/api/v1/endpoints/{}/hooks", mine.slug), &world.owner, json!({"url": receiver.url}))
        .await;
    assert_eq!(status, 201, "{body}");
    let my_hook = body["hook"]["id"].as_str().expect("hook id").to_string();
    let my_presence = presence(&world, &world.owner, &mine).await;
    let my_hooks = hooks(&world, &world.owner, &mine).await;
    for (suffix, form) in forms("forged", &my_hook) {
        let forged = web.post(&format!("/endpoints/{}{suffix}", mine.id), &form).await;
        assert_eq!(forged.status, 403, "forged POST {suffix}: {forged:?}");
    }
    assert_eq!(presence(&world, &world.owner, &mine).await, my_presence, "a forged form changed my presence");
    assert_eq!(hooks(&world, &world.owner, &mine).await, my_hooks, "a forged form changed my hooks");
    assert!(receiver.hits().is_empty(), "a forged test called my hook: {:?}", receiver.hits());
}

// Issue #29: the endpoint page lists its agent's MCP sessions, last seen first: none before an
// agent connects, then the session its `initialize` opened, with no stream open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_page_lists_its_last_seen_mcp_sessions() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let page = format!("/endpoints/{}", ep.id);
    browser.goto(&world.url(&page)).await;
    assert_eq!(browser.text("#sessions-none").await, "No agent has connected over MCP yet.");

    let params =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let (status, answer) = world.api.rpc(&ep.slug, &ep.key, "initialize", params).await;
    assert_eq!(status, 200, "{answer}");
    browser.goto(&world.url(&page)).await;
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('#sessions tbody tr')].map(r => r.cells[2].textContent.trim());",
            vec![],
        )
        .await;
    assert_eq!(rows, json!(["closed"]), "one session, its stream not open");
    browser.close().await;
}
