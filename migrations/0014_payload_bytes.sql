-- Issue #14 item 4: a listing shows each todo's payload size without reading the payload. The
-- size is computed in SQL when the row is written, from the stored document, and kept in a
-- generated column, so every writer (the store, a bulk load, a restore) gets it right.
--
-- `compact_json_bytes` is the byte length of the document written as compact JSON, the form a
-- client reads back (`serde_json`'s compact writer, `models::todo::payload_size_bytes`): the
-- jsonb text form minus the one space it writes after every `,` and `:` between members and
-- elements. Separators inside strings are text, not structure, and are kept.
CREATE FUNCTION compact_json_bytes(document jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN octet_length(document::text) - (
    SELECT coalesce(sum(CASE jsonb_typeof(item)
        -- n members: n - 1 ", " and n ": "
        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(item)) - 1, 0)
        -- n elements: n - 1 ", "
        WHEN 'array' THEN greatest(jsonb_array_length(item) - 1, 0)
        ELSE 0 END), 0)
    FROM jsonb_path_query(document, 'strict $.**') AS item);

-- Existing rows get their size as the column is added (the table is rewritten once).
ALTER TABLE todos
    ADD COLUMN payload_bytes bigint NOT NULL GENERATED ALWAYS AS (coalesce(compact_json_bytes(payload), 0)) STORED;
