-- The schema of the PostgreSQL store as the migrations leave it today, in one place:
-- tables and their columns, constraints, indexes, functions and triggers, read from
-- the catalog of a freshly migrated schema, `{schema}` standing for its name.
-- Written by a test, never by hand: after adding a migration, run
--   TENURE_BLESS=1 cargo test -p tenure-postgres --test pg schema
-- and commit the file with the migration.

CREATE TABLE {schema}.claim_cursors (
    queue text NOT NULL,
    priority smallint NOT NULL,
    run_at bigint NOT NULL,
    seq bigint NOT NULL,
    lease_floor bigint NOT NULL,
    CONSTRAINT claim_cursors_pkey PRIMARY KEY (queue)
);

CREATE TABLE {schema}.dedup_keys (
    queue text NOT NULL,
    key text NOT NULL,
    item_id uuid NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT dedup_keys_pkey PRIMARY KEY (queue, key)
);

CREATE TABLE {schema}.fair_queues (
    queue text NOT NULL,
    vtime bigint NOT NULL,
    CONSTRAINT fair_queues_pkey PRIMARY KEY (queue)
);

CREATE TABLE {schema}.fair_tenants (
    queue text NOT NULL,
    tenant text NOT NULL,
    finish bigint NOT NULL,
    CONSTRAINT fair_tenants_pkey PRIMARY KEY (queue, tenant)
);

CREATE TABLE {schema}.history (
    queue text NOT NULL,
    minute bigint NOT NULL,
    finished bigint NOT NULL,
    failed bigint NOT NULL,
    dead bigint NOT NULL,
    CONSTRAINT history_pkey PRIMARY KEY (queue, minute)
);

CREATE TABLE {schema}.instances (
    id text NOT NULL,
    started_at bigint NOT NULL,
    last_seen bigint NOT NULL,
    CONSTRAINT instances_pkey PRIMARY KEY (id)
);

CREATE TABLE {schema}.items (
    id uuid NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    queue text NOT NULL,
    payload bytea NOT NULL,
    stream text,
    scope text,
    dedup_key text,
    priority smallint NOT NULL,
    run_at bigint NOT NULL,
    state text NOT NULL,
    head boolean NOT NULL,
    attempt integer NOT NULL,
    owner text,
    lease_expires_at bigint,
    renewals integer NOT NULL,
    stalls integer NOT NULL,
    max_attempts integer NOT NULL,
    max_stalls integer NOT NULL,
    max_renewals integer NOT NULL,
    last_error text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    phash bigint,
    lease bigint NOT NULL DEFAULT 0,
    limit_key text,
    fairness_key text,
    weight integer,
    ftag bigint,
    lq boolean NOT NULL DEFAULT false,
    progress text,
    CONSTRAINT items_pkey PRIMARY KEY (id),
    CONSTRAINT items_state_check CHECK ((state = ANY (ARRAY['ready'::text, 'running'::text, 'done'::text, 'dead'::text])))
);

CREATE TABLE {schema}.leaders (
    name text NOT NULL,
    holder text NOT NULL,
    term bigint NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT leaders_pkey PRIMARY KEY (name)
);

CREATE TABLE {schema}.limit_defers (
    queue text NOT NULL,
    key text NOT NULL,
    until bigint NOT NULL,
    CONSTRAINT limit_defers_pkey PRIMARY KEY (queue, key)
);

CREATE TABLE {schema}.limit_starts (
    queue text NOT NULL,
    key text NOT NULL,
    at bigint NOT NULL
);

CREATE TABLE {schema}.paused_queues (
    queue text NOT NULL,
    paused_at bigint NOT NULL,
    CONSTRAINT paused_queues_pkey PRIMARY KEY (queue)
);

CREATE TABLE {schema}.queue_limit_keys (
    queue text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    value bigint NOT NULL,
    CONSTRAINT queue_limit_keys_kind_check CHECK ((kind = ANY (ARRAY['override'::text, 'weight'::text]))),
    CONSTRAINT queue_limit_keys_pkey PRIMARY KEY (queue, kind, key)
);

CREATE TABLE {schema}.queue_limits (
    queue text NOT NULL,
    concurrency bigint,
    key_concurrency bigint,
    rate_starts bigint,
    rate_per bigint,
    key_rate_starts bigint,
    key_rate_per bigint,
    CONSTRAINT queue_limits_pkey PRIMARY KEY (queue)
);

CREATE TABLE {schema}.streams (
    stream text NOT NULL,
    pending bigint NOT NULL,
    pinned_to text,
    CONSTRAINT streams_pending_check CHECK ((pending >= 0)),
    CONSTRAINT streams_pkey PRIMARY KEY (stream)
);

CREATE TABLE {schema}.tenure_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone NOT NULL DEFAULT now(),
    CONSTRAINT tenure_migrations_pkey PRIMARY KEY (version)
);

CREATE UNIQUE INDEX claim_cursors_pkey ON {schema}.claim_cursors USING btree (queue);
CREATE INDEX dedup_keys_expiry ON {schema}.dedup_keys USING btree (expires_at);
CREATE UNIQUE INDEX dedup_keys_pkey ON {schema}.dedup_keys USING btree (queue, key);
CREATE UNIQUE INDEX fair_queues_pkey ON {schema}.fair_queues USING btree (queue);
CREATE UNIQUE INDEX fair_tenants_pkey ON {schema}.fair_tenants USING btree (queue, tenant);
CREATE INDEX history_minute ON {schema}.history USING btree (minute);
CREATE UNIQUE INDEX history_pkey ON {schema}.history USING btree (queue, minute);
CREATE UNIQUE INDEX instances_pkey ON {schema}.instances USING btree (id);
CREATE INDEX items_claim ON {schema}.items USING btree (queue, priority, run_at, seq) WHERE ((state = 'ready'::text) AND head);
CREATE INDEX items_claim_fair ON {schema}.items USING btree (queue, priority, ftag, run_at, seq) WHERE ((state = 'ready'::text) AND head AND (ftag IS NOT NULL));
CREATE INDEX items_claim_key ON {schema}.items USING btree (queue, limit_key, priority, run_at, seq) WHERE ((state = 'ready'::text) AND head AND ((limit_key IS NOT NULL) OR lq));
CREATE INDEX items_done ON {schema}.items USING btree (updated_at) WHERE (state = 'done'::text);
CREATE INDEX items_list ON {schema}.items USING btree (queue, state, seq);
CREATE UNIQUE INDEX items_pkey ON {schema}.items USING btree (id);
CREATE INDEX items_running ON {schema}.items USING btree (queue, lease_expires_at) WHERE (state = 'running'::text);
CREATE INDEX items_running_limit ON {schema}.items USING btree (queue, limit_key) WHERE ((state = 'running'::text) AND (limit_key IS NOT NULL));
CREATE INDEX items_scope_ready ON {schema}.items USING btree (scope, priority, run_at, seq) WHERE ((state = 'ready'::text) AND head AND (scope IS NOT NULL));
CREATE UNIQUE INDEX items_scope_running ON {schema}.items USING btree (scope) WHERE ((state = 'running'::text) AND (scope IS NOT NULL));
CREATE INDEX items_stream_waiting ON {schema}.items USING btree (stream, seq) WHERE (NOT head);
CREATE UNIQUE INDEX leaders_pkey ON {schema}.leaders USING btree (name);
CREATE UNIQUE INDEX limit_defers_pkey ON {schema}.limit_defers USING btree (queue, key);
CREATE INDEX limit_starts_key ON {schema}.limit_starts USING btree (queue, key, at);
CREATE UNIQUE INDEX paused_queues_pkey ON {schema}.paused_queues USING btree (queue);
CREATE UNIQUE INDEX queue_limit_keys_pkey ON {schema}.queue_limit_keys USING btree (queue, kind, key);
CREATE UNIQUE INDEX queue_limits_pkey ON {schema}.queue_limits USING btree (queue);
CREATE INDEX streams_pinned ON {schema}.streams USING btree (pinned_to) WHERE (pinned_to IS NOT NULL);
CREATE UNIQUE INDEX streams_pkey ON {schema}.streams USING btree (stream);
CREATE UNIQUE INDEX tenure_migrations_pkey ON {schema}.tenure_migrations USING btree (version);

CREATE OR REPLACE FUNCTION {schema}.tenure_complete(p_now bigint, p_ids uuid[], p_attempts integer[], p_keep_done boolean)
 RETURNS SETOF uuid
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_ids uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE {schema}.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM {schema}.items i
            USING unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    END IF;

    IF v_heads IS NOT NULL THEN
        PERFORM {schema}.tenure_promote(v_heads);
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_complete(p_now bigint, p_ids uuid[], p_attempts integer[], p_leases bigint[], p_keep_done boolean)
 RETURNS SETOF uuid
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_ids uuid[];
    v_streams text[];
    v_more uuid[];
    v_ok uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE {schema}.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND i.head
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) INTO v_ids, v_streams FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM {schema}.items i
            USING unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND i.head
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) INTO v_ids, v_streams FROM fin;
    END IF;

    -- Tokens left over: items behind a head of their stream (or refused by the fence).
    -- Migration 8's rule, found another way: for each stream whose head the first
    -- statement finished, its first unfinished waiting items in enqueue order (by
    -- `items_stream_waiting`, at most as many as there are tokens), each with the
    -- earliest and the latest position of its token in the call. An item finishes when
    -- it and every item ahead of it hold a current token, and its token comes after
    -- the head's and after every token of the items ahead. Migration 8 compared each
    -- item with every waiting item of its stream (a join over the whole stream per
    -- call, so a stream of 5,000 items spent a quarter of a second on a run of 100).
    IF coalesce(array_length(v_ids, 1), 0) < coalesce(array_length(p_ids, 1), 0)
        AND array_length(array_remove(v_streams, NULL), 1) IS NOT NULL THEN
        WITH t AS (
            SELECT * FROM unnest(p_ids, p_attempts, p_leases) WITH ORDINALITY AS t(id, attempt, lease, ord)
        ), hd AS (
            SELECT d.stream, min(a.ord) AS ord
            FROM unnest(v_ids, v_streams) AS d(id, stream) JOIN t a ON a.id = d.id
            WHERE d.stream IS NOT NULL GROUP BY d.stream
        ), w AS (
            SELECT hd.stream, hd.ord AS head_ord, e.id, e.seq,
                   min(b.ord) AS first_ord, max(b.ord) AS last_ord
            FROM hd CROSS JOIN LATERAL (
                SELECT x.id, x.seq, x.attempt, x.lease, x.state FROM {schema}.items x
                WHERE x.stream = hd.stream AND NOT x.head AND x.state <> 'done'
                ORDER BY x.seq LIMIT cardinality(p_ids)) e
            LEFT JOIN t b ON b.id = e.id AND b.attempt = e.attempt AND b.lease = e.lease
                AND e.state = 'running'
            GROUP BY hd.stream, hd.ord, e.id, e.seq
        ), r AS (
            SELECT w.id, w.head_ord, w.last_ord,
                   bool_and(w.first_ord IS NOT NULL) OVER (PARTITION BY w.stream ORDER BY w.seq)
                       AS all_held,
                   max(w.first_ord) OVER (PARTITION BY w.stream ORDER BY w.seq
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead_ord
            FROM w
        )
        SELECT array_agg(r.id) INTO v_ok FROM r
        WHERE r.all_held AND r.last_ord > greatest(r.head_ord, coalesce(r.ahead_ord, 0));

        IF v_ok IS NOT NULL THEN
            IF p_keep_done THEN
                WITH fin AS (
                    UPDATE {schema}.items i
                    SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
                    FROM unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
                    WHERE i.id = ANY(v_ok) AND i.id = t.id AND i.attempt = t.attempt
                        AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND NOT i.head
                    RETURNING i.id
                )
                SELECT array_agg(DISTINCT fin.id) INTO v_more FROM fin;
            ELSE
                WITH fin AS (
                    DELETE FROM {schema}.items i
                    USING unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
                    WHERE i.id = ANY(v_ok) AND i.id = t.id AND i.attempt = t.attempt
                        AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND NOT i.head
                    RETURNING i.id
                )
                SELECT array_agg(DISTINCT fin.id) INTO v_more FROM fin;
            END IF;
            v_ids := v_ids || v_more;
        END IF;
    END IF;

    -- The streams whose head finished, in sorted order (the order their rows lock in).
    v_heads := ARRAY(SELECT DISTINCT s FROM unnest(v_streams) AS u(s)
                     WHERE s IS NOT NULL ORDER BY s);
    IF array_length(v_heads, 1) IS NOT NULL THEN
        PERFORM {schema}.tenure_promote(v_heads);
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_cursor_advance(p_now bigint, p_queues text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    q text;
    c record;
    f record;
    v_floor bigint;
BEGIN
    FOREACH q IN ARRAY p_queues LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext('{schema}.claim_cursors'),
                                                    hashtext(q));
        SELECT * INTO c FROM {schema}.claim_cursors WHERE queue = q;
        IF FOUND THEN
            SELECT i.priority, i.run_at, i.seq INTO f FROM {schema}.items i
            WHERE i.queue = q AND i.state = 'ready' AND i.head
                AND (i.priority, i.run_at, i.seq) >= (c.priority, c.run_at, c.seq)
            ORDER BY i.priority, i.run_at, i.seq LIMIT 1;
        ELSE
            SELECT i.priority, i.run_at, i.seq INTO f FROM {schema}.items i
            WHERE i.queue = q AND i.state = 'ready' AND i.head
            ORDER BY i.priority, i.run_at, i.seq LIMIT 1;
        END IF;
        SELECT x.lease_expires_at INTO v_floor FROM {schema}.items x
        WHERE x.queue = q AND x.state = 'running'
            AND x.lease_expires_at >= coalesce(c.lease_floor, -9223372036854775808)
            AND x.lease_expires_at < p_now - 1000000
        ORDER BY x.lease_expires_at LIMIT 1;
        v_floor := least(coalesce(v_floor, p_now - 1000000), p_now - 1000000);
        v_floor := greatest(v_floor, coalesce(c.lease_floor, v_floor));
        INSERT INTO {schema}.claim_cursors AS k (queue, priority, run_at, seq, lease_floor)
        VALUES (q,
                coalesce(f.priority, c.priority, 0),
                CASE WHEN f.seq IS NULL THEN greatest(p_now, coalesce(c.run_at, p_now))
                     ELSE f.run_at END,
                CASE WHEN f.seq IS NULL THEN 0 ELSE f.seq END,
                v_floor)
        ON CONFLICT (queue) DO UPDATE
            SET priority = EXCLUDED.priority, run_at = EXCLUDED.run_at, seq = EXCLUDED.seq,
                lease_floor = EXCLUDED.lease_floor
            WHERE (k.priority, k.run_at, k.seq, k.lease_floor)
                IS DISTINCT FROM (EXCLUDED.priority, EXCLUDED.run_at, EXCLUDED.seq,
                                  EXCLUDED.lease_floor);
    END LOOP;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_cursor_lower_inserted()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT ON (n.queue) n.queue, n.priority, n.run_at, n.seq
             FROM inserted n WHERE n.state = 'ready' AND n.head
             ORDER BY n.queue, n.priority, n.run_at, n.seq
    LOOP
        PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}.claim_cursors'),
                                             hashtext(r.queue));
        UPDATE {schema}.claim_cursors c
        SET priority = r.priority, run_at = r.run_at, seq = r.seq
        WHERE c.queue = r.queue
            AND (c.priority, c.run_at, c.seq) > (r.priority, r.run_at, r.seq);
    END LOOP;
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_cursor_lower_updated()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}.claim_cursors'),
                                         hashtext(NEW.queue));
    UPDATE {schema}.claim_cursors c
    SET priority = NEW.priority, run_at = NEW.run_at, seq = NEW.seq
    WHERE c.queue = NEW.queue
        AND (c.priority, c.run_at, c.seq) > (NEW.priority, NEW.run_at, NEW.seq);
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_key_hash(p_stream text, p_id uuid)
 RETURNS bigint
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    b  bytea := CASE WHEN p_stream IS NULL THEN uuid_send(p_id)
                     ELSE convert_to(p_stream, 'UTF8') END;
    h  numeric := 14695981039346656037;
    lo integer;
BEGIN
    FOR k IN 0 .. length(b) - 1 LOOP
        lo := (h % 256)::integer;
        h := h - lo + (lo # get_byte(b, k));
        h := (h * 1099511628211) % 18446744073709551616;
    END LOOP;
    RETURN (h % 9223372036854775808)::bigint;
END;
$function$;

CREATE OR REPLACE FUNCTION {schema}.tenure_promote(p_streams text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_left text[];
BEGIN
    WITH nx AS MATERIALIZED (
        SELECT s.stream, (SELECT b.id FROM {schema}.items b
                          WHERE b.stream = s.stream AND NOT b.head AND b.state <> 'done'
                          ORDER BY b.seq LIMIT 1) AS nid
        FROM unnest(p_streams) AS s(stream)
    ), pr AS (
        UPDATE {schema}.items i SET head = true
        WHERE i.id = ANY(ARRAY(SELECT nx.nid FROM nx WHERE nx.nid IS NOT NULL))
        RETURNING i.stream
    )
    SELECT array_agg(nx.stream ORDER BY nx.stream) INTO v_left FROM nx
    WHERE NOT EXISTS (SELECT 1 FROM pr WHERE pr.stream = nx.stream);
    IF v_left IS NULL THEN
        RETURN;
    END IF;
    -- One lookup by key per stream, in the array's (sorted) order.
    PERFORM 1 FROM unnest(v_left) AS u(stream)
    CROSS JOIN LATERAL (SELECT 1 FROM {schema}.streams st WHERE st.stream = u.stream
                        FOR UPDATE) l;
    LOOP
        WITH nx AS MATERIALIZED (
            SELECT s.stream, (SELECT b.id FROM {schema}.items b
                              WHERE b.stream = s.stream AND NOT b.head AND b.state <> 'done'
                              ORDER BY b.seq LIMIT 1) AS nid
            FROM unnest(v_left) AS s(stream)
        ), pr AS (
            UPDATE {schema}.items i SET head = true
            WHERE i.id = ANY(ARRAY(SELECT nx.nid FROM nx WHERE nx.nid IS NOT NULL))
            RETURNING i.stream
        ), emptied AS (
            UPDATE {schema}.streams st SET pending = 0 FROM nx
            WHERE st.stream = nx.stream AND nx.nid IS NULL
        )
        SELECT array_agg(nx.stream ORDER BY nx.stream) INTO v_left FROM nx
        WHERE nx.nid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pr WHERE pr.stream = nx.stream);
        EXIT WHEN v_left IS NULL;
    END LOOP;
END;
$function$;

CREATE TRIGGER items_cursor_insert AFTER INSERT ON {schema}.items REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION {schema}.tenure_cursor_lower_inserted();
CREATE TRIGGER items_cursor_update AFTER UPDATE ON {schema}.items FOR EACH ROW WHEN (((new.state = 'ready'::text) AND new.head)) EXECUTE FUNCTION {schema}.tenure_cursor_lower_updated();
