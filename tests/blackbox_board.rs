//! SPEC-0030 REQ-11 (issue #12): the owner's web board in a real browser (headless Chromium
//! over WebDriver) against the real binary on real PostgreSQL. What the owner sees (used of
//! limit, the reset time in the policy's zone and their own, the deferred chip), live header
//! updates across replicas, the policy editor without JavaScript and by keyboard alone, CSRF,
//! foreign queues as 404, sign-out, and "clear all" through its confirmation page.
//!
//! Screenshots land in `target/board-screenshots/`.

mod board_support;
mod support;

use board_support::world::{
    Ep, LA, Web, World, claim_next, daily, fill, focused, next_midnight, press, read_row, select_all,
};
use board_support::{BROWSER_TZ, BROWSER_WAIT, Browser, Driver, Js};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::Client;

/// A day budget of 100 on `research / investigations`, spent with real claims the way agents
/// do, and 12 more todos that wait; returns the endpoint and the waiting todos' ids.
async fn spend_a_day_of_research(world: &World) -> (Ep, Vec<String>) {
    let ep = world.vend(&world.owner, "research", &["investigations"]).await;
    world.policy(&world.owner, &ep, "investigations", daily(100, "America/Los_Angeles")).await;
    world.create_many(&world.owner, &ep, "investigations", "spent", 100).await;
    // Spend the whole day's budget with real claims, the way agents do.
    for chunk in 0..10 {
        let claims = futures::future::join_all((0..10).map(|_| claim_next(&world.api, &ep))).await;
        assert!(claims.iter().all(Option::is_some), "claim round {chunk} came back empty: {claims:?}");
    }
    let waiting = world.create_many(&world.owner, &ep, "investigations", "waiting", 12).await;
    assert_eq!(claim_next(&world.api, &ep).await, None, "a 101st claim was admitted");
    let (status, detail) = world.admission(&world.owner, &ep, "investigations").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["usage"]["used"], 100, "{detail}");
    (ep, waiting)
}

/// The `research / investigations` queue page's header, once the script has shown its reset
/// time in the viewer's zone: `{header, local}`.
async fn localised_research_header(browser: &Browser) -> Value {
    let deadline = Instant::now() + BROWSER_WAIT;
    loop {
        let header = browser
            .execute(
                "const h = document.querySelector('.live-header'); const t = h.querySelector('time.local');\
                 return {header: h.textContent.replace(/\\s+/g, ' ').trim(), local: t ? t.textContent : null};",
                vec![],
            )
            .await;
        if header["local"].as_str().is_some_and(|t| !t.contains("UTC")) {
            break header;
        }
        assert!(Instant::now() < deadline, "the reset time was never shown in the viewer's zone: {header}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// From the board, the queue's page, by its link in the table.
async fn open_the_research_queue(browser: &Browser, ep: &Ep) {
    browser
        .client
        .find(Locator::LinkText("research / investigations"))
        .await
        .expect("the queue's link in the board table")
        .click()
        .await
        .expect("open queue");
    browser.wait_for_path(&format!("/queues/endpoint:{}/investigations", ep.id)).await;
}

/// The queue page: every waiting todo's row says why it waits.
async fn assert_the_queue_page_says_why_each_todo_waits(browser: &Browser, waiting: &[String], chips: &[String]) {
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('table.todos-table tbody tr')].map(r => \
             ({title: r.cells[0].textContent.trim(), state: r.cells[1].textContent.trim(), \
               chip: r.cells[2].textContent.trim()}));",
            vec![],
        )
        .await;
    let rows = rows.as_array().expect("rows");
    let waiting_rows: Vec<&Value> = rows.iter().filter(|r| r["state"] == "pending").collect();
    assert_eq!(waiting_rows.len(), waiting.len(), "{rows:?}");
    for row in &waiting_rows {
        assert!(chips.iter().any(|c| row["chip"] == c.as_str()), "row without the deferred chip: {row}");
    }
    assert!(rows.iter().filter(|r| r["state"] == "claimed").all(|r| r["chip"] == ""), "a claimed row has a chip");
    let queue_header = browser.text(".live-header").await;
    assert!(queue_header.contains("100 of 100 used"), "{queue_header}");
    browser.screenshot("deferred-queue").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_the_owner_sees_why_work_waits_used_of_limit_reset_times_and_deferred_chips() {
    let world = World::start(1).await;
    let (ep, waiting) = spend_a_day_of_research(&world).await;

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let before = next_midnight(LA, Utc::now());
    // The board's row: the status in words, used of limit, in flight and pending.
    browser.goto(&world.url("/board")).await;
    let row = read_row(&browser, "research / investigations").await;
    assert_eq!(row["status"], "exhausted", "{row}");
    assert_eq!(row["used"], "100 of 100 used", "{row}");
    assert_eq!(row["in_flight"], "100 in flight", "{row}");
    assert_eq!(row["pending"], "12 pending · unlimited", "{row}");
    browser.screenshot("board").await;

    open_the_research_queue(&browser, &ep).await;
    let shown = localised_research_header(&browser).await;
    let after = next_midnight(LA, Utc::now());
    let header = shown["header"].as_str().expect("header text");
    assert!(header.contains("status: exhausted"), "{header}");
    assert!(header.contains("100 of 100 used"), "{header}");

    // The reset time in the policy's zone ("00:00 PT on Wed 2 Dec")...
    let resets = [before, after];
    let zone_texts: Vec<String> =
        resets.iter().map(|at| at.with_timezone(&LA).format("%H:%M PT on %a %-d %b").to_string()).collect();
    assert!(
        zone_texts.iter().any(|t| header.contains(&format!("resets at {t} (America/Los_Angeles)"))),
        "expected one of {zone_texts:?} in {header}"
    );
    assert!(zone_texts.iter().all(|t| t.starts_with("00:00 PT on ")), "{zone_texts:?}");
    // ...and in the viewer's own (the browser runs in Asia/Tokyo: UTC+9, never daylight time).
    let local = shown["local"].as_str().expect("local time text");
    let viewer_zone: Tz = BROWSER_TZ.parse().expect("browser zone");
    assert!(local.contains("GMT+9"), "the viewer's time is not in their zone: {local}");
    assert!(
        resets.iter().any(|at| {
            let there = at.with_timezone(&viewer_zone);
            local.contains(&there.format("%I:%M %p").to_string()) && local.contains(&there.format("%b %-d").to_string())
        }),
        "the viewer's time {local} is not the reset instant {resets:?} in {BROWSER_TZ}"
    );
    assert!(header.contains(&format!("your time: {local}")), "{header}");

    // Twelve waiting todos, each saying why it waits and until when, and the exact counts.
    let chips: Vec<String> = resets
        .iter()
        .map(|at| format!("deferred · budget · eligible {} PT", at.with_timezone(&LA).format("%H:%M")))
        .collect();
    assert_the_queue_page_says_why_each_todo_waits(&browser, &waiting, &chips).await;
    let counts = browser.text("#todo-counts").await;
    assert!(counts.starts_with("112 todos: 12 pending, 100 claimed"), "{counts}");
    browser.close().await;
}

// SPEC-0030 REQ-11: "The header counts MUST update live" — a claim committed on another replica
// shows in the open board's header without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_a_claim_on_another_replica_updates_the_open_boards_header_without_a_reload() {
    let world = World::start(2).await;
    let ep = world.vend(&world.owner, "research", &["investigations"]).await;
    world.policy(&world.owner, &ep, "investigations", daily(10, "America/Los_Angeles")).await;
    world.create_many(&world.owner, &ep, "investigations", "todo", 3).await;

    let driver = Driver::start().await;
    // The board is open on replica 0; the agent claims through replica 1.
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    browser.goto(&world.url("/board")).await;
    let header_text = "return document.querySelector('tr.live-header').textContent;";
    let shown = browser.execute(header_text, vec![]).await;
    assert!(shown.as_str().is_some_and(|t| t.contains("0 of 10 used")), "{shown}");
    // Issue #51: each live row is a polite live region, so a screen reader hears its counts change.
    let live = "return Array.from(document.querySelectorAll('tr.live-header')).map(r => r.getAttribute('aria-live'));";
    assert_eq!(browser.execute(live, vec![]).await, json!(["polite"]), "the front page's live counts");
    // A mark on this document: a reload or navigation would lose it.
    browser.execute("window.__sbSameDocument = 'kept';", vec![]).await;
    let path_before = browser.path().await;

    let replica = Client::new(world.base(1));
    let claimed = Instant::now();
    assert!(claim_next(&replica, &ep).await.is_some(), "the claim on replica 1 found nothing");
    let deadline = claimed + Duration::from_secs(10);
    let took = loop {
        let shown = browser.execute(header_text, vec![]).await;
        if shown.as_str().is_some_and(|t| t.contains("1 of 10 used")) {
            break claimed.elapsed();
        }
        assert!(Instant::now() < deadline, "the header still reads {shown} 10 s after the claim");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("header updated {took:?} after the claim on the other replica");
    let mark = browser.execute("return window.__sbSameDocument || null;", vec![]).await;
    assert_eq!(mark, "kept", "the page was reloaded or navigated, not updated in place");
    assert_eq!(browser.path().await, path_before);
    browser.close().await;
}

/// Clicks the policy editor's submit button.
async fn save_the_policy_form(browser: &Browser) {
    browser
        .client
        .find(Locator::Css("form.stacked button[type=submit]"))
        .await
        .expect("save")
        .click()
        .await
        .expect("save");
}

// SPEC-0030 REQ-11 (Accessibility Requirements): the policy editor works with JavaScript off,
// saves what the API then shows, and puts a refused zone's error next to the zone field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_the_policy_editor_saves_without_javascript_and_shows_a_bad_zone_next_to_its_field() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["triage"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let queue_path = format!("/queues/endpoint:{}/triage", ep.id);
    let budget_path = format!("{queue_path}/budget");

    browser.goto(&world.url(&budget_path)).await;
    fill(&browser, "max_claims_per_window", "25").await;
    browser.client.find(Locator::Id("period")).await.expect("#period").select_by_value("day").await.expect("period");
    fill(&browser, "tz", "America/Los_Angeles").await;
    fill(&browser, "start", "06:30").await;
    fill(&browser, "max_in_flight", "3").await;
    save_the_policy_form(&browser).await;
    browser.wait_for_path(&queue_path).await;

    let (status, detail) = world.admission(&world.owner, &ep, "triage").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        detail["policy"],
        json!({"max_in_flight": 3, "max_claims_per_window": 25,
               "window": {"period": "day", "tz": "America/Los_Angeles", "start": "06:30"}}),
        "{detail}"
    );
    let header = browser.text(".live-header").await;
    assert!(header.contains("0 of 25 used") && header.contains("0 of 3 in flight"), "{header}");
    // Scripts really are off: the viewer-local time was never rewritten from its UTC text.
    let local = browser.text(".live-header time.local").await;
    assert!(local.contains("UTC"), "a script ran in a JavaScript-off session: {local}");

    // A zone that does not exist: refused, the error beside the zone field, the typing kept.
    browser.goto(&world.url(&budget_path)).await;
    fill(&browser, "max_claims_per_window", "30").await;
    fill(&browser, "tz", "Mars/Olympus_Mons").await;
    save_the_policy_form(&browser).await;
    // The refusal answers on the path it was posted from: wait for its page, not for the path.
    browser.wait_for_element("#tz-error").await;
    let shown = browser
        .execute(
            r#"
            const tz = document.getElementById('tz');
            const error = document.getElementById('tz-error');
            return {
                value: tz.value,
                invalid: tz.getAttribute('aria-invalid'),
                described_by: tz.getAttribute('aria-describedby'),
                next_to_field: tz.nextElementSibling === error,
                error: error ? error.textContent : null,
                claims: document.getElementById('max_claims_per_window').value,
                other_errors: [...document.querySelectorAll('.field-error, #general-error')]
                    .filter(e => e !== error).map(e => e.id),
            };
            "#,
            vec![],
        )
        .await;
    assert_eq!(shown["invalid"], "true", "{shown}");
    assert_eq!(shown["described_by"], "tz-error", "{shown}");
    assert_eq!(shown["next_to_field"], true, "{shown}");
    assert!(shown["error"].as_str().is_some_and(|e| !e.trim().is_empty()), "{shown}");
    assert_eq!(shown["other_errors"], json!([]), "{shown}");
    assert_eq!((shown["value"].as_str(), shown["claims"].as_str()), (Some("Mars/Olympus_Mons"), Some("30")), "{shown}");
    browser.screenshot("policy-editor").await;
    // Nothing was saved.
    let (_, after) = world.admission(&world.owner, &ep, "triage").await;
    assert_eq!(after["policy"], detail["policy"], "a refused save changed the policy");
    browser.close().await;
}

// SPEC-0030 REQ-11 (Accessibility Requirements): keyboard alone edits a budget, and after the save
// focus returns to the queue header's edit control.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_the_policy_editor_works_by_keyboard_alone_and_returns_focus_to_the_edit_control() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["triage"]).await;
    world.policy(&world.owner, &ep, "triage", daily(10, "America/Los_Angeles")).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let queue_path = format!("/queues/endpoint:{}/triage", ep.id);
    browser.goto(&world.url(&format!("{queue_path}/budget"))).await;

    // Tab to the limit field (it has autofocus, so normally no Tab is needed).
    let mut tabs = 0;
    while focused(&browser).await["id"] != "max_claims_per_window" {
        assert!(tabs < 40, "Tab never reached the limit field");
        press(&browser, &[char::from(Key::Tab)]).await;
        tabs += 1;
    }
    select_all(&browser).await;
    press(&browser, &['4', '0']).await;
    // Tab forward to "Save budget" and press Enter.
    let mut tabs = 0;
    while focused(&browser).await["text"] != "Save budget" {
        assert!(tabs < 20, "Tab never reached Save budget; focus on {}", focused(&browser).await);
        press(&browser, &[char::from(Key::Tab)]).await;
        tabs += 1;
    }
    press(&browser, &[char::from(Key::Enter)]).await;
    browser.wait_for_path(&queue_path).await;

    let deadline = Instant::now() + BROWSER_WAIT;
    loop {
        let now = focused(&browser).await;
        if now["id"] == "edit-budget" {
            break;
        }
        assert!(Instant::now() < deadline, "focus did not return to #edit-budget; it is on {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hash = browser.execute("return location.hash;", vec![]).await;
    assert_eq!(hash, "#edit-budget");
    let (status, detail) = world.admission(&world.owner, &ep, "triage").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["policy"], daily(40, "America/Los_Angeles"), "{detail}");
    assert!(browser.text(".live-header").await.contains("0 of 40 used"));
    browser.close().await;
}

// SPEC-0030 REQ-11 (base-system §6): every state-changing form needs the session's CSRF token;
// without it the board answers 403 and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_a_form_posted_without_its_csrf_token_is_refused_and_changes_nothing() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let ids = world.create_many(&world.owner, &ep, "inbox", "todo", 3).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let queue_path = format!("/queues/endpoint:{}/inbox", ep.id);

    // In the browser: the queue page's first Remove form, submitted without its csrf input.
    browser.goto(&world.url(&queue_path)).await;
    // The session's token, as every form of the page carries it (used by the control below).
    let csrf = browser
        .execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    let submitted = browser
        .execute(
            "const form = document.querySelector('table.todos-table form'); \
             form.querySelector('input[name=csrf]').remove(); \
             const action = form.getAttribute('action'); form.submit(); return action;",
            vec![],
        )
        .await;
    let action = submitted.as_str().expect("form action").to_string();
    browser.wait_for_path(&action).await;
    let message = browser.text("main").await;
    assert!(message.contains("This form has expired or did not come from this board"), "{message}");

    // The same and other forms from a plain client with the session cookie: 403, each.
    let cookie = browser.session_cookie().await.expect("session cookie");
    let web = Web::new(world.base(0), &cookie);
    let budget = "max_claims_per_window=1&period=day&tz=UTC&start=00%3A00&weekday=&max_in_flight=";
    let refused = [
        (action.clone(), String::new()),
        (action.clone(), "csrf=csrf_forged".to_string()),
        (format!("{queue_path}/clear"), String::new()),
        (format!("{queue_path}/clear"), format!("csrf={csrf}x")),
        (format!("{queue_path}/budget"), budget.to_string()),
        (format!("/todos/{}/claim", ids[0]), String::new()),
        ("/logout".to_string(), String::new()),
    ];
    for (path, form) in &refused {
        let page = web.post(path, form).await;
        assert_eq!(page.status, 403, "POST {path} [{form}] answered {page:?}");
    }
    assert_eq!(
        world.pending(&world.owner, &ep, "inbox").await,
        ids.iter().cloned().collect(),
        "a refused form changed the queue"
    );
    let (status, _) = world.admission(&world.owner, &ep, "inbox").await;
    assert_eq!(status, 404, "a refused form set a policy");
    // Still signed in: the refused sign-out did not sign out.
    assert_eq!(web.get("/board").await.status, 200);

    // The control: the same Remove with the session's token is accepted.
    let accepted = web.post(&action, &format!("csrf={csrf}")).await;
    assert_eq!((accepted.status, accepted.location.as_deref()), (303, Some(queue_path.as_str())), "{accepted:?}");
    assert_eq!(world.pending(&world.owner, &ep, "inbox").await.len(), 2);
    browser.close().await;
}

// SPEC-0030 REQ-11: anything the viewer may not see is the same 404 as something that does not
// exist — another human's queue pages answer byte for byte what an unknown queue's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_another_humans_queue_pages_are_the_same_404_as_an_unknown_queue() {
    let world = World::start(1).await;
    let mine = world.vend(&world.owner, "research", &["inbox"]).await;
    world.create(&world.owner, &mine, "inbox", "mine").await;
    let stranger = world.human("stranger");
    let theirs = world.vend(&stranger, "private", &["secret"]).await;
    let secret = world.create(&stranger, &theirs, "secret", "their secret").await;
    world.policy(&stranger, &theirs, "secret", daily(5, "UTC")).await;

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let web = Web::new(world.base(0), &browser.session_cookie().await.expect("cookie"));
    let own = web.get(&format!("/queues/endpoint:{}/inbox", mine.id)).await;
    assert_eq!(own.status, 200, "the owner's own queue page: {own:?}");

    let unknown_todo = format!("td_{:032x}", 0xdead_beef_u64);
    for reference in [&theirs.slug, &theirs.id] {
        for suffix in ["", "/budget", "/clear", "/audit"] {
            let foreign = web.get(&format!("/queues/endpoint:{reference}/secret{suffix}")).await;
            let unknown = web.get(&format!("/queues/endpoint:no-such-endpoint/secret{suffix}")).await;
            assert_eq!(foreign.status, 404, "GET foreign{suffix}: {foreign:?}");
            assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "GET {suffix} differs");
        }
    }
    let foreign = web.get(&format!("/todos/{secret}")).await;
    let unknown = web.get(&format!("/todos/{unknown_todo}")).await;
    assert_eq!(foreign.status, 404, "{foreign:?}");
    assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "todo pages differ");

    // Forms aimed at their queue, with my valid token: the same 404, and nothing changes.
    let csrf = browser
        .execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    let budget =
        format!("csrf={csrf}&max_claims_per_window=500&period=day&tz=UTC&start=00%3A00&weekday=&max_in_flight=");
    for (suffix, form) in [
        ("/clear".to_string(), format!("csrf={csrf}")),
        ("/budget".to_string(), budget.clone()),
        ("/budget/clear".to_string(), format!("csrf={csrf}")),
        (format!("/todos/{secret}/remove"), format!("csrf={csrf}")),
    ] {
        let foreign = web.post(&format!("/queues/endpoint:{}/secret{suffix}", theirs.slug), &form).await;
        let unknown = web.post(&format!("/queues/endpoint:no-such-endpoint/secret{suffix}"), &form).await;
        assert_eq!(foreign.status, 404, "POST foreign{suffix}: {foreign:?}");
        assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "POST {suffix} differs");
    }
    let foreign = web.post(&format!("/todos/{secret}/claim"), &format!("csrf={csrf}")).await;
    let unknown = web.post(&format!("/todos/{unknown_todo}/claim"), &format!("csrf={csrf}")).await;
    assert_eq!(foreign.status, 404, "{foreign:?}");
    assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "todo claim differs");
    assert_eq!(world.todo_state(&stranger, &secret).await, "pending");
    let (_, detail) = world.admission(&stranger, &theirs, "secret").await;
    assert_eq!(detail["policy"], daily(5, "UTC"), "{detail}");

    // And the browser shows that page, not the stranger's queue.
    browser.goto(&world.url(&format!("/queues/endpoint:{}/secret", theirs.slug))).await;
    let main = browser.text("main").await;
    assert!(main.contains("Not found.") && !main.contains("their secret"), "{main}");
    browser.close().await;
}

// SPEC-0030 REQ-11: signing out ends the session everywhere — the old cookie opens nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_sign_out_ends_the_session_and_the_old_cookie_no_longer_opens_the_board() {
    let world = World::start(1).await;
    world.vend(&world.owner, "research", &["inbox"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let cookie = browser.session_cookie().await.expect("cookie");
    let web = Web::new(world.base(0), &cookie);
    assert_eq!(web.get("/board").await.status, 200, "the cookie does not open the board before sign-out");

    browser
        .client
        .find(Locator::Css("form.signout button[type=submit]"))
        .await
        .expect("Sign out")
        .click()
        .await
        .expect("sign out");
    browser.wait_for_path("/login").await;
    assert_eq!(browser.session_cookie().await, None, "the browser kept its session cookie");

    for path in ["/", "/board", "/settings/capacity"] {
        let page = web.get(path).await;
        assert_eq!(
            (page.status, page.location.as_deref()),
            (303, Some("/login")),
            "GET {path} with the old cookie: {page:?}"
        );
    }
    assert_eq!(web.get("/events").await.status, 401, "the live stream still opens with the old cookie");
    browser.goto(&world.url("/board")).await;
    browser.wait_for_path("/login").await;
    browser.close().await;
}

// SPEC-0030 REQ-11: "Clear all pending (N)" goes through a confirmation page stating N, then
// discards exactly the pending todos; claimed ones stay with their claimant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_clear_all_through_the_confirmation_page_discards_exactly_the_pending_todos() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let ids = world.create_many(&world.owner, &ep, "inbox", "todo", 7).await;
    let mut claimed = BTreeSet::new();
    for _ in 0..3 {
        claimed.insert(claim_next(&world.api, &ep).await.expect("claim"));
    }
    let pending: BTreeSet<String> = ids.iter().filter(|id| !claimed.contains(*id)).cloned().collect();
    assert_eq!(world.pending(&world.owner, &ep, "inbox").await, pending);

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let queue_path = format!("/queues/endpoint:{}/inbox", ep.id);
    browser.goto(&world.url(&queue_path)).await;
    browser
        .client
        .find(Locator::LinkText("Clear all pending (4)"))
        .await
        .expect("the clear link")
        .click()
        .await
        .expect("open");
    browser.wait_for_path(&format!("{queue_path}/clear")).await;
    let warning = browser.text("p.warning").await;
    assert!(warning.contains("This removes 4 pending todos"), "{warning}");
    // Nothing happens by opening the page.
    assert_eq!(world.pending(&world.owner, &ep, "inbox").await, pending);

    let confirm = browser.client.find(Locator::Css("form.actions button.danger")).await.expect("confirm button");
    assert_eq!(confirm.text().await.expect("text"), "Remove 4 pending todos");
    confirm.click().await.expect("confirm");
    browser.wait_for_path(&queue_path).await;
    assert_eq!(browser.path().await, format!("{queue_path}?cleared=4"));
    assert!(browser.text("p.notice").await.contains("Removed 4 pending todos."));

    assert_eq!(world.pending(&world.owner, &ep, "inbox").await, BTreeSet::new());
    for id in &pending {
        assert_eq!(world.todo_state(&world.owner, id).await, "discarded", "{id}");
    }
    for id in &claimed {
        assert_eq!(world.todo_state(&world.owner, id).await, "claimed", "{id}");
    }
    browser.close().await;
}

/// The form's synchronizer token on a board page's HTML.
fn csrf_in(html: &str) -> String {
    let after = html.split("name=\"csrf\" value=\"").nth(1).expect("a csrf field");
    after.split('"').next().expect("its value").to_string()
}

/// `at` as the board writes it in `zone`: "09:00 CET on Tue 8 Dec" (`%Z` is the generic name
/// for zones without an XST/XDT pair, as Berlin and Tokyo are).
fn written_in(at: DateTime<Utc>, zone: Tz) -> String {
    at.with_timezone(&zone).format("%H:%M %Z on %a %-d %b").to_string()
}

// SPEC-0030 REQ-11 "shown ... in the viewer's local time", issue #51: without JavaScript every
// time a page shows was UTC. A human's zone, set on the board by hand (refused with the field
// named when unknown, changing nothing) or sent by the script from the browser the first time it
// runs with none set, is what pages write times in server-side; UTC only while none is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_every_time_a_page_shows_is_in_the_viewers_own_zone_without_javascript() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["investigations"]).await;
    world.policy(&world.owner, &ep, "investigations", daily(1, "America/Los_Angeles")).await;
    world.create_many(&world.owner, &ep, "investigations", "todo", 2).await;
    assert!(claim_next(&world.api, &ep).await.is_some(), "the one claim of the day");
    let (_, status) = world.admission(&world.owner, &ep, "investigations").await;
    let resets: DateTime<Utc> =
        status["status"]["window_resets_at"].as_str().and_then(|t| t.parse().ok()).expect("resets at");
    let queue = format!("/queues/endpoint:{}/investigations", ep.id);

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let web = Web::new(world.base(0), &browser.session_cookie().await.expect("cookie"));
    let before = web.get(&queue).await;
    assert!(before.body.contains(&written_in(resets, Tz::UTC)), "UTC while no zone is known: {}", before.body);
    let settings = web.get("/settings/time-zone").await;
    assert!(settings.body.contains("none is set yet"), "{}", settings.body);
    let csrf = csrf_in(&settings.body);

    let refused = web.post("/settings/time-zone", &format!("csrf={csrf}&zone=Mars%2FOlympus")).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.contains("zone: Mars/Olympus is not an IANA time zone name"), "{}", refused.body);
    assert!(web.get("/settings/time-zone").await.body.contains("none is set yet"), "a refused zone changed nothing");

    let saved = web.post("/settings/time-zone", &format!("csrf={csrf}&zone=Europe%2FBerlin")).await;
    assert_eq!((saved.status, saved.location.as_deref()), (303, Some("/settings/time-zone")), "{saved:?}");
    let berlin: Tz = "Europe/Berlin".parse().expect("zone");
    let after = web.get(&queue).await;
    assert!(after.body.contains("your time: <time class=\"local\""), "{}", after.body);
    assert!(after.body.contains(&written_in(resets, berlin)), "the header in the viewer's zone: {}", after.body);
    let tokens = web.get("/tokens").await;
    assert!(!tokens.body.contains(" UTC on "), "the token page still writes UTC: {}", tokens.body);
    // The script's request never replaces a zone set by hand.
    let auto = web.post("/settings/time-zone", &format!("csrf={csrf}&zone=Asia%2FTokyo&auto=1")).await;
    assert_eq!(auto.status, 204);
    assert!(web.get(&queue).await.body.contains(&written_in(resets, berlin)), "the hand-set zone stays");
    browser.close().await;

    // A human with no zone whose browser runs the script: it sends the browser's zone once,
    // and the next page is written in it server-side.
    let second = world.human("second");
    let theirs = world.vend(&second, "theirs", &["lane"]).await;
    world.policy(&second, &theirs, "lane", daily(1, "America/Los_Angeles")).await;
    world.create(&second, &theirs, "lane", "waits").await;
    let scripted = driver.session(Js::On).await;
    scripted.sign_in(world.base(0), &world.db.url, "second").await;
    let web = Web::new(world.base(0), &scripted.session_cookie().await.expect("cookie"));
    let tokyo: Tz = BROWSER_TZ.parse().expect("browser zone");
    let deadline = Instant::now() + BROWSER_WAIT;
    loop {
        let page = web.get("/settings/time-zone").await;
        if page.body.contains(&format!("value=\"{BROWSER_TZ}\"")) {
            break;
        }
        assert!(Instant::now() < deadline, "the browser's zone never arrived: {}", page.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settings = web.get("/settings/time-zone").await.body;
    let tokyo_name = Utc::now().with_timezone(&tokyo).format("%Z").to_string();
    assert!(settings.contains(&format!(" {tokyo_name} on ")), "the page written in the browser's zone: {settings}");
    scripted.close().await;
}
