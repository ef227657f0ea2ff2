-- Issue #51 (SPEC-0030 REQ-11: the viewer's local time): each human's time zone, the IANA name
-- the board renders every time a page shows in. Set on the board (by hand, or from the browser
-- when JavaScript runs); NULL until then, when pages show UTC. The server checks the name against
-- the zones it knows before it writes one; the check here only bounds the text.
ALTER TABLE humans ADD COLUMN time_zone text CHECK (time_zone IS NULL OR length(time_zone) BETWEEN 1 AND 64);
