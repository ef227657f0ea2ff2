//! Target `window_spec`: `WindowSpec::parse` over `period|tz|start|weekday` from arbitrary
//! bytes. Law: an accepted spec yields a window containing any instant (SPEC-0030 REQ-5).

/// Parsing may refuse, never panic; an accepted spec's window contains the instant it was asked
/// about, for instants spread over about seven years by the first two bytes.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(5, '|');
    let (period, tz, start, weekday) = (parts.next(), parts.next(), parts.next(), parts.next());
    let (Some(period), Some(tz), Some(start)) = (period, tz, start) else { return };
    if let Ok(spec) = models::window::WindowSpec::parse(period, tz, start, weekday) {
        let hours = i64::from(u16::from_le_bytes([data[0], data.get(1).copied().unwrap_or(0)]));
        if let Some(instant) = chrono::DateTime::from_timestamp(1_700_000_000 + hours * 3_600, 0) {
            let (start, end) = spec.window_containing(instant);
            assert!(start <= instant && instant < end, "window [{start}, {end}) must contain {instant}");
        }
    }
}
