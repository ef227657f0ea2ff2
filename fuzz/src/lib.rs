//! Fuzz entry points for Switchboard's parsers.
//!
//! Owns: one function per target (policy JSON, window math, MCP/JSON-RPC decoding, ingest
//! signatures) that must never panic on any input; each target's corpus also replays as a normal
//! test. The window-spec target is the first.

/// Window specifications from arbitrary bytes: parsing may refuse, never panic, and an accepted
/// spec yields a window containing any instant.
pub fn window_spec(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(5, '|');
    let (period, tz, start, weekday) = (parts.next(), parts.next(), parts.next(), parts.next());
    let (Some(period), Some(tz), Some(start)) = (period, tz, start) else { return };
    if let Ok(spec) = models::window::WindowSpec::parse(period, tz, start, weekday) {
        let seconds = i64::from(u32::from_le_bytes([data[0], data.get(1).copied().unwrap_or(0), 0, 0]));
        if let Some(instant) = chrono::DateTime::from_timestamp(1_700_000_000 + seconds * 3_600, 0) {
            let (start, end) = spec.window_containing(instant);
            assert!(start <= instant && instant < end, "window must contain the instant");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn window_spec_corpus_replays_without_panicking() {
        let corpus: &[&[u8]] = &[
            b"day|America/Los_Angeles|00:00",
            b"week|Europe/Berlin|09:00|Mon",
            b"hour|Australia/Lord_Howe|00:30",
            b"day|Mars/Olympus|00:00",
            b"week|UTC|24:00|Sun",
            b"\xff\xfe|||",
            b"",
        ];
        for input in corpus {
            super::window_spec(input);
        }
    }
}
