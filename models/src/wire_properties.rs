//! quickcheck properties of the plain-data parsers and encoders every surface shares (issue #32):
//! scope and grant references, window specs, policy JSON and shift text. Each property says what
//! holds for any input, and quickcheck shrinks a counterexample to the smallest text or value
//! that breaks it.
//!
//! Exists beside proptest's DST windows (`window.rs`), which walk instants through zones: these
//! are properties of data alone, where shrinking a string or a struct is what makes a failure
//! readable. No cursor token is on the wire today (listings are bounded by `limit`), so there is
//! none to check.

use crate::admission::Policy;
use crate::error::{Code, Error};
use crate::identity::{GrantRef, ScopeRef};
use crate::presence::Shift;
use crate::window::WindowSpec;
use quickcheck::{Arbitrary, Gen, quickcheck};
use serde_json::{Value, json};

/// Zones with whole-hour, half-hour and quarter-hour offsets, DST in either hemisphere, and none.
const ZONES: [&str; 7] = [
    "UTC",
    "America/Los_Angeles",
    "Europe/Berlin",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
];
const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
/// Characters a reference or a queue name is drawn from: the allowed ones and a few that are not.
const REFERENCE_CHARS: &[u8] = b"abz09._-:/ AZ";

fn pick<'a>(g: &mut Gen, from: &'a [&'a str]) -> &'a str {
    g.choose(from).copied().unwrap_or(from[0])
}

fn hhmm(g: &mut Gen) -> String {
    format!("{:02}:{:02}", u8::arbitrary(g) % 24, u8::arbitrary(g) % 60)
}

fn text_from(g: &mut Gen, chars: &[u8], max_len: usize) -> String {
    let len = usize::arbitrary(g) % (max_len + 1);
    (0..len).map(|_| char::from(*g.choose(chars).unwrap_or(&b'a'))).collect()
}

fn field_of(error: &Error) -> Option<&str> {
    error.extras.get("field").and_then(Value::as_str)
}

/// A valid window spec, as its four request strings.
#[derive(Debug, Clone)]
struct WindowText {
    period: &'static str,
    tz: &'static str,
    start: String,
    weekday: Option<&'static str>,
}

impl Arbitrary for WindowText {
    fn arbitrary(g: &mut Gen) -> WindowText {
        let period = ["hour", "day", "week"][usize::arbitrary(g) % 3];
        let tz = ZONES[usize::arbitrary(g) % ZONES.len()];
        let weekday = (period == "week").then(|| WEEKDAYS[usize::arbitrary(g) % WEEKDAYS.len()]);
        WindowText { period, tz, start: hhmm(g), weekday }
    }
}

/// A valid policy request body.
#[derive(Debug, Clone)]
struct PolicyBody(Value);

impl Arbitrary for PolicyBody {
    fn arbitrary(g: &mut Gen) -> PolicyBody {
        let in_flight = bool::arbitrary(g).then(|| i64::from(u16::arbitrary(g) % 1_001));
        let claims = (in_flight.is_none() || bool::arbitrary(g)).then(|| i64::from(u32::arbitrary(g) % 1_000_001));
        let window = (claims.is_some() || bool::arbitrary(g)).then(|| {
            let w = WindowText::arbitrary(g);
            let mut window = json!({"period": w.period, "tz": w.tz, "start": w.start});
            if let Some(day) = w.weekday {
                window["weekday"] = json!(day);
            }
            window
        });
        PolicyBody(json!({"max_in_flight": in_flight, "max_claims_per_window": claims, "window": window}))
    }
}

/// Any JSON a client might send as a policy: known and unknown keys, values of every kind.
#[derive(Debug, Clone)]
struct AnyBody(Value);

impl Arbitrary for AnyBody {
    fn arbitrary(g: &mut Gen) -> AnyBody {
        let keys = ["max_in_flight", "max_claims_per_window", "window", "maxInFlight"];
        let value = |g: &mut Gen| match u8::arbitrary(g) % 7 {
            0 => Value::Null,
            1 => json!(i64::arbitrary(g) % 2_000_000),
            2 => json!(f64::from(i16::arbitrary(g)) / 3.0),
            3 => json!(text_from(g, b"0123456789ab:", 6)),
            4 => {
                let w = WindowText::arbitrary(g);
                json!({"period": w.period, "tz": w.tz, "start": w.start, "weekday": w.weekday})
            }
            5 => json!({"period": pick(g, &["hour", "day", "month"]), "tz": pick(g, &ZONES), "start": hhmm(g)}),
            _ => json!(bool::arbitrary(g)),
        };
        let mut body = serde_json::Map::new();
        for key in keys {
            if bool::arbitrary(g) {
                body.insert(key.to_string(), value(g));
            }
        }
        AnyBody(Value::Object(body))
    }
}

/// Grant text: a queue name or a team grant, drawn from allowed and refused characters.
#[derive(Debug, Clone)]
struct GrantText(String);

impl Arbitrary for GrantText {
    fn arbitrary(g: &mut Gen) -> GrantText {
        let queue = text_from(g, REFERENCE_CHARS, 70);
        if bool::arbitrary(g) {
            GrantText(format!("team:{}/{queue}", text_from(g, REFERENCE_CHARS, 6)))
        } else {
            GrantText(queue)
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = GrantText>> {
        Box::new(self.0.shrink().map(GrantText))
    }
}

/// A valid shift's text, written with days listed and ranged in any order the syntax allows.
#[derive(Debug, Clone)]
struct ShiftText(String);

impl Arbitrary for ShiftText {
    fn arbitrary(g: &mut Gen) -> ShiftText {
        let first = usize::arbitrary(g) % 7;
        let last = first + usize::arbitrary(g) % (7 - first);
        let days = if bool::arbitrary(g) && last > first {
            format!("{}-{}", WEEKDAYS[first], WEEKDAYS[last])
        } else {
            (first..=last).map(|d| WEEKDAYS[d]).collect::<Vec<_>>().join(",")
        };
        let start = hhmm(g);
        let mut end = hhmm(g);
        if end == start {
            end = if start == "00:00" { "00:01".into() } else { "00:00".into() };
        }
        ShiftText(format!("TZ={} {days} {start}-{end}", ZONES[usize::arbitrary(g) % ZONES.len()]))
    }
}

quickcheck! {
    // SPEC-0030 REQ-1: a valid policy body reads back, through the JSON the API and the audit
    // show, to the same policy.
    fn policy_json_round_trips(body: PolicyBody) -> bool {
        let policy = Policy::from_request(&body.0).expect("a valid body");
        Policy::from_request(&policy.to_json()) == Ok(policy)
    }

    // SPEC-0030 REQ-1, non-negotiable 4: any body is either a policy whose JSON reads back to it,
    // or an invalid_argument naming one field the body sent or needs.
    fn any_policy_body_is_a_policy_or_names_its_field(body: AnyBody) -> bool {
        match Policy::from_request(&body.0) {
            Ok(policy) => Policy::from_request(&policy.to_json()) == Ok(policy),
            Err(error) => {
                let named = field_of(&error).unwrap_or("");
                error.code == Code::InvalidArgument
                    && (["max_in_flight", "max_claims_per_window", "window", "maxInFlight"].contains(&named)
                        || named.starts_with("window."))
            }
        }
    }

    // SPEC-0030 REQ-5: a window spec's canonical strings parse back to the same spec.
    fn window_spec_round_trips(text: WindowText) -> bool {
        let spec = WindowSpec::parse(text.period, text.tz, &text.start, text.weekday).expect("a valid spec");
        WindowSpec::parse(spec.period_name(), spec.tz.name(), &spec.start_hhmm(), spec.weekday_name()) == Ok(spec)
    }

    // SPEC-0022: a shift's canonical text parses back to the same shift, however it was written.
    fn shift_text_round_trips(text: ShiftText) -> bool {
        let shift = Shift::parse(&text.0).expect("a valid shift");
        Shift::parse(&shift.to_string()) == Ok(shift)
    }

    // SPEC-0022: any text is a shift whose canonical text reads back to it, or an error on field
    // `shift`.
    fn any_shift_text_is_a_shift_or_names_its_field(text: String) -> bool {
        match Shift::parse(&text) {
            Ok(shift) => Shift::parse(&shift.to_string()) == Ok(shift),
            Err(error) => field_of(&error) == Some("shift"),
        }
    }

    // Contract §2: a scope reference is endpoint:<ref> or team:<ref> with the reference kept
    // verbatim; anything else is refused on the field it came in.
    fn scope_refs_parse_exactly_the_two_forms(kind: bool, reference: String) -> bool {
        let prefix = if kind { "endpoint" } else { "team" };
        let raw = format!("{prefix}:{reference}");
        let parsed = ScopeRef::parse("scope", &raw);
        match (reference.is_empty(), parsed) {
            (true, Err(error)) => field_of(&error) == Some("scope"),
            (false, Ok(ScopeRef::Endpoint(r))) => kind && r == reference,
            (false, Ok(ScopeRef::Team(r))) => !kind && r == reference,
            _ => false,
        }
    }

    fn any_scope_text_is_a_scope_or_names_its_field(raw: String) -> bool {
        match ScopeRef::parse("scope", &raw) {
            Ok(ScopeRef::Endpoint(r)) => raw == format!("endpoint:{r}") && !r.is_empty(),
            Ok(ScopeRef::Team(r)) => raw == format!("team:{r}") && !r.is_empty(),
            Err(error) => field_of(&error) == Some("scope"),
        }
    }

    // Contract §2: a grant is a queue name or team:<ref>/<queue>; what parses writes back to the
    // same text, and a queue name is 1-64 of [a-z0-9._-].
    fn grant_refs_write_back_to_their_text(text: GrantText) -> bool {
        let raw = text.0;
        let queue_ok = |q: &str| {
            (1..=64).contains(&q.len()) && q.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        };
        match GrantRef::parse("queues", &raw) {
            Ok(GrantRef::Own(queue)) => queue == raw && queue_ok(&queue),
            Ok(GrantRef::Team { team, queue }) => raw == format!("team:{team}/{queue}") && queue_ok(&queue) && !team.is_empty(),
            Err(error) => field_of(&error) == Some("queues"),
        }
    }
}
