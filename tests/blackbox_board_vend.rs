//! SPEC-0030 REQ-10 (issue #29): the board's vend wizard and consent screen, in a real browser
//! (headless Chromium over WebDriver) against the real binary on real PostgreSQL.
//!
//! The wizard lists `set_admission_policy` and `clear_admission_policy` (and the discard verbs)
//! unchecked, each saying that it lets the agent change its own budget (or discard work); the
//! consent screen says exactly what the agent will be able to do; the MCP URL and token it
//! shows once make an agent that claims over MCP. Driven with JavaScript off and by keyboard
//! alone, with JavaScript on through a team and field errors, and over plain HTTP for CSRF and
//! tampered hidden fields. Screenshots land in `target/board-screenshots/vend-*.png`.

mod board_support;
mod support;

use board_support::world::{Ep, Web, World, claim_next, fill, focused, press};
use board_support::{Browser, Driver, Js};
use fantoccini::Locator;
use fantoccini::key::Key;
use models::verbs::{ALL_VERBS, DEFAULT_GRANT, OPT_IN_ONLY};
use serde_json::{Value, json};

/// Each verb's checkbox on the grant step: `{verb: checked}`, plus the warning text of each.
async fn grant_step(browser: &Browser) -> (Value, Value) {
    let checked = browser
        .execute(
            "const o = {}; document.querySelectorAll('input[type=checkbox][name=verb]')\
               .forEach(c => o[c.value] = c.checked); return o;",
            vec![],
        )
        .await;
    let warnings = browser
        .execute(
            "const o = {}; document.querySelectorAll('.choice').forEach(c => {\
               const w = c.querySelector('.warning');\
               o[c.querySelector('input').value] = w ? w.textContent.trim() : null; }); return o;",
            vec![],
        )
        .await;
    (checked, warnings)
}

/// The verbs each list of the consent screen names.
async fn consent_lists(browser: &Browser) -> (Vec<String>, Vec<String>) {
    let read = |list: &str| {
        format!(
            "const l = document.querySelector('{list}'); return l ? [...l.querySelectorAll('li > code')]\
               .map(c => c.textContent.trim()) : [];"
        )
    };
    let granted = browser.execute(&read("ul.consent:not(.withheld)"), vec![]).await;
    let withheld = browser.execute(&read("ul.consent.withheld"), vec![]).await;
    let strings = |v: Value| -> Vec<String> { serde_json::from_value(v).expect("a list of verbs") };
    (strings(granted), strings(withheld))
}

/// `set_admission_policy`'s arguments: an in-flight cap of 2 on `queue`.
fn in_flight(queue: &str) -> Value {
    json!({"queue": queue, "policy": {"max_in_flight": 2, "max_claims_per_window": null, "window": null}})
}

/// Presses Tab until the focused element's text (or id) is `target`.
async fn tab_to(browser: &Browser, target: &str) {
    for _ in 0..40 {
        let now = focused(browser).await;
        if now["text"] == target || now["id"] == target {
            return;
        }
        press(browser, &[char::from(Key::Tab)]).await;
    }
    panic!("Tab never reached {target}; focus on {}", focused(browser).await);
}

/// The MCP URL and token the last page shows, as the endpoint the test support speaks to.
async fn vended(browser: &Browser) -> Ep {
    let value = |id: &str| format!("return document.getElementById('{id}').value;");
    let url = browser.execute(&value("mcp-url"), vec![]).await.as_str().expect("MCP URL").to_string();
    let key = browser.execute(&value("token"), vec![]).await.as_str().expect("token").to_string();
    assert!(key.starts_with("sbk_"), "the token shown is not an endpoint token: {key}");
    let slug = url.rsplit_once("/mcp/").map(|(_, slug)| slug.to_string()).expect("an /mcp/ URL");
    Ep { id: String::new(), scope: format!("endpoint:{slug}"), slug, key }
}

// SPEC-0030 REQ-10: the wizard and consent screen list the policy verbs unchecked and say
// that they let the agent change its own budget; with JavaScript off and by keyboard alone,
// an owner vends an agent that then claims over MCP and cannot change its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_vend_wizard_by_keyboard_without_javascript_vends_a_working_agent() {
    let world = World::start(1).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    browser.goto(&world.url("/endpoints/new")).await;

    // Step 1: focus starts on the name; type it, Tab to the queues, type one, Tab to "Next".
    assert_eq!(focused(&browser).await["id"], "name", "the details step must focus its first field");
    browser.screenshot("vend-details").await;
    press(&browser, &"triage-bot".chars().collect::<Vec<_>>()).await;
    tab_to(&browser, "queues").await;
    press(&browser, &"inbox".chars().collect::<Vec<_>>()).await;
    tab_to(&browser, "Next: what it may do").await;
    press(&browser, &[char::from(Key::Enter)]).await;

    // Step 2: the default grant checked, the opt-in verbs unchecked, each with its warning.
    browser.wait_for_element("#verb-list_todos").await;
    assert_eq!(focused(&browser).await["id"], "verb-list_todos", "the grant step must focus its first checkbox");
    let (checked, warnings) = grant_step(&browser).await;
    for verb in ALL_VERBS {
        assert_eq!(checked[verb], json!(DEFAULT_GRANT.contains(verb)), "{verb} checked by default? {checked}");
        assert_eq!(warnings[verb].is_string(), OPT_IN_ONLY.contains(verb), "{verb}'s warning: {warnings}");
    }
    for verb in ["set_admission_policy", "clear_admission_policy"] {
        let warning = warnings[verb].as_str().expect("a warning");
        assert!(warning.contains("change its own budget"), "{verb} warns only {warning:?}");
    }
    browser.screenshot("vend-grant").await;
    // Check admission_status with the space bar, then on to "Next: review".
    tab_to(&browser, "verb-admission_status").await;
    press(&browser, &[' ']).await;
    tab_to(&browser, "Next: review").await;
    press(&browser, &[char::from(Key::Enter)]).await;

    // Step 3: the consent screen names exactly what the agent may do, and what it may not.
    browser.wait_for_element("ul.consent").await;
    let (granted, withheld) = consent_lists(&browser).await;
    let mut expected: Vec<String> = DEFAULT_GRANT.iter().map(|v| v.to_string()).collect();
    expected.push("admission_status".into());
    expected.sort_by_key(|verb| ALL_VERBS.iter().position(|v| v == verb));
    assert_eq!(granted, expected, "the consent screen's grant");
    assert_eq!(withheld, OPT_IN_ONLY.to_vec(), "the consent screen's withheld verbs");
    assert_eq!(focused(&browser).await["text"], "Create endpoint", "consent must focus its confirm button");
    browser.screenshot("vend-consent").await;
    press(&browser, &[char::from(Key::Enter)]).await;

    // The last page: URL and token as selectable text; no copy buttons without JavaScript.
    browser.wait_for_element("#token").await;
    let hidden =
        browser.execute("return [...document.querySelectorAll('button.copy')].every(b => b.hidden);", vec![]).await;
    assert_eq!(hidden, json!(true), "copy buttons must stay hidden without JavaScript");
    browser.screenshot("vend-done").await;
    let agent = vended(&browser).await;

    // The agent works: it claims what the owner queues for it, and may read its admission
    // status, but may not change its own budget.
    let (_, endpoints) = world.api.get("/api/v1/endpoints", &world.owner).await;
    let listed = endpoints["endpoints"].as_array().expect("endpoints").iter().find(|e| e["slug"] == agent.slug);
    let listed = listed.unwrap_or_else(|| panic!("the vended endpoint is not listed: {endpoints}"));
    assert_eq!(listed["name"], "triage-bot");
    let id = listed["id"].as_str().expect("id").to_string();
    let agent = Ep { scope: format!("endpoint:{id}"), id, ..agent };
    let todo = world.create(&world.owner, &agent, "inbox", "first job").await;
    assert_eq!(claim_next(&world.api, &agent).await, Some(todo), "the wizard's agent could not claim");
    let (is_error, _) = world.api.tool(&agent.slug, &agent.key, "admission_status", json!({"queue": "inbox"})).await;
    assert!(!is_error, "admission_status was granted");
    let (is_error, refusal) = world.api.tool(&agent.slug, &agent.key, "set_admission_policy", in_flight("inbox")).await;
    assert!(is_error, "set_admission_policy was not granted, yet: {refusal}");
    assert_eq!(refusal["code"], "forbidden", "{refusal}");
    browser.close().await;
}

/// Adds the team `core`, owned by the owner, through the admin CLI: its slug.
fn add_team_core(world: &World) -> String {
    let team =
        support::run(&["admin", "team", "add", "core", "--owner", "owner", "--database-url", &world.db.url], &[]);
    assert_eq!(team.0, 0, "{}", team.2);
    let team: Value = serde_json::from_str(team.1.trim()).expect("team JSON");
    team["slug"].as_str().expect("team slug").to_string()
}

/// Submits the details step with a queue name the store refuses: it comes back next to the
/// queues, kept, with focus on the field.
async fn refuse_a_bad_queue_name(browser: &Browser) {
    fill(browser, "name", "core-bot").await;
    fill(browser, "queues", "no spaces allowed").await;
    browser.client.find(Locator::Css("button[value=next]")).await.expect("next").click().await.expect("click");
    browser.wait_for_element("#queues-error").await;
    assert_eq!(browser.text("#queues").await, "no spaces allowed", "the refused queue list was not kept");
    assert!(browser.text("#queues-error").await.contains("queue"), "the error must name the queue field");
    assert_eq!(focused(browser).await["id"], "queues", "a refused step must focus the field it names");
    browser.screenshot("vend-details-error").await;
}

/// Makes the team `core` the owner and names a team queue and an own one, then goes on to the
/// grant step: the team's id as the wizard offers it.
async fn choose_the_team_as_owner(browser: &Browser, team_slug: &str) -> String {
    let team_id = browser
        .execute(
            "const s = document.getElementById('team'); const o = [...s.options].find(o => o.text.includes('core'));\
             return o ? o.value : null;",
            vec![],
        )
        .await;
    let team_id = team_id.as_str().expect("the owner's team is offered as an owner").to_string();
    browser.execute("document.getElementById('team').value = arguments[0]; return true;", vec![json!(team_id)]).await;
    fill(browser, "queues", &format!("team:{team_slug}/lane\nmine")).await;
    browser.client.find(Locator::Css("button[value=next]")).await.expect("next").click().await.expect("click");
    browser.wait_for_element("#verb-list_todos").await;
    team_id
}

/// Unchecks every verb (refused, naming the verbs), then grants `claim_next`, `complete` and
/// the opt-in `set_admission_policy`: the consent screen names them, the team and the warning.
async fn grant_an_opt_in_verb_after_an_empty_grant(browser: &Browser) {
    browser
        .execute("document.querySelectorAll('input[name=verb]').forEach(c => c.checked = false); return true;", vec![])
        .await;
    browser.client.find(Locator::Css("button[value=next]")).await.expect("next").click().await.expect("click");
    browser.wait_for_element("#verbs-error").await;
    browser.screenshot("vend-grant-error").await;
    browser
        .execute(
            "for (const v of ['claim_next', 'complete', 'set_admission_policy'])\
               document.getElementById('verb-' + v).checked = true; return true;",
            vec![],
        )
        .await;
    browser.client.find(Locator::Css("button[value=next]")).await.expect("next").click().await.expect("click");
    browser.wait_for_element("ul.consent").await;
    let (granted, _) = consent_lists(browser).await;
    assert_eq!(granted, ["claim_next", "complete", "set_admission_policy"]);
    let consent = browser.text("main").await;
    assert!(consent.contains("the team core"), "the consent screen must name the owning team: {consent}");
    assert!(consent.contains("This lets the agent change its own budget."), "no warning on consent: {consent}");
}

/// With JavaScript, both values show a copy button, and the token's selects the whole token.
async fn copy_buttons_select_the_value(browser: &Browser) {
    let shown = browser
        .execute("return [...document.querySelectorAll('button.copy')].filter(b => !b.hidden).length;", vec![])
        .await;
    assert_eq!(shown, json!(2), "both copy buttons must show with JavaScript on");
    browser.client.find(Locator::Css("button[data-copy=token]")).await.expect("copy").click().await.expect("click");
    let selected = browser
        .execute(
            "const t = document.getElementById('token');\
             return document.activeElement === t && t.selectionStart === 0 && t.selectionEnd === t.value.length;",
            vec![],
        )
        .await;
    assert_eq!(selected, json!(true), "the copy button must select the whole token");
    browser.screenshot("vend-done-js").await;
}

// SPEC-0030 REQ-10: with JavaScript on, through a team the owner configures: refused fields
// are shown next to their field with the answers kept; an opt-in verb the owner checks is on
// the consent screen with its warning; the copy buttons appear and select the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_vend_wizard_for_a_team_shows_field_errors_and_the_opt_in_warning() {
    let world = World::start(1).await;
    let team_slug = add_team_core(&world);
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    browser.goto(&world.url("/endpoints/new")).await;

    // A queue name the store refuses comes back on the details step, next to the queues.
    refuse_a_bad_queue_name(&browser).await;

    // A team queue, with the team as owner.
    let team_id = choose_the_team_as_owner(&browser, &team_slug).await;

    // Uncheck everything: the grant step refuses an empty grant, naming the verbs. Then an
    // opt-in verb the owner checks is on the consent screen with its warning.
    grant_an_opt_in_verb_after_an_empty_grant(&browser).await;

    // Back keeps the grant; forward again and create.
    browser.client.find(Locator::Css("button[value=back]")).await.expect("back").click().await.expect("click");
    browser.wait_for_element("#verb-list_todos").await;
    let (checked, _) = grant_step(&browser).await;
    assert_eq!(checked["set_admission_policy"], true, "Back lost the owner's grant: {checked}");
    assert_eq!(checked["list_todos"], false, "Back restored the default grant: {checked}");
    browser.client.find(Locator::Css("button[value=next]")).await.expect("next").click().await.expect("click");
    browser.wait_for_element("button[value=create]").await;
    browser.client.find(Locator::Css("button[value=create]")).await.expect("create").click().await.expect("click");
    browser.wait_for_element("#token").await;

    // With JavaScript, each value has a copy button, which selects the whole value.
    copy_buttons_select_the_value(&browser).await;
    let agent = vended(&browser).await;

    // The team's agent may set its own queue's budget: the opt-in verb was granted.
    let (is_error, answer) = world.api.tool(&agent.slug, &agent.key, "set_admission_policy", in_flight("mine")).await;
    assert!(!is_error, "set_admission_policy was granted: {answer}");
    let (_, endpoints) = world.api.get("/api/v1/endpoints", &world.owner).await;
    let listed =
        endpoints["endpoints"].as_array().expect("endpoints").iter().find(|e| e["slug"] == agent.slug).cloned();
    let listed = listed.expect("the team endpoint is listed");
    assert_eq!(listed["owner_team_id"], json!(team_id), "the endpoint belongs to the team: {listed}");
    browser.close().await;
}

// SPEC-0030 REQ-10, Security Requirements: a wizard step without the session's CSRF token, or
// whose hidden answers were changed on the way, vends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_vend_wizard_refuses_forged_and_tampered_steps_and_vends_nothing() {
    let world = World::start(1).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    browser.goto(&world.url("/endpoints/new")).await;
    let csrf = browser
        .execute("return document.querySelector('input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    let web = Web::new(world.base(0), &browser.session_cookie().await.expect("session"));
    browser.close().await;

    let create = |csrf: &str, queue: &str| {
        format!("csrf={csrf}&step=consent&action=create&name=bot&team=&queue={queue}&verb=claim_next&grant_chosen=1")
    };
    let forged = web.post("/endpoints/new", &create("not-the-token", "inbox")).await;
    assert_eq!(forged.status, 403, "a forged create must be refused: {}", forged.body);
    let tampered = web.post("/endpoints/new", &create(&csrf, "bad%20queue")).await;
    assert_eq!(tampered.status, 400, "a tampered queue must be refused: {}", tampered.body);
    assert!(tampered.body.contains("id=\"queues-error\""), "the refusal belongs next to the queues: {}", tampered.body);
    let unknown = web.post("/endpoints/new", &create(&csrf, "inbox").replace("claim_next", "sudo")).await;
    assert_eq!(unknown.status, 400, "an unknown verb must be refused: {}", unknown.body);
    assert!(unknown.body.contains("id=\"verbs-error\""), "the refusal belongs next to the verbs: {}", unknown.body);
    let (_, endpoints) = world.api.get("/api/v1/endpoints", &world.owner).await;
    assert_eq!(endpoints["endpoints"], json!([]), "a refused step vended an endpoint");

    let created = web.post("/endpoints/new", &create(&csrf, "inbox")).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(created.body.contains("sbk_"), "the token is shown once: {}", created.body);
    let (_, endpoints) = world.api.get("/api/v1/endpoints", &world.owner).await;
    assert_eq!(endpoints["endpoints"].as_array().map(Vec::len), Some(1), "{endpoints}");
    assert_eq!(endpoints["endpoints"][0]["verbs"], json!(["claim_next"]), "{endpoints}");
}
