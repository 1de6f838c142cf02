--
-- PostgreSQL database dump
--

--
-- Name: derived_employee_id(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.derived_employee_id(partner text, employee_ref text) RETURNS text
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
    SELECT 'emp_' || left(encode(sha256(convert_to(partner || ':' || employee_ref, 'UTF8')), 'hex'), 20)
$$;

--
-- Name: dispatch_generation(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.dispatch_generation(p text, pp text) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT 1 + count(*)::integer FROM lock_events WHERE partner_id = p AND pay_period = pp AND action = 'unlock'
$$;

--
-- Name: dispatch_on_lock(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.dispatch_on_lock() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.reason = 'approved' THEN
        PERFORM dispatch_open_run(NEW.partner_id, NEW.pay_period);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: dispatch_on_version(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.dispatch_on_version() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    rid bigint;
BEGIN
    SELECT id INTO rid FROM dispatch_runs
    WHERE partner_id = NEW.partner_id AND pay_period = NEW.pay_period AND run = dispatch_generation(NEW.partner_id, NEW.pay_period);
    IF rid IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, NEW.id, NEW.version, coalesce(e.employee_id, derived_employee_id(NEW.partner_id, NEW.employee_ref)), NEW.employee_ref,
        NEW.component, NEW.amount::text, NEW.currency, NEW.hours::text, NEW.rate::text, to_char(NEW.pay_date, 'YYYY-MM-DD')
    FROM (SELECT 1) one LEFT JOIN employees e ON e.partner_id = NEW.partner_id AND e.employee_ref = NEW.employee_ref
    ON CONFLICT (run_id, record_id, version) DO NOTHING;
    IF FOUND THEN
        UPDATE dispatch_runs SET total = total + 1, state = 'in_progress', completed_at = NULL, updated_at = now()
        WHERE id = rid;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: dispatch_open_run(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.dispatch_open_run(p text, pp text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    tgt text;
    gen integer;
    rid bigint;
    n integer;
    prior bigint[];
BEGIN
    SELECT dispatch_target INTO tgt FROM partners WHERE id = p;
    IF tgt IS NULL OR NOT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = p AND pay_period = pp AND reason = 'approved') THEN
        RETURN NULL;
    END IF;
    gen := dispatch_generation(p, pp);
    INSERT INTO dispatch_runs (partner_id, pay_period, run, target) VALUES (p, pp, gen, tgt)
        ON CONFLICT (partner_id, pay_period, run) DO NOTHING RETURNING id INTO rid;
    IF rid IS NULL THEN
        RETURN (SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND run = gen);
    END IF;
    prior := ARRAY(SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND id <> rid);
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, r.id, r.version, coalesce(e.employee_id, derived_employee_id(r.partner_id, r.employee_ref)), r.employee_ref,
        r.component, r.amount::text, r.currency, r.hours::text, r.rate::text, to_char(r.pay_date, 'YYYY-MM-DD')
    FROM records r LEFT JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
    WHERE r.partner_id = p AND r.pay_period = pp
      AND (cardinality(prior) = 0 OR NOT EXISTS (SELECT 1 FROM dispatch_due d
               WHERE d.run_id = ANY (prior) AND d.record_id = r.id AND d.version = r.version AND d.state IN ('succeeded', 'failed')))
      AND NOT EXISTS (SELECT 1 FROM dispatch_ledger_archive l WHERE l.record_id = r.id AND l.version = r.version)
    ORDER BY r.employee_ref, r.component;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE dispatch_runs SET total = n, state = CASE WHEN n = 0 THEN 'complete' ELSE 'in_progress' END,
        completed_at = CASE WHEN n = 0 THEN now() END
    WHERE id = rid;
    RETURN rid;
END
$$;

--
-- Name: employees_check_partner(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.employees_check_partner() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    partner_ids text[];
    n bigint;
    bad text;
BEGIN
    SELECT array_agg(k.partner_id) INTO partner_ids
    FROM (SELECT partner_id FROM new_rows GROUP BY partner_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert on table "employees" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: employees_immutable(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.employees_immutable() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.employee_id IS DISTINCT FROM OLD.employee_id
       OR NEW.partner_id IS DISTINCT FROM OLD.partner_id
       OR NEW.employee_ref IS DISTINCT FROM OLD.employee_ref THEN
        RAISE EXCEPTION 'employee mapping %/% is kept as onboarded and cannot be changed', OLD.partner_id, OLD.employee_ref
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

--
-- Name: employees_never_deleted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.employees_never_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'employee mapping %/% is kept as onboarded and cannot be deleted', OLD.partner_id, OLD.employee_ref
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;

--
-- Name: notify_enqueue(text, text, bigint, json); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_enqueue(p text, t text, s bigint, d json) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (SELECT notify_url FROM partners WHERE id = p) IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO notify_events (partner_id, event_type, subject, webhook_id, payload)
    VALUES (p, t, s, 'msg_' || t || '_' || s,
        json_build_object('type', t, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', d)::text)
    ON CONFLICT (event_type, subject) DO NOTHING;
END
$$;

--
-- Name: notify_on_envelope(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_on_envelope() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'submission.processed', NEW.id, json_build_object(
        'submission_id', NEW.id, 'name', NEW.file_name, 'source', NEW.source, 'status', NEW.status,
        'counts', coalesce(NEW.counts, '{}'::jsonb),
        'submission_url', '/v1/submissions/' || NEW.id,
        'result_url', '/v1/submissions/' || NEW.id || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.id || '/rows'));
    RETURN NULL;
END
$$;

--
-- Name: notify_on_replay(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_on_replay() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'replay.processed', NEW.id, json_build_object(
        'replay_id', NEW.id, 'submission_id', NEW.of_envelope, 'source', NEW.source, 'counts', NEW.counts,
        'submission_url', '/v1/submissions/' || NEW.of_envelope,
        'result_url', '/v1/submissions/' || NEW.of_envelope || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.of_envelope || '/rows'));
    RETURN NULL;
END
$$;

--
-- Name: notify_on_review(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_on_review() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    e envelopes;
BEGIN
    SELECT * INTO e FROM envelopes WHERE id = NEW.envelope_id;
    PERFORM notify_enqueue(e.partner_id, 'review.completed', e.id, json_build_object(
        'submission_id', e.id, 'name', e.file_name,
        'counts', (SELECT json_build_object(
            'approved', count(*) FILTER (WHERE status = 'approved'),
            'rejected', count(*) FILTER (WHERE status = 'rejected'),
            'superseded', count(*) FILTER (WHERE status = 'superseded'))
            FROM exceptions WHERE envelope_id = e.id),
        'submission_url', '/v1/submissions/' || e.id,
        'report_url', '/v1/submissions/' || e.id || '/review.csv'));
    RETURN NULL;
END
$$;

--
-- Name: period_locks_event(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.period_locks_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO lock_events (partner_id, pay_period, action, reason, by, at)
    VALUES (NEW.partner_id, NEW.pay_period, 'lock', NEW.reason, NEW.locked_by, NEW.locked_at);
    RETURN NULL;
END
$$;

--
-- Name: records_check_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.records_check_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
DECLARE
    probe_max bigint := 20 * (pg_relation_size('employees') / current_setting('block_size')::bigint);
    emp_partners text[];
    refs text[];
    partner_ids text[];
    envelope_ids bigint[];
    missing_partner text;
    missing_ref text;
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows, two hash tables: the distinct employees
    -- (g = 1) and the distinct partner and envelope references (g = 2).
    SELECT array_agg(k.partner_id) FILTER (WHERE k.g = 1), array_agg(k.employee_ref) FILTER (WHERE k.g = 1),
           array_agg(DISTINCT k.partner_id) FILTER (WHERE k.g = 2), array_remove(array_agg(DISTINCT k.envelope_id) FILTER (WHERE k.g = 2), NULL)
    INTO emp_partners, refs, partner_ids, envelope_ids
    FROM (SELECT partner_id, employee_ref, envelope_id, GROUPING(employee_ref, envelope_id) AS g FROM new_rows
          GROUP BY GROUPING SETS ((partner_id, employee_ref), (partner_id, envelope_id))) k;
    IF refs IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(refs) <= probe_max THEN
        -- Few employees for the mappings there are: one probe each.
        SELECT n.partner_id, n.employee_ref INTO missing_partner, missing_ref
        FROM unnest(emp_partners, refs) n(partner_id, employee_ref)
        LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
            WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
        WHERE m.mapped IS NULL;
    ELSE
        -- Many: the statement's partners' mappings hashed, read by the
        -- primary key's leading partner_id, not every partner's. EXECUTE
        -- plans for the arrays' size; it sets no FOUND: a row found has a
        -- partner_id (never NULL).
        EXECUTE 'SELECT n.partner_id, n.employee_ref FROM unnest($1, $2) n(partner_id, employee_ref)
            WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = ANY ($3)
                AND e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
            INTO missing_partner, missing_ref USING emp_partners, refs, partner_ids;
    END IF;
    IF missing_partner IS NOT NULL THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing_partner, missing_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    -- The references, as records_check_references checks them: the
    -- FOR KEY SHARE locks a foreign key takes, the error it raises.
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$_$;

--
-- Name: records_check_references(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.records_check_references() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    partner_ids text[];
    envelope_ids bigint[];
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows: the distinct references (usually one partner, one envelope).
    SELECT array_agg(DISTINCT k.partner_id), array_remove(array_agg(DISTINCT k.envelope_id), NULL)
    INTO partner_ids, envelope_ids
    FROM (SELECT partner_id, envelope_id FROM new_rows GROUP BY partner_id, envelope_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: referenced_guard(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.referenced_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
DECLARE
    referenced boolean;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', TG_ARGV[0]) INTO referenced;
        IF referenced THEN
            RAISE EXCEPTION 'truncate of table "%" leaves rows of table "%" referencing it', TG_TABLE_NAME, TG_ARGV[0]
                USING ERRCODE = 'foreign_key_violation', HINT = format('Truncate table "%s" in the same statement.', TG_ARGV[0]);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I = $1)', TG_ARGV[0], TG_ARGV[1]) INTO referenced USING OLD.id;
    IF referenced THEN
        RAISE EXCEPTION 'update or delete on table "%" violates the reference from table "%"', TG_TABLE_NAME, TG_ARGV[0]
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (id)=(%s) is still referenced from table "%s".', OLD.id, TG_ARGV[0]);
    END IF;
    RETURN NULL;
END
$_$;

--
-- Name: api_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_tokens (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    token_hash bytea NOT NULL,
    prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_tokens_token_hash_check CHECK ((length(token_hash) = 32))
);

--
-- Name: api_tokens_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: api_tokens_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.api_tokens_id_seq OWNED BY public.api_tokens.id;

--
-- Name: component_codes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.component_codes (
    partner_id text NOT NULL,
    code text NOT NULL,
    component text NOT NULL,
    exception_id bigint NOT NULL,
    decided_by text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: dispatch_conflicts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_conflicts (
    id bigint NOT NULL,
    key text NOT NULL,
    run_id bigint NOT NULL,
    stored_hash bytea NOT NULL,
    request_hash bytea NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: dispatch_conflicts_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.dispatch_conflicts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dispatch_conflicts_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.dispatch_conflicts_id_seq OWNED BY public.dispatch_conflicts.id;

--
-- Name: dispatch_due; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_due (
    id bigint NOT NULL,
    run_id bigint NOT NULL,
    record_id bigint NOT NULL,
    version integer NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    amount text NOT NULL,
    currency text NOT NULL,
    hours text,
    rate text,
    pay_date text,
    key text,
    state text DEFAULT 'pending'::text NOT NULL,
    round integer DEFAULT 0 NOT NULL,
    CONSTRAINT dispatch_due_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text, 'conflict'::text])))
)
WITH (fillfactor='40');

--
-- Name: dispatch_due_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.dispatch_due_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dispatch_due_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.dispatch_due_id_seq OWNED BY public.dispatch_due.id;

--
-- Name: dispatch_ledger; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_ledger (
    key text NOT NULL,
    request_hash bytea NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    version integer NOT NULL,
    record_id bigint NOT NULL,
    line bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_detail text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    CONSTRAINT dispatch_ledger_request_hash_check CHECK ((length(request_hash) = 32)),
    CONSTRAINT dispatch_ledger_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])))
)
WITH (fillfactor='50');

--
-- Name: dispatch_ledger_archive; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_ledger_archive (
    key text NOT NULL,
    request_hash bytea NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    version integer NOT NULL,
    record_id bigint NOT NULL,
    line bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_detail text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    archived_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispatch_ledger_request_hash_check CHECK ((length(request_hash) = 32)),
    CONSTRAINT dispatch_ledger_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])))
);

--
-- Name: dispatch_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_runs (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    run integer NOT NULL,
    target text NOT NULL,
    state text DEFAULT 'in_progress'::text NOT NULL,
    total integer DEFAULT 0 NOT NULL,
    settled integer DEFAULT 0 NOT NULL,
    cursor bigint DEFAULT 0 NOT NULL,
    requests bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT dispatch_runs_run_check CHECK ((run >= 1)),
    CONSTRAINT dispatch_runs_state_check CHECK ((state = ANY (ARRAY['in_progress'::text, 'complete'::text])))
);

--
-- Name: dispatch_runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.dispatch_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dispatch_runs_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.dispatch_runs_id_seq OWNED BY public.dispatch_runs.id;

--
-- Name: dispatch_targets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dispatch_targets (
    name text NOT NULL,
    url text NOT NULL,
    token_file text DEFAULT ''::text NOT NULL,
    rate_limit numeric DEFAULT 10 NOT NULL,
    chunk_size integer NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    retry_base_ms bigint DEFAULT 2000 NOT NULL,
    timeout_ms bigint DEFAULT 10000 NOT NULL,
    line_status boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispatch_targets_chunk_size_check CHECK (((chunk_size >= 1) AND (chunk_size <= 10000))),
    CONSTRAINT dispatch_targets_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT dispatch_targets_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT dispatch_targets_rate_limit_check CHECK ((rate_limit >= (0)::numeric)),
    CONSTRAINT dispatch_targets_retry_base_ms_check CHECK ((retry_base_ms >= 0)),
    CONSTRAINT dispatch_targets_timeout_ms_check CHECK ((timeout_ms > 0)),
    CONSTRAINT dispatch_targets_url_check CHECK ((url ~ '^https?://'::text))
);

--
-- Name: employees; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.employees (
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    employee_id text NOT NULL COLLATE pg_catalog."C",
    name text DEFAULT ''::text NOT NULL,
    source text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT employees_employee_id_check CHECK (((length(employee_id) >= 1) AND (length(employee_id) <= 128) AND ((employee_id COLLATE "default") !~ '[[:cntrl:]]'::text))),
    CONSTRAINT employees_source_check CHECK ((source = ANY (ARRAY['import'::text, 'derived'::text])))
);

--
-- Name: envelope_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_attempts (
    envelope_id bigint NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    last_error text,
    last_failed_at timestamp with time zone,
    requeues integer DEFAULT 0 NOT NULL,
    last_requeued_at timestamp with time zone
);

--
-- Name: envelope_chunks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_chunks (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE ONLY public.envelope_chunks ALTER COLUMN data SET STORAGE PLAIN;

--
-- Name: envelope_client_times; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_client_times (
    envelope_id bigint NOT NULL,
    client_mtime timestamp with time zone NOT NULL
);

--
-- Name: envelope_pgp; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_pgp (
    envelope_id bigint NOT NULL,
    armored boolean DEFAULT false NOT NULL,
    encrypted boolean NOT NULL,
    signed boolean NOT NULL,
    decrypted_with text,
    signer text,
    plaintext_sha256 bytea,
    plaintext_size bigint,
    refusal_code text,
    refusal_message text,
    seal_results boolean NOT NULL,
    CONSTRAINT envelope_pgp_check CHECK (((refusal_code IS NULL) = (plaintext_sha256 IS NOT NULL)))
);

--
-- Name: envelope_results; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_results (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE ONLY public.envelope_results ALTER COLUMN data SET COMPRESSION lz4;

--
-- Name: envelope_reviews; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelope_reviews (
    envelope_id bigint NOT NULL,
    data bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: envelopes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.envelopes (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    file_name text NOT NULL,
    submission_key text NOT NULL,
    sha256 bytea NOT NULL,
    size bigint NOT NULL,
    source text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    status text NOT NULL,
    replay_of bigint,
    seq bigint,
    counts jsonb,
    result_size bigint,
    processed_at timestamp with time zone,
    profile_version integer,
    result_format text,
    CONSTRAINT envelopes_check CHECK (((status = 'replay'::text) = (replay_of IS NOT NULL))),
    CONSTRAINT envelopes_result_format_check CHECK ((result_format = ANY (ARRAY['csv-excel'::text, 'xlsx'::text]))),
    CONSTRAINT envelopes_sha256_check CHECK ((length(sha256) = 32)),
    CONSTRAINT envelopes_size_check CHECK ((size >= 0)),
    CONSTRAINT envelopes_status_check CHECK ((status = ANY (ARRAY['received'::text, 'processed'::text, 'replay'::text, 'key_reuse'::text, 'incomplete'::text])))
);

--
-- Name: envelopes_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.envelopes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: envelopes_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.envelopes_id_seq OWNED BY public.envelopes.id;

--
-- Name: exceptions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.exceptions (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    pay_period text NOT NULL,
    component text NOT NULL,
    record_id bigint,
    code text NOT NULL,
    current jsonb,
    proposed jsonb NOT NULL,
    proposed_hash bytea NOT NULL,
    differing text[] NOT NULL,
    envelope_id bigint,
    line integer,
    row_no integer,
    status text DEFAULT 'open'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    decided_by text,
    decided_at timestamp with time zone,
    note text,
    superseded_by bigint,
    partner_code text,
    CONSTRAINT exceptions_code_check CHECK ((code = ANY (ARRAY['record_locked'::text, 'period_locked'::text, 'unknown_employee'::text, 'unknown_component'::text]))),
    CONSTRAINT exceptions_status_check CHECK ((status = ANY (ARRAY['open'::text, 'approved'::text, 'rejected'::text, 'superseded'::text])))
);

--
-- Name: exceptions_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.exceptions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: exceptions_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.exceptions_id_seq OWNED BY public.exceptions.id;

--
-- Name: goose_db_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.goose_db_version (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);

--
-- Name: goose_db_version_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.goose_db_version ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.goose_db_version_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: idempotency_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.idempotency_keys (
    partner_id text NOT NULL,
    idem_key text NOT NULL,
    lease_owner bytea NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_idem_key_check CHECK (((length(idem_key) >= 1) AND (length(idem_key) <= 255)))
);

--
-- Name: lock_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.lock_events (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    action text NOT NULL,
    reason text NOT NULL,
    by text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    records bigint,
    CONSTRAINT lock_events_action_check CHECK ((action = ANY (ARRAY['lock'::text, 'unlock'::text])))
);

--
-- Name: lock_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.lock_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: lock_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.lock_events_id_seq OWNED BY public.lock_events.id;

--
-- Name: login_failures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.login_failures (
    scope text NOT NULL,
    key text NOT NULL,
    failures integer NOT NULL,
    last_failed_at timestamp with time zone NOT NULL,
    locked_until timestamp with time zone,
    CONSTRAINT login_failures_scope_check CHECK ((scope = ANY (ARRAY['account'::text, 'address'::text])))
);

--
-- Name: notify_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.notify_attempts (
    event_id bigint NOT NULL,
    attempt integer NOT NULL,
    url text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    status integer,
    error text DEFAULT ''::text NOT NULL,
    CONSTRAINT notify_attempts_attempt_check CHECK ((attempt >= 1))
);

--
-- Name: notify_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.notify_events (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    event_type text NOT NULL,
    subject bigint NOT NULL,
    webhook_id text NOT NULL,
    payload text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    round_attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_status integer,
    last_error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    CONSTRAINT notify_events_event_type_check CHECK ((event_type = ANY (ARRAY['submission.processed'::text, 'replay.processed'::text, 'review.completed'::text]))),
    CONSTRAINT notify_events_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])))
);

--
-- Name: notify_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.notify_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: notify_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.notify_events_id_seq OWNED BY public.notify_events.id;

--
-- Name: notify_redeliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.notify_redeliveries (
    id bigint NOT NULL,
    event_id bigint NOT NULL,
    by_whom text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: notify_redeliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.notify_redeliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: notify_redeliveries_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.notify_redeliveries_id_seq OWNED BY public.notify_redeliveries.id;

--
-- Name: partner_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.partner_keys (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    fingerprint text NOT NULL,
    public_key text NOT NULL,
    comment text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);

--
-- Name: partner_keys_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.partner_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: partner_keys_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.partner_keys_id_seq OWNED BY public.partner_keys.id;

--
-- Name: partner_pgp_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.partner_pgp_keys (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    fingerprint text NOT NULL,
    user_id text DEFAULT ''::text NOT NULL,
    public_key text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    replaced_at timestamp with time zone,
    CONSTRAINT partner_pgp_keys_fingerprint_check CHECK ((fingerprint ~ '^[0-9A-F]{40,64}$'::text))
);

--
-- Name: partner_pgp_keys_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.partner_pgp_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: partner_pgp_keys_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.partner_pgp_keys_id_seq OWNED BY public.partner_pgp_keys.id;

--
-- Name: partner_profiles; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.partner_profiles (
    partner_id text NOT NULL,
    version integer NOT NULL,
    yaml text NOT NULL,
    mapping jsonb NOT NULL,
    set_by text NOT NULL,
    set_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT partner_profiles_version_check CHECK ((version > 0))
);

--
-- Name: partners; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.partners (
    id text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    delimiter text DEFAULT ''::text NOT NULL,
    decimal_comma boolean DEFAULT false NOT NULL,
    date_format text DEFAULT ''::text NOT NULL,
    currency text DEFAULT ''::text NOT NULL,
    file_pattern text DEFAULT ''::text NOT NULL,
    mode text DEFAULT 'row'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    unknown_employee text DEFAULT 'create'::text NOT NULL,
    dispatch_target text,
    notify_url text,
    pgp text DEFAULT 'off'::text NOT NULL,
    allow_from cidr[] DEFAULT '{}'::cidr[] NOT NULL,
    CONSTRAINT partners_currency_check CHECK (((currency = ''::text) OR (currency ~ '^[A-Z]{3}$'::text))),
    CONSTRAINT partners_delimiter_check CHECK ((delimiter = ANY (ARRAY[''::text, ','::text, ';'::text, '|'::text, '	'::text]))),
    CONSTRAINT partners_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT partners_mode_check CHECK ((mode = ANY (ARRAY['row'::text, 'all-or-nothing'::text]))),
    CONSTRAINT partners_notify_url_check CHECK ((notify_url ~ '^https?://[^\s]+$'::text)),
    CONSTRAINT partners_pgp_check CHECK ((pgp = ANY (ARRAY['off'::text, 'accept'::text, 'require'::text]))),
    CONSTRAINT partners_unknown_employee_check CHECK ((unknown_employee = ANY (ARRAY['create'::text, 'reject'::text, 'hold'::text])))
);

--
-- Name: period_locks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.period_locks (
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    reason text NOT NULL,
    locked_by text NOT NULL,
    locked_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT period_locks_reason_check CHECK ((reason = ANY (ARRAY['approved'::text, 'paid'::text])))
);

--
-- Name: pgp_platform_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pgp_platform_keys (
    id bigint NOT NULL,
    fingerprint text NOT NULL,
    algorithm text NOT NULL,
    public_key text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    retired_at timestamp with time zone,
    CONSTRAINT pgp_platform_keys_fingerprint_check CHECK ((fingerprint ~ '^[0-9A-F]{40,64}$'::text)),
    CONSTRAINT pgp_platform_keys_sealed_check CHECK ((length(sealed) > 21))
);

--
-- Name: pgp_platform_keys_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.pgp_platform_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: pgp_platform_keys_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.pgp_platform_keys_id_seq OWNED BY public.pgp_platform_keys.id;

--
-- Name: record_history; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.record_history (
    record_id bigint NOT NULL,
    version integer NOT NULL,
    amount numeric NOT NULL,
    currency text NOT NULL,
    hours numeric,
    rate numeric,
    pay_date date,
    content_hash bytea NOT NULL,
    envelope_id bigint,
    line integer,
    written_at timestamp with time zone NOT NULL,
    replaced_at timestamp with time zone DEFAULT now() NOT NULL,
    replaced_by text NOT NULL
);

--
-- Name: records; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.records (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    pay_period text NOT NULL,
    component text NOT NULL,
    amount numeric NOT NULL,
    currency text NOT NULL,
    hours numeric,
    rate numeric,
    pay_date date,
    content_hash bytea NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    last_seq bigint,
    locked_reason text,
    locked_at timestamp with time zone,
    envelope_id bigint,
    line integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT records_locked_reason_check CHECK ((locked_reason = ANY (ARRAY['approved'::text, 'paid'::text])))
);

--
-- Name: records_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.records_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: records_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.records_id_seq OWNED BY public.records.id;

--
-- Name: replay_legs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.replay_legs (
    partner_id text NOT NULL,
    leg_key bytea NOT NULL,
    of_envelope bigint NOT NULL,
    row_no integer NOT NULL,
    replay_id bigint NOT NULL,
    outcome text,
    code text,
    result_line text,
    settled boolean DEFAULT false NOT NULL,
    CONSTRAINT replay_legs_check CHECK (((NOT settled) OR ((outcome IS NOT NULL) AND (outcome <> 'rejected'::text)))),
    CONSTRAINT replay_legs_leg_key_check CHECK ((length(leg_key) = 32)),
    CONSTRAINT replay_legs_row_no_check CHECK ((row_no > 0))
);

--
-- Name: replays; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.replays (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    of_envelope bigint NOT NULL,
    idem_key text NOT NULL,
    source text NOT NULL,
    body_sha256 bytea NOT NULL,
    body bytea NOT NULL,
    counts jsonb NOT NULL,
    result bytea NOT NULL,
    response_status integer NOT NULL,
    response_body bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    response_type text NOT NULL,
    CONSTRAINT replays_body_sha256_check CHECK ((length(body_sha256) = 32))
);

--
-- Name: replays_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.replays_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: replays_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.replays_id_seq OWNED BY public.replays.id;

--
-- Name: result_workbooks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.result_workbooks (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE ONLY public.result_workbooks ALTER COLUMN data SET STORAGE MAIN;
ALTER TABLE ONLY public.result_workbooks ALTER COLUMN data SET COMPRESSION lz4;

--
-- Name: review_audit; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.review_audit (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor text NOT NULL,
    via text NOT NULL,
    action text NOT NULL,
    exception_id bigint,
    partner_id text,
    detail text DEFAULT ''::text NOT NULL,
    CONSTRAINT review_audit_via_check CHECK ((via = ANY (ARRAY['cli'::text, 'api'::text, 'console'::text, 'sftp'::text, 'http'::text, 'webhook'::text])))
);

--
-- Name: review_audit_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.review_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: review_audit_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.review_audit_id_seq OWNED BY public.review_audit.id;

--
-- Name: reviewer_sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reviewer_sessions (
    token_hash bytea NOT NULL,
    reviewer text NOT NULL,
    kind text NOT NULL,
    csrf_token text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT reviewer_sessions_kind_check CHECK ((kind = ANY (ARRAY['console'::text, 'api'::text]))),
    CONSTRAINT reviewer_sessions_token_hash_check CHECK ((length(token_hash) = 32))
);

--
-- Name: reviewers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reviewers (
    name text NOT NULL,
    password_hash text NOT NULL,
    partners text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    CONSTRAINT reviewers_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'::text))
);

--
-- Name: sealed_result_chunks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sealed_result_chunks (
    envelope_id bigint NOT NULL,
    kind text NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL
);

--
-- Name: sealed_results; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sealed_results (
    envelope_id bigint NOT NULL,
    kind text NOT NULL,
    recipient text NOT NULL,
    signer text NOT NULL,
    size bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sealed_results_kind_check CHECK ((kind = ANY (ARRAY['result'::text, 'review'::text])))
);

--
-- Name: sftp_upload_chunks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sftp_upload_chunks (
    upload_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE ONLY public.sftp_upload_chunks ALTER COLUMN data SET STORAGE PLAIN;

--
-- Name: sftp_uploads; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sftp_uploads (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    name text NOT NULL,
    size bigint DEFAULT 0 NOT NULL,
    sha256_state bytea NOT NULL,
    client_mtime timestamp with time zone,
    started timestamp with time zone DEFAULT now() NOT NULL,
    touched timestamp with time zone DEFAULT now() NOT NULL,
    writer text,
    writer_until timestamp with time zone,
    CONSTRAINT sftp_uploads_check CHECK (((writer IS NULL) = (writer_until IS NULL))),
    CONSTRAINT sftp_uploads_size_check CHECK ((size >= 0))
);

--
-- Name: sftp_uploads_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.sftp_uploads ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sftp_uploads_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: ssh_host_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ssh_host_keys (
    id bigint NOT NULL,
    key_type text NOT NULL,
    state text NOT NULL,
    fingerprint text NOT NULL,
    public_key bytea NOT NULL,
    sealed bytea NOT NULL,
    origin text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    activated_at timestamp with time zone,
    retired_at timestamp with time zone,
    CONSTRAINT ssh_host_keys_check CHECK (((state = 'active'::text) <= (activated_at IS NOT NULL))),
    CONSTRAINT ssh_host_keys_check1 CHECK (((state = 'retired'::text) = (retired_at IS NOT NULL))),
    CONSTRAINT ssh_host_keys_fingerprint_check CHECK ((fingerprint ~~ 'SHA256:%'::text)),
    CONSTRAINT ssh_host_keys_key_type_check CHECK ((key_type = ANY (ARRAY['ssh-ed25519'::text, 'ecdsa-sha2-nistp256'::text, 'ssh-rsa'::text]))),
    CONSTRAINT ssh_host_keys_sealed_check CHECK ((length(sealed) > 21)),
    CONSTRAINT ssh_host_keys_state_check CHECK ((state = ANY (ARRAY['next'::text, 'active'::text, 'retired'::text])))
);

--
-- Name: ssh_host_keys_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ssh_host_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: ssh_host_keys_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ssh_host_keys_id_seq OWNED BY public.ssh_host_keys.id;

--
-- Name: submissions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.submissions (
    partner_id text NOT NULL,
    submission_key text NOT NULL,
    envelope_id bigint NOT NULL,
    sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    partner_id text NOT NULL,
    webhook_id text NOT NULL,
    body_sha256 bytea NOT NULL,
    body bytea NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    entity_id text,
    version bigint,
    outcome text,
    code text,
    record_id bigint,
    record_version integer,
    response_status integer,
    response_type text,
    response_body bytea,
    CONSTRAINT webhook_deliveries_body_sha256_check CHECK ((length(body_sha256) = 32)),
    CONSTRAINT webhook_deliveries_webhook_id_check CHECK (((length(webhook_id) >= 1) AND (length(webhook_id) <= 255)))
);

--
-- Name: webhook_entities; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_entities (
    partner_id text NOT NULL,
    entity_id text NOT NULL,
    version bigint NOT NULL,
    record_id bigint,
    webhook_id text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: webhook_quarantine; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_quarantine (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    webhook_id text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    body bytea NOT NULL,
    code text NOT NULL,
    field text DEFAULT ''::text NOT NULL,
    message text NOT NULL
);

--
-- Name: webhook_quarantine_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.webhook_quarantine_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: webhook_quarantine_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.webhook_quarantine_id_seq OWNED BY public.webhook_quarantine.id;

--
-- Name: webhook_secrets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_secrets (
    id bigint NOT NULL,
    partner_id text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT webhook_secrets_sealed_check CHECK ((length(sealed) > 21))
);

--
-- Name: webhook_secrets_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.webhook_secrets_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: webhook_secrets_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.webhook_secrets_id_seq OWNED BY public.webhook_secrets.id;

--
-- Name: api_tokens id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens ALTER COLUMN id SET DEFAULT nextval('public.api_tokens_id_seq'::regclass);

--
-- Name: dispatch_conflicts id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_conflicts ALTER COLUMN id SET DEFAULT nextval('public.dispatch_conflicts_id_seq'::regclass);

--
-- Name: dispatch_due id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_due ALTER COLUMN id SET DEFAULT nextval('public.dispatch_due_id_seq'::regclass);

--
-- Name: dispatch_runs id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_runs ALTER COLUMN id SET DEFAULT nextval('public.dispatch_runs_id_seq'::regclass);

--
-- Name: envelopes id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelopes ALTER COLUMN id SET DEFAULT nextval('public.envelopes_id_seq'::regclass);

--
-- Name: exceptions id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions ALTER COLUMN id SET DEFAULT nextval('public.exceptions_id_seq'::regclass);

--
-- Name: lock_events id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lock_events ALTER COLUMN id SET DEFAULT nextval('public.lock_events_id_seq'::regclass);

--
-- Name: notify_events id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_events ALTER COLUMN id SET DEFAULT nextval('public.notify_events_id_seq'::regclass);

--
-- Name: notify_redeliveries id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_redeliveries ALTER COLUMN id SET DEFAULT nextval('public.notify_redeliveries_id_seq'::regclass);

--
-- Name: partner_keys id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_keys ALTER COLUMN id SET DEFAULT nextval('public.partner_keys_id_seq'::regclass);

--
-- Name: partner_pgp_keys id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_pgp_keys ALTER COLUMN id SET DEFAULT nextval('public.partner_pgp_keys_id_seq'::regclass);

--
-- Name: pgp_platform_keys id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pgp_platform_keys ALTER COLUMN id SET DEFAULT nextval('public.pgp_platform_keys_id_seq'::regclass);

--
-- Name: records id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.records ALTER COLUMN id SET DEFAULT nextval('public.records_id_seq'::regclass);

--
-- Name: replays id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replays ALTER COLUMN id SET DEFAULT nextval('public.replays_id_seq'::regclass);

--
-- Name: review_audit id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.review_audit ALTER COLUMN id SET DEFAULT nextval('public.review_audit_id_seq'::regclass);

--
-- Name: ssh_host_keys id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ssh_host_keys ALTER COLUMN id SET DEFAULT nextval('public.ssh_host_keys_id_seq'::regclass);

--
-- Name: webhook_quarantine id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_quarantine ALTER COLUMN id SET DEFAULT nextval('public.webhook_quarantine_id_seq'::regclass);

--
-- Name: webhook_secrets id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_secrets ALTER COLUMN id SET DEFAULT nextval('public.webhook_secrets_id_seq'::regclass);

--
-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

--
-- Name: api_tokens api_tokens_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);

--
-- Name: component_codes component_codes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.component_codes
    ADD CONSTRAINT component_codes_pkey PRIMARY KEY (partner_id, code);

--
-- Name: dispatch_conflicts dispatch_conflicts_key_request_hash_run_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_conflicts
    ADD CONSTRAINT dispatch_conflicts_key_request_hash_run_id_key UNIQUE (key, request_hash, run_id);

--
-- Name: dispatch_conflicts dispatch_conflicts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_conflicts
    ADD CONSTRAINT dispatch_conflicts_pkey PRIMARY KEY (id);

--
-- Name: dispatch_due dispatch_due_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_due
    ADD CONSTRAINT dispatch_due_pkey PRIMARY KEY (id);

--
-- Name: dispatch_due dispatch_due_run_id_record_id_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_due
    ADD CONSTRAINT dispatch_due_run_id_record_id_version_key UNIQUE (run_id, record_id, version);

--
-- Name: dispatch_ledger_archive dispatch_ledger_archive_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_ledger_archive
    ADD CONSTRAINT dispatch_ledger_archive_pkey PRIMARY KEY (key);

--
-- Name: dispatch_ledger dispatch_ledger_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_ledger
    ADD CONSTRAINT dispatch_ledger_pkey PRIMARY KEY (key);

--
-- Name: dispatch_runs dispatch_runs_partner_id_pay_period_run_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_runs
    ADD CONSTRAINT dispatch_runs_partner_id_pay_period_run_key UNIQUE (partner_id, pay_period, run);

--
-- Name: dispatch_runs dispatch_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_runs
    ADD CONSTRAINT dispatch_runs_pkey PRIMARY KEY (id);

--
-- Name: dispatch_targets dispatch_targets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_targets
    ADD CONSTRAINT dispatch_targets_pkey PRIMARY KEY (name);

--
-- Name: employees employees_employee_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.employees
    ADD CONSTRAINT employees_employee_id_key UNIQUE (employee_id);

--
-- Name: employees employees_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.employees
    ADD CONSTRAINT employees_pkey PRIMARY KEY (partner_id, employee_ref);

--
-- Name: envelope_attempts envelope_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_attempts
    ADD CONSTRAINT envelope_attempts_pkey PRIMARY KEY (envelope_id);

--
-- Name: envelope_chunks envelope_chunks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_chunks
    ADD CONSTRAINT envelope_chunks_pkey PRIMARY KEY (envelope_id, n);

--
-- Name: envelope_client_times envelope_client_times_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_client_times
    ADD CONSTRAINT envelope_client_times_pkey PRIMARY KEY (envelope_id);

--
-- Name: envelope_pgp envelope_pgp_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_pgp
    ADD CONSTRAINT envelope_pgp_pkey PRIMARY KEY (envelope_id);

--
-- Name: envelope_results envelope_results_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_results
    ADD CONSTRAINT envelope_results_pkey PRIMARY KEY (envelope_id, n);

--
-- Name: envelope_reviews envelope_reviews_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_reviews
    ADD CONSTRAINT envelope_reviews_pkey PRIMARY KEY (envelope_id);

--
-- Name: envelopes envelopes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelopes
    ADD CONSTRAINT envelopes_pkey PRIMARY KEY (id);

--
-- Name: exceptions exceptions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions
    ADD CONSTRAINT exceptions_pkey PRIMARY KEY (id);

--
-- Name: goose_db_version goose_db_version_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.goose_db_version
    ADD CONSTRAINT goose_db_version_pkey PRIMARY KEY (id);

--
-- Name: idempotency_keys idempotency_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (partner_id, idem_key);

--
-- Name: lock_events lock_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lock_events
    ADD CONSTRAINT lock_events_pkey PRIMARY KEY (id);

--
-- Name: login_failures login_failures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.login_failures
    ADD CONSTRAINT login_failures_pkey PRIMARY KEY (scope, key);

--
-- Name: notify_attempts notify_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_attempts
    ADD CONSTRAINT notify_attempts_pkey PRIMARY KEY (event_id, attempt);

--
-- Name: notify_events notify_events_event_type_subject_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_events
    ADD CONSTRAINT notify_events_event_type_subject_key UNIQUE (event_type, subject);

--
-- Name: notify_events notify_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_events
    ADD CONSTRAINT notify_events_pkey PRIMARY KEY (id);

--
-- Name: notify_events notify_events_webhook_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_events
    ADD CONSTRAINT notify_events_webhook_id_key UNIQUE (webhook_id);

--
-- Name: notify_redeliveries notify_redeliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_redeliveries
    ADD CONSTRAINT notify_redeliveries_pkey PRIMARY KEY (id);

--
-- Name: partner_keys partner_keys_partner_id_fingerprint_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_keys
    ADD CONSTRAINT partner_keys_partner_id_fingerprint_key UNIQUE (partner_id, fingerprint);

--
-- Name: partner_keys partner_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_keys
    ADD CONSTRAINT partner_keys_pkey PRIMARY KEY (id);

--
-- Name: partner_pgp_keys partner_pgp_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_pgp_keys
    ADD CONSTRAINT partner_pgp_keys_pkey PRIMARY KEY (id);

--
-- Name: partner_profiles partner_profiles_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_profiles
    ADD CONSTRAINT partner_profiles_pkey PRIMARY KEY (partner_id, version);

--
-- Name: partners partners_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partners
    ADD CONSTRAINT partners_pkey PRIMARY KEY (id);

--
-- Name: period_locks period_locks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.period_locks
    ADD CONSTRAINT period_locks_pkey PRIMARY KEY (partner_id, pay_period);

--
-- Name: pgp_platform_keys pgp_platform_keys_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pgp_platform_keys
    ADD CONSTRAINT pgp_platform_keys_id_key UNIQUE (id);

--
-- Name: pgp_platform_keys pgp_platform_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pgp_platform_keys
    ADD CONSTRAINT pgp_platform_keys_pkey PRIMARY KEY (fingerprint);

--
-- Name: record_history record_history_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.record_history
    ADD CONSTRAINT record_history_pkey PRIMARY KEY (record_id, version);

--
-- Name: records records_natural_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.records
    ADD CONSTRAINT records_natural_key UNIQUE (partner_id, pay_period, employee_ref, component);

--
-- Name: records records_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.records
    ADD CONSTRAINT records_pkey PRIMARY KEY (id);

--
-- Name: replay_legs replay_legs_of_envelope_row_no_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replay_legs
    ADD CONSTRAINT replay_legs_of_envelope_row_no_key UNIQUE (of_envelope, row_no);

--
-- Name: replay_legs replay_legs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replay_legs
    ADD CONSTRAINT replay_legs_pkey PRIMARY KEY (partner_id, leg_key);

--
-- Name: replays replays_partner_id_of_envelope_idem_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replays
    ADD CONSTRAINT replays_partner_id_of_envelope_idem_key_key UNIQUE (partner_id, of_envelope, idem_key);

--
-- Name: replays replays_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replays
    ADD CONSTRAINT replays_pkey PRIMARY KEY (id);

--
-- Name: result_workbooks result_workbooks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.result_workbooks
    ADD CONSTRAINT result_workbooks_pkey PRIMARY KEY (envelope_id, n);

--
-- Name: review_audit review_audit_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.review_audit
    ADD CONSTRAINT review_audit_pkey PRIMARY KEY (id);

--
-- Name: reviewer_sessions reviewer_sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reviewer_sessions
    ADD CONSTRAINT reviewer_sessions_pkey PRIMARY KEY (token_hash);

--
-- Name: reviewers reviewers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reviewers
    ADD CONSTRAINT reviewers_pkey PRIMARY KEY (name);

--
-- Name: sealed_result_chunks sealed_result_chunks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sealed_result_chunks
    ADD CONSTRAINT sealed_result_chunks_pkey PRIMARY KEY (envelope_id, kind, n);

--
-- Name: sealed_results sealed_results_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sealed_results
    ADD CONSTRAINT sealed_results_pkey PRIMARY KEY (envelope_id, kind);

--
-- Name: sftp_upload_chunks sftp_upload_chunks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sftp_upload_chunks
    ADD CONSTRAINT sftp_upload_chunks_pkey PRIMARY KEY (upload_id, n);

--
-- Name: sftp_uploads sftp_uploads_partner_id_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sftp_uploads
    ADD CONSTRAINT sftp_uploads_partner_id_name_key UNIQUE (partner_id, name);

--
-- Name: sftp_uploads sftp_uploads_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sftp_uploads
    ADD CONSTRAINT sftp_uploads_pkey PRIMARY KEY (id);

--
-- Name: ssh_host_keys ssh_host_keys_fingerprint_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ssh_host_keys
    ADD CONSTRAINT ssh_host_keys_fingerprint_key UNIQUE (fingerprint);

--
-- Name: ssh_host_keys ssh_host_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ssh_host_keys
    ADD CONSTRAINT ssh_host_keys_pkey PRIMARY KEY (id);

--
-- Name: submissions submissions_envelope_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_envelope_id_key UNIQUE (envelope_id);

--
-- Name: submissions submissions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_pkey PRIMARY KEY (partner_id, submission_key);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (partner_id, webhook_id);

--
-- Name: webhook_entities webhook_entities_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_entities
    ADD CONSTRAINT webhook_entities_pkey PRIMARY KEY (partner_id, entity_id);

--
-- Name: webhook_quarantine webhook_quarantine_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_quarantine
    ADD CONSTRAINT webhook_quarantine_pkey PRIMARY KEY (id);

--
-- Name: webhook_secrets webhook_secrets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_secrets
    ADD CONSTRAINT webhook_secrets_pkey PRIMARY KEY (id);

--
-- Name: api_tokens_partner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_tokens_partner ON public.api_tokens USING btree (partner_id) WHERE (revoked_at IS NULL);

--
-- Name: dispatch_due_order; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dispatch_due_order ON public.dispatch_due USING btree (run_id, round, id);

--
-- Name: dispatch_ledger_archive_record; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dispatch_ledger_archive_record ON public.dispatch_ledger_archive USING btree (record_id, version);

--
-- Name: dispatch_runs_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dispatch_runs_open ON public.dispatch_runs USING btree (id) WHERE (state = 'in_progress'::text);

--
-- Name: envelopes_partner_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX envelopes_partner_name ON public.envelopes USING btree (partner_id, lower(file_name), id);

--
-- Name: envelopes_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX envelopes_received ON public.envelopes USING btree (id) WHERE (status = 'received'::text);

--
-- Name: envelopes_sftp_inbox; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX envelopes_sftp_inbox ON public.envelopes USING btree (partner_id, received_at) WHERE ((source = 'sftp'::text) AND (status <> 'incomplete'::text));

--
-- Name: exceptions_envelope; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX exceptions_envelope ON public.exceptions USING btree (envelope_id);

--
-- Name: exceptions_one_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX exceptions_one_open ON public.exceptions USING btree (partner_id, employee_ref, pay_period, component) WHERE (status = 'open'::text);

--
-- Name: exceptions_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX exceptions_status ON public.exceptions USING btree (status, partner_id, id);

--
-- Name: idempotency_keys_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idempotency_keys_created ON public.idempotency_keys USING btree (created_at);

--
-- Name: lock_events_period; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX lock_events_period ON public.lock_events USING btree (partner_id, pay_period, id);

--
-- Name: notify_events_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notify_events_due ON public.notify_events USING btree (next_attempt_at, id) WHERE (state = 'pending'::text);

--
-- Name: notify_events_partner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notify_events_partner ON public.notify_events USING btree (partner_id, id);

--
-- Name: notify_events_partner_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notify_events_partner_due ON public.notify_events USING btree (partner_id, next_attempt_at, id) WHERE (state = 'pending'::text);

--
-- Name: partner_pgp_keys_active; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX partner_pgp_keys_active ON public.partner_pgp_keys USING btree (partner_id, fingerprint) WHERE (replaced_at IS NULL);

--
-- Name: review_audit_exception; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX review_audit_exception ON public.review_audit USING btree (exception_id);

--
-- Name: reviewer_sessions_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reviewer_sessions_expiry ON public.reviewer_sessions USING btree (expires_at);

--
-- Name: sftp_uploads_touched; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sftp_uploads_touched ON public.sftp_uploads USING btree (touched);

--
-- Name: ssh_host_keys_one_active; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ssh_host_keys_one_active ON public.ssh_host_keys USING btree (key_type) WHERE (state = 'active'::text);

--
-- Name: ssh_host_keys_one_next; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ssh_host_keys_one_next ON public.ssh_host_keys USING btree (key_type) WHERE (state = 'next'::text);

--
-- Name: webhook_deliveries_record; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_record ON public.webhook_deliveries USING btree (record_id);

--
-- Name: webhook_quarantine_partner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_quarantine_partner ON public.webhook_quarantine USING btree (partner_id, id);

--
-- Name: webhook_secrets_partner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_secrets_partner ON public.webhook_secrets USING btree (partner_id) WHERE (revoked_at IS NULL);

--
-- Name: employees employees_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER employees_immutable BEFORE UPDATE ON public.employees FOR EACH ROW EXECUTE FUNCTION public.employees_immutable();

--
-- Name: employees employees_never_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER employees_never_deleted BEFORE DELETE ON public.employees FOR EACH ROW EXECUTE FUNCTION public.employees_never_deleted();

--
-- Name: employees employees_partner_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER employees_partner_insert AFTER INSERT ON public.employees REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.employees_check_partner();

--
-- Name: envelope_reviews envelope_reviews_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelope_reviews_notify AFTER INSERT ON public.envelope_reviews FOR EACH ROW EXECUTE FUNCTION public.notify_on_review();

--
-- Name: envelopes envelopes_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelopes_notify AFTER UPDATE OF status ON public.envelopes FOR EACH ROW WHEN (((old.status = 'received'::text) AND (new.status = ANY (ARRAY['processed'::text, 'key_reuse'::text])))) EXECUTE FUNCTION public.notify_on_envelope();

--
-- Name: envelopes envelopes_referenced_by_chunks; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelopes_referenced_by_chunks AFTER DELETE OR UPDATE OF id ON public.envelopes FOR EACH ROW EXECUTE FUNCTION public.referenced_guard('envelope_chunks', 'envelope_id');

--
-- Name: envelopes envelopes_referenced_by_records; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelopes_referenced_by_records AFTER DELETE OR UPDATE OF id ON public.envelopes FOR EACH ROW EXECUTE FUNCTION public.referenced_guard('records', 'envelope_id');

--
-- Name: envelopes envelopes_truncate_referenced_by_chunks; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelopes_truncate_referenced_by_chunks AFTER TRUNCATE ON public.envelopes FOR EACH STATEMENT EXECUTE FUNCTION public.referenced_guard('envelope_chunks', 'envelope_id');

--
-- Name: envelopes envelopes_truncate_referenced_by_records; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER envelopes_truncate_referenced_by_records AFTER TRUNCATE ON public.envelopes FOR EACH STATEMENT EXECUTE FUNCTION public.referenced_guard('records', 'envelope_id');

--
-- Name: partners partners_referenced_by_employees; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER partners_referenced_by_employees AFTER DELETE OR UPDATE OF id ON public.partners FOR EACH ROW EXECUTE FUNCTION public.referenced_guard('employees', 'partner_id');

--
-- Name: partners partners_referenced_by_records; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER partners_referenced_by_records AFTER DELETE OR UPDATE OF id ON public.partners FOR EACH ROW EXECUTE FUNCTION public.referenced_guard('records', 'partner_id');

--
-- Name: partners partners_truncate_referenced_by_employees; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER partners_truncate_referenced_by_employees AFTER TRUNCATE ON public.partners FOR EACH STATEMENT EXECUTE FUNCTION public.referenced_guard('employees', 'partner_id');

--
-- Name: partners partners_truncate_referenced_by_records; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER partners_truncate_referenced_by_records AFTER TRUNCATE ON public.partners FOR EACH STATEMENT EXECUTE FUNCTION public.referenced_guard('records', 'partner_id');

--
-- Name: period_locks period_locks_dispatch; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER period_locks_dispatch AFTER INSERT OR UPDATE ON public.period_locks FOR EACH ROW EXECUTE FUNCTION public.dispatch_on_lock();

--
-- Name: period_locks period_locks_event; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER period_locks_event AFTER INSERT OR UPDATE ON public.period_locks FOR EACH ROW EXECUTE FUNCTION public.period_locks_event();

--
-- Name: records records_check_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER records_check_insert AFTER INSERT ON public.records REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.records_check_insert();

--
-- Name: records records_dispatch_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER records_dispatch_insert AFTER INSERT ON public.records FOR EACH ROW WHEN ((new.locked_reason IS NOT NULL)) EXECUTE FUNCTION public.dispatch_on_version();

--
-- Name: records records_dispatch_version; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER records_dispatch_version AFTER UPDATE ON public.records FOR EACH ROW WHEN (((new.locked_reason IS NOT NULL) AND (new.version <> old.version))) EXECUTE FUNCTION public.dispatch_on_version();

--
-- Name: records records_references_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER records_references_update AFTER UPDATE ON public.records REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.records_check_references();

--
-- Name: replays replays_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER replays_notify AFTER UPDATE OF result ON public.replays FOR EACH ROW WHEN (((old.result = '\x'::bytea) AND (new.result <> '\x'::bytea))) EXECUTE FUNCTION public.notify_on_replay();

--
-- Name: api_tokens api_tokens_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: component_codes component_codes_exception_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.component_codes
    ADD CONSTRAINT component_codes_exception_id_fkey FOREIGN KEY (exception_id) REFERENCES public.exceptions(id);

--
-- Name: component_codes component_codes_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.component_codes
    ADD CONSTRAINT component_codes_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: dispatch_conflicts dispatch_conflicts_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_conflicts
    ADD CONSTRAINT dispatch_conflicts_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.dispatch_runs(id);

--
-- Name: dispatch_due dispatch_due_record_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_due
    ADD CONSTRAINT dispatch_due_record_id_fkey FOREIGN KEY (record_id) REFERENCES public.records(id);

--
-- Name: dispatch_due dispatch_due_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_due
    ADD CONSTRAINT dispatch_due_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.dispatch_runs(id);

--
-- Name: dispatch_runs dispatch_runs_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_runs
    ADD CONSTRAINT dispatch_runs_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: dispatch_runs dispatch_runs_target_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dispatch_runs
    ADD CONSTRAINT dispatch_runs_target_fkey FOREIGN KEY (target) REFERENCES public.dispatch_targets(name);

--
-- Name: envelope_attempts envelope_attempts_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_attempts
    ADD CONSTRAINT envelope_attempts_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: envelope_client_times envelope_client_times_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_client_times
    ADD CONSTRAINT envelope_client_times_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: envelope_pgp envelope_pgp_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_pgp
    ADD CONSTRAINT envelope_pgp_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: envelope_results envelope_results_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_results
    ADD CONSTRAINT envelope_results_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: envelope_reviews envelope_reviews_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelope_reviews
    ADD CONSTRAINT envelope_reviews_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: envelopes envelopes_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelopes
    ADD CONSTRAINT envelopes_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: envelopes envelopes_replay_of_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.envelopes
    ADD CONSTRAINT envelopes_replay_of_fkey FOREIGN KEY (replay_of) REFERENCES public.envelopes(id);

--
-- Name: exceptions exceptions_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions
    ADD CONSTRAINT exceptions_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: exceptions exceptions_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions
    ADD CONSTRAINT exceptions_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: exceptions exceptions_record_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions
    ADD CONSTRAINT exceptions_record_id_fkey FOREIGN KEY (record_id) REFERENCES public.records(id);

--
-- Name: exceptions exceptions_superseded_by_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.exceptions
    ADD CONSTRAINT exceptions_superseded_by_fkey FOREIGN KEY (superseded_by) REFERENCES public.exceptions(id);

--
-- Name: idempotency_keys idempotency_keys_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: lock_events lock_events_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lock_events
    ADD CONSTRAINT lock_events_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: notify_attempts notify_attempts_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_attempts
    ADD CONSTRAINT notify_attempts_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.notify_events(id);

--
-- Name: notify_events notify_events_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_events
    ADD CONSTRAINT notify_events_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: notify_redeliveries notify_redeliveries_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notify_redeliveries
    ADD CONSTRAINT notify_redeliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.notify_events(id);

--
-- Name: partner_keys partner_keys_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_keys
    ADD CONSTRAINT partner_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: partner_pgp_keys partner_pgp_keys_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_pgp_keys
    ADD CONSTRAINT partner_pgp_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: partner_profiles partner_profiles_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partner_profiles
    ADD CONSTRAINT partner_profiles_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: partners partners_dispatch_target_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.partners
    ADD CONSTRAINT partners_dispatch_target_fkey FOREIGN KEY (dispatch_target) REFERENCES public.dispatch_targets(name);

--
-- Name: period_locks period_locks_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.period_locks
    ADD CONSTRAINT period_locks_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: record_history record_history_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.record_history
    ADD CONSTRAINT record_history_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: record_history record_history_record_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.record_history
    ADD CONSTRAINT record_history_record_id_fkey FOREIGN KEY (record_id) REFERENCES public.records(id);

--
-- Name: replay_legs replay_legs_of_envelope_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replay_legs
    ADD CONSTRAINT replay_legs_of_envelope_fkey FOREIGN KEY (of_envelope) REFERENCES public.envelopes(id);

--
-- Name: replay_legs replay_legs_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replay_legs
    ADD CONSTRAINT replay_legs_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: replay_legs replay_legs_replay_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replay_legs
    ADD CONSTRAINT replay_legs_replay_id_fkey FOREIGN KEY (replay_id) REFERENCES public.replays(id);

--
-- Name: replays replays_of_envelope_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replays
    ADD CONSTRAINT replays_of_envelope_fkey FOREIGN KEY (of_envelope) REFERENCES public.envelopes(id);

--
-- Name: replays replays_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replays
    ADD CONSTRAINT replays_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: result_workbooks result_workbooks_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.result_workbooks
    ADD CONSTRAINT result_workbooks_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: review_audit review_audit_exception_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.review_audit
    ADD CONSTRAINT review_audit_exception_id_fkey FOREIGN KEY (exception_id) REFERENCES public.exceptions(id);

--
-- Name: reviewer_sessions reviewer_sessions_reviewer_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reviewer_sessions
    ADD CONSTRAINT reviewer_sessions_reviewer_fkey FOREIGN KEY (reviewer) REFERENCES public.reviewers(name);

--
-- Name: sealed_result_chunks sealed_result_chunks_envelope_id_kind_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sealed_result_chunks
    ADD CONSTRAINT sealed_result_chunks_envelope_id_kind_fkey FOREIGN KEY (envelope_id, kind) REFERENCES public.sealed_results(envelope_id, kind) ON DELETE CASCADE;

--
-- Name: sealed_results sealed_results_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sealed_results
    ADD CONSTRAINT sealed_results_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: sftp_upload_chunks sftp_upload_chunks_upload_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sftp_upload_chunks
    ADD CONSTRAINT sftp_upload_chunks_upload_id_fkey FOREIGN KEY (upload_id) REFERENCES public.sftp_uploads(id) ON DELETE CASCADE;

--
-- Name: sftp_uploads sftp_uploads_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sftp_uploads
    ADD CONSTRAINT sftp_uploads_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: submissions submissions_envelope_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES public.envelopes(id);

--
-- Name: submissions submissions_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: webhook_deliveries webhook_deliveries_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: webhook_deliveries webhook_deliveries_record_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_record_id_fkey FOREIGN KEY (record_id) REFERENCES public.records(id);

--
-- Name: webhook_entities webhook_entities_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_entities
    ADD CONSTRAINT webhook_entities_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: webhook_entities webhook_entities_record_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_entities
    ADD CONSTRAINT webhook_entities_record_id_fkey FOREIGN KEY (record_id) REFERENCES public.records(id);

--
-- Name: webhook_quarantine webhook_quarantine_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_quarantine
    ADD CONSTRAINT webhook_quarantine_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- Name: webhook_secrets webhook_secrets_partner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_secrets
    ADD CONSTRAINT webhook_secrets_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES public.partners(id);

--
-- PostgreSQL database dump complete
--

