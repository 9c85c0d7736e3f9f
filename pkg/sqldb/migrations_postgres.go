package sqldb

// postgresMigrations returns the schema history of a PostgreSQL database.
//
// Identifiers are COLLATE "C" so that listings order them by bytes, as
// SQLite does, whatever the database's locale. timestamptz keeps
// microseconds; callers give times to the nanosecond, so each time a
// caller sets has an _ns column with the nanoseconds past the microsecond
// (records' times are set by the store, to the microsecond).
func postgresMigrations() []Migration {
	return []Migration{
		{
			Version: 1,
			Name:    "organizations, apps and tokens",
			Stmts: []string{
				`CREATE TABLE organizations (
					id            text COLLATE "C" PRIMARY KEY,
					name          text NOT NULL,
					created_at    timestamptz NOT NULL,
					created_at_ns smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999)
				)`,
				// doc holds descriptive app fields added later, so they do not
				// each need a migration.
				`CREATE TABLE apps (
					id              text COLLATE "C" PRIMARY KEY,
					organization_id text COLLATE "C" NOT NULL REFERENCES organizations (id),
					name            text NOT NULL,
					doc             jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(doc) = 'object'),
					created_at      timestamptz NOT NULL,
					created_at_ns   smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999),
					updated_at      timestamptz NOT NULL,
					updated_at_ns   smallint NOT NULL DEFAULT 0 CHECK (updated_at_ns BETWEEN 0 AND 999),
					-- Parent key for tokens: an app token must name the app's
					-- own organization.
					UNIQUE (id, organization_id)
				)`,
				`CREATE INDEX apps_by_organization ON apps (organization_id, created_at, created_at_ns, id)`,
				`CREATE TABLE tokens (
					id              text COLLATE "C" PRIMARY KEY,
					hash            bytea NOT NULL,
					organization_id text COLLATE "C" NOT NULL REFERENCES organizations (id),
					app_id          text COLLATE "C",
					name            text NOT NULL DEFAULT '',
					created_at      timestamptz NOT NULL,
					created_at_ns   smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999),
					revoked_at      timestamptz,
					revoked_at_ns   smallint NOT NULL DEFAULT 0 CHECK (revoked_at_ns BETWEEN 0 AND 999),
					-- MATCH SIMPLE: an organization token (app_id NULL) is not
					-- checked against apps.
					FOREIGN KEY (app_id, organization_id) REFERENCES apps (id, organization_id)
				)`,
				`CREATE INDEX tokens_by_organization ON tokens (organization_id, created_at, created_at_ns, id)`,
				`CREATE INDEX tokens_by_app ON tokens (app_id, created_at, created_at_ns, id) WHERE app_id IS NOT NULL`,
			},
		},
		{
			Version: 2,
			Name:    "content records, channel keys and app revisions",
			Stmts: []string{
				// revision moves on every change of the app or its records,
				// so readers can tell when what they cached is stale.
				`ALTER TABLE apps ADD COLUMN revision bigint NOT NULL DEFAULT 0`,
				`CREATE TABLE channel_keys (
					key        text COLLATE "C" PRIMARY KEY,
					app_id     text COLLATE "C" NOT NULL REFERENCES apps (id),
					channel_id text NOT NULL
				)`,
				`CREATE INDEX channel_keys_by_app ON channel_keys (app_id)`,
				// One table for every kind: each is a JSON document looked up
				// by app, kind and ID; location is pulled out for filters.
				`CREATE TABLE records (
					app_id     text COLLATE "C" NOT NULL REFERENCES apps (id),
					kind       text COLLATE "C" NOT NULL,
					id         text COLLATE "C" NOT NULL,
					doc        jsonb NOT NULL CHECK (jsonb_typeof(doc) = 'object'),
					location   text,
					created_at timestamptz NOT NULL,
					updated_at timestamptz NOT NULL,
					PRIMARY KEY (app_id, kind, id)
				)`,
			},
		},
		{
			Version: 3,
			Name:    "token scopes",
			Stmts: []string{
				// Tokens made before scopes keep what they could do; new
				// tokens are always written with their scopes.
				`ALTER TABLE tokens ADD COLUMN scopes text NOT NULL DEFAULT 'content:read,content:write,events:write'`,
			},
		},
		{
			Version: 4,
			Name:    "stored vectors",
			Stmts: []string{
				// Sentence-embedding vectors of an app's content by content
				// hash, so that a restart, a new replica or a new revision
				// embeds only what is new. vector is little-endian
				// float32s, which do not compress: EXTERNAL skips trying.
				// used_at is the store's time, to the microsecond. The rows
				// are a cache of the app's content and go with it.
				`CREATE TABLE vectors (
					app_id  text COLLATE "C" NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					model   text COLLATE "C" NOT NULL,
					hash    bytea NOT NULL CHECK (length(hash) = 32),
					used_at timestamptz NOT NULL,
					vector  bytea NOT NULL,
					PRIMARY KEY (app_id, model, hash)
				)`,
				`ALTER TABLE vectors ALTER COLUMN vector SET STORAGE EXTERNAL`,
			},
		},
		{
			Version: 5,
			Name:    "revisions and the audit log",
			Stmts: []string{
				// One entry for every operation that changes an app, its
				// content or its tokens (app_id NULL: an organization's
				// token). Who is the token or the local user the service
				// was given, never what a request says. tx is the writing
				// transaction, which is how its changes find their entry.
				`CREATE TABLE audit (
					id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
					tx              xid8 NOT NULL DEFAULT pg_current_xact_id(),
					at              timestamptz NOT NULL,
					organization_id text COLLATE "C" NOT NULL,
					app_id          text COLLATE "C",
					operation       text NOT NULL,
					subject         text NOT NULL DEFAULT '',
					token_id        text NOT NULL DEFAULT '',
					token_name      text NOT NULL DEFAULT '',
					local_user      text NOT NULL DEFAULT '',
					client_net      text NOT NULL DEFAULT '',
					user_agent      text NOT NULL DEFAULT '',
					request_id      text NOT NULL DEFAULT '',
					created         integer NOT NULL DEFAULT 0,
					updated         integer NOT NULL DEFAULT 0,
					deleted         integer NOT NULL DEFAULT 0,
					unchanged       integer NOT NULL DEFAULT 0
				)`,
				`CREATE INDEX audit_by_app ON audit (app_id, id)`,
				`CREATE INDEX audit_by_organization ON audit (organization_id, id)`,
				`CREATE INDEX audit_by_time ON audit (at)`,
				// Restoring an app to a time before its history was
				// pruned would miss states: refused from this time back.
				`ALTER TABLE apps ADD COLUMN history_pruned_before timestamptz`,
				// A record's revision is the app's revision when it last
				// changed: unique among the record's states, and ordered as
				// the app's changes are.
				`ALTER TABLE records ADD COLUMN revision bigint NOT NULL DEFAULT 0`,
				// Every state a record (kind 'app': the app's name and
				// fields) has had, a deletion keeping its last one. The
				// triggers below write them, so no path can change content
				// without its revision and audit entry in the same
				// transaction.
				`CREATE TABLE revisions (
					app_id     text COLLATE "C" NOT NULL,
					kind       text COLLATE "C" NOT NULL,
					id         text COLLATE "C" NOT NULL,
					revision   bigint NOT NULL,
					deleted    boolean NOT NULL DEFAULT false,
					doc        jsonb NOT NULL,
					location   text,
					changed_at timestamptz NOT NULL,
					audit_id   bigint NOT NULL,
					PRIMARY KEY (app_id, kind, id, revision)
				)`,
				// No index beside the key: each would be written with
				// every change, and what reads revisions reads them by
				// record (retention finds the audit entries no revision
				// names with one anti-join over them).
				// What a database holds when it is upgraded is its first
				// revision, made by the upgrade.
				`INSERT INTO audit (at, organization_id, app_id, operation, local_user)
				 SELECT now(), organization_id, id, 'upgrade', 'schema upgrade' FROM apps`,
				`UPDATE records SET revision = apps.revision FROM apps WHERE apps.id = records.app_id`,
				`INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
				 SELECT r.app_id, r.kind, r.id, r.revision, r.doc, r.location, r.updated_at, a.id
				 FROM records r JOIN audit a ON a.app_id = r.app_id`,
				`INSERT INTO revisions (app_id, kind, id, revision, doc, changed_at, audit_id)
				 SELECT p.id, 'app', p.id, p.revision, p.doc || jsonb_build_object('name', p.name), p.updated_at, a.id
				 FROM apps p JOIN audit a ON a.app_id = p.id`,
				// keep_record_revisions writes the revisions of the records
				// a statement inserted, once for all its rows (an import
				// writes hundreds in one), each under its app's newest
				// audit entry of the transaction; a change without one is
				// refused. keep_record_revision does the same for a row
				// updated or deleted, which a single-record write makes
				// (cheaper than a statement's transition table for one
				// row). A write that reuses a revision the record has fails
				// on the key; an import naming a record twice takes back
				// its first revision before writing it again. A deletion is
				// the app's revision as moved by the write.
				`CREATE FUNCTION keep_record_revisions() RETURNS trigger LANGUAGE plpgsql AS $$
				DECLARE
					missing text;
				BEGIN
					SELECT n.app_id INTO missing FROM new_rows n WHERE NOT EXISTS (
						SELECT 1 FROM audit WHERE app_id = n.app_id AND tx = pg_current_xact_id()) LIMIT 1;
					IF missing IS NOT NULL THEN
						RAISE EXCEPTION 'a change to app % needs its audit entry in the same transaction', missing;
					END IF;
					INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
					SELECT n.app_id, n.kind, n.id, n.revision, n.doc, n.location, n.updated_at, a.id
					FROM new_rows n,
						LATERAL (SELECT id FROM audit WHERE app_id = n.app_id AND tx = pg_current_xact_id() ORDER BY id DESC LIMIT 1) a;
					RETURN NULL;
				END
				$$`,
				`CREATE TRIGGER records_kept_on_insert AFTER INSERT ON records REFERENCING NEW TABLE AS new_rows
				 FOR EACH STATEMENT EXECUTE FUNCTION keep_record_revisions()`,
				`CREATE FUNCTION keep_record_revision() RETURNS trigger LANGUAGE plpgsql AS $$
				DECLARE
					app text;
					aid bigint;
					aat timestamptz;
				BEGIN
					IF TG_OP = 'DELETE' THEN
						app := OLD.app_id;
					ELSE
						app := NEW.app_id;
					END IF;
					SELECT id, at INTO aid, aat FROM audit
					 WHERE app_id = app AND tx = pg_current_xact_id() ORDER BY id DESC LIMIT 1;
					IF aid IS NULL THEN
						RAISE EXCEPTION 'a change to app % needs its audit entry in the same transaction', app;
					END IF;
					IF TG_OP = 'DELETE' THEN
						INSERT INTO revisions (app_id, kind, id, revision, deleted, doc, location, changed_at, audit_id)
						VALUES (app, OLD.kind, OLD.id, (SELECT revision FROM apps WHERE id = app), true, OLD.doc, OLD.location, aat, aid);
					ELSE
						INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
						VALUES (app, NEW.kind, NEW.id, NEW.revision, NEW.doc, NEW.location, NEW.updated_at, aid);
					END IF;
					RETURN NULL;
				END
				$$`,
				`CREATE TRIGGER records_kept_on_change AFTER UPDATE OR DELETE ON records
				 FOR EACH ROW EXECUTE FUNCTION keep_record_revision()`,
				// keep_app_revision writes the revision of a change of an
				// app's name or fields; an app is written once or twice an
				// import, and a second write replaces the first's revision.
				`CREATE FUNCTION keep_app_revision() RETURNS trigger LANGUAGE plpgsql AS $$
				DECLARE
					aid bigint;
					aat timestamptz;
				BEGIN
					SELECT id, at INTO aid, aat FROM audit
					 WHERE app_id = NEW.id AND tx = pg_current_xact_id() ORDER BY id DESC LIMIT 1;
					IF aid IS NULL THEN
						RAISE EXCEPTION 'a change to app % needs its audit entry in the same transaction', NEW.id;
					END IF;
					DELETE FROM revisions WHERE app_id = NEW.id AND kind = 'app' AND id = NEW.id AND revision = NEW.revision AND audit_id = aid;
					INSERT INTO revisions (app_id, kind, id, revision, doc, changed_at, audit_id)
					VALUES (NEW.id, 'app', NEW.id, NEW.revision, NEW.doc || jsonb_build_object('name', NEW.name), aat, aid);
					RETURN NULL;
				END
				$$`,
				`CREATE TRIGGER apps_kept_on_insert AFTER INSERT ON apps
				 FOR EACH ROW EXECUTE FUNCTION keep_app_revision()`,
				`CREATE TRIGGER apps_kept_on_update AFTER UPDATE OF name, doc ON apps
				 FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.doc IS DISTINCT FROM NEW.doc)
				 EXECUTE FUNCTION keep_app_revision()`,
			},
		},
		{
			Version: 6,
			Name:    "gap decisions and settings",
			Stmts: []string{
				// What an app's authors decided about a group of the
				// questions its assistant could not answer: resolved
				// (wordings added to content) or dismissed, with the
				// group's wordings (a JSON array) and users then, so that
				// the gap inbox can tell when it should open again.
				`CREATE TABLE gap_decisions (
					app_id     text COLLATE "C" NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					group_id   text COLLATE "C" NOT NULL,
					state      text NOT NULL CHECK (state IN ('resolved', 'dismissed')),
					reason     text NOT NULL DEFAULT '',
					wordings   text NOT NULL,
					users      bigint NOT NULL,
					decided_at timestamptz NOT NULL,
					audit_id   bigint NOT NULL,
					PRIMARY KEY (app_id, group_id)
				)`,
				// An app's gap inbox settings; an app without a row has
				// the defaults.
				`CREATE TABLE gap_settings (
					app_id         text COLLATE "C" PRIMARY KEY REFERENCES apps (id) ON DELETE CASCADE,
					low_confidence double precision NOT NULL,
					regrow_factor  double precision NOT NULL
				)`,
			},
		},
		{
			Version: 7,
			Name:    "drafts and published versions",
			Stmts: []string{
				// The version of an app's content its runtimes read; NULL:
				// the app does not publish, and they read its records.
				`ALTER TABLE apps ADD COLUMN live_version bigint`,
				// Each published state of an app's content: the draft as
				// it was at revision, numbered from 1. Versions are never
				// changed; rolling back points live_version at an earlier
				// one.
				`CREATE TABLE versions (
					app_id       text COLLATE "C" NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					version      bigint NOT NULL,
					revision     bigint NOT NULL,
					published_at timestamptz NOT NULL,
					audit_id     bigint NOT NULL,
					records      integer NOT NULL,
					PRIMARY KEY (app_id, version)
				)`,
				// A version's records, each the revision it published:
				// the documents are the revisions', which retention keeps
				// while a version names them.
				`CREATE TABLE version_records (
					app_id     text COLLATE "C" NOT NULL,
					version    bigint NOT NULL,
					kind       text COLLATE "C" NOT NULL,
					id         text COLLATE "C" NOT NULL,
					revision   bigint NOT NULL,
					created_at timestamptz NOT NULL,
					PRIMARY KEY (app_id, version, kind, id),
					FOREIGN KEY (app_id, version) REFERENCES versions (app_id, version) ON DELETE CASCADE
				)`,
				// Retention asks, for each revision it would prune, whether
				// a version names it. Not (app_id, kind, ...): a planner
				// without statistics took that for reading a version's
				// records of a kind, scanning every version's.
				`CREATE INDEX version_records_by_revision ON version_records (app_id, revision)`,
			},
		},
		{
			Version: 8,
			Name:    "webhooks",
			Stmts: []string{
				// An app's endpoints, each for some topics (a
				// comma-separated list). secret signs deliveries; after a
				// rotation previous_secret signs them too until
				// previous_until. error_rate is the ERROR events a minute
				// from which the errors.rate topic tells.
				`CREATE TABLE webhooks (
					app_id          text COLLATE "C" NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					id              text COLLATE "C" NOT NULL,
					url             text NOT NULL,
					topics          text NOT NULL,
					error_rate      integer NOT NULL DEFAULT 0,
					secret          text NOT NULL,
					previous_secret text NOT NULL DEFAULT '',
					previous_until  timestamptz,
					created_at      timestamptz NOT NULL,
					PRIMARY KEY (app_id, id)
				)`,
				// The outbox: every message to an endpoint, written in the
				// transaction of what it tells, sent and retried from here
				// (so that nothing is lost when a process stops), and kept
				// with its outcome as the delivery log.
				`CREATE TABLE webhook_deliveries (
					id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
					app_id          text COLLATE "C" NOT NULL,
					webhook_id      text COLLATE "C" NOT NULL,
					topic           text NOT NULL,
					payload         text NOT NULL,
					created_at      timestamptz NOT NULL,
					-- When it was queued, or queued again: it is retried for a
					-- while from then.
					queued_at       timestamptz NOT NULL,
					state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
					attempts        integer NOT NULL DEFAULT 0,
					-- Moves with every claim and redelivery: an attempt records
					-- its outcome only if it still holds the delivery.
					lease           bigint NOT NULL DEFAULT 0,
					next_attempt_at timestamptz NOT NULL,
					last_status     integer NOT NULL DEFAULT 0,
					last_error      text NOT NULL DEFAULT '',
					FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
				)`,
				`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`,
				`CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (app_id, webhook_id, id)`,
				// Every attempt at a delivery, for the log.
				`CREATE TABLE webhook_attempts (
					delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
					attempt     integer NOT NULL,
					at          timestamptz NOT NULL,
					status      integer NOT NULL,
					error       text NOT NULL,
					duration_ms integer NOT NULL,
					PRIMARY KEY (delivery_id, attempt)
				)`,
				// What the watched topics (gaps.opened, errors.rate) told
				// each endpoint, so that it is told once: by group, by
				// minute. Any number of processes may watch.
				`CREATE TABLE webhook_told (
					app_id     text COLLATE "C" NOT NULL,
					webhook_id text COLLATE "C" NOT NULL,
					topic      text NOT NULL,
					key        text NOT NULL,
					told_at    timestamptz NOT NULL,
					PRIMARY KEY (app_id, webhook_id, topic, key),
					FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
				)`,
				// What the content topics tell is written by the database
				// itself, in the transaction of the change: an app that
				// publishes tells content.published when its live version
				// moves (set before the revision moves, so that publishing
				// tells nothing else), one that does not tells
				// content.changed when its revision moves, and turning
				// publishing off does too. A content.changed not yet tried
				// takes the newer revision rather than queueing another:
				// a burst of writes is one message. One ever claimed (its
				// attempts count from the claim) is not joined: it may have
				// been sent.
				`CREATE FUNCTION webhook_content_events() RETURNS trigger LANGUAGE plpgsql AS $$
				DECLARE
					t_topic text;
					t_data  jsonb;
				BEGIN
					IF NEW.live_version IS DISTINCT FROM OLD.live_version THEN
						IF NEW.live_version IS NULL THEN
							t_topic := 'content.changed';
						ELSE
							t_topic := 'content.published';
						END IF;
					ELSIF NEW.revision <> OLD.revision AND NEW.live_version IS NULL THEN
						t_topic := 'content.changed';
					ELSE
						RETURN NULL;
					END IF;
					IF t_topic = 'content.published' THEN
						t_data := jsonb_build_object('appId', NEW.id, 'version', NEW.live_version);
					ELSE
						t_data := jsonb_build_object('appId', NEW.id, 'revision', NEW.revision);
						UPDATE webhook_deliveries d SET payload = jsonb_build_object('type', t_topic,
								'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', t_data)::text
							WHERE d.app_id = NEW.id AND d.topic = t_topic AND d.state = 'pending' AND d.attempts = 0;
					END IF;
					INSERT INTO webhook_deliveries (app_id, webhook_id, topic, payload, created_at, queued_at, next_attempt_at)
					SELECT w.app_id, w.id, t_topic, jsonb_build_object('type', t_topic,
							'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', t_data)::text, now(), now(), now()
					FROM webhooks w WHERE w.app_id = NEW.id AND position(',' || t_topic || ',' IN ',' || w.topics || ',') > 0
						AND (t_topic = 'content.published' OR NOT EXISTS (SELECT 1 FROM webhook_deliveries d
							WHERE d.app_id = w.app_id AND d.webhook_id = w.id AND d.topic = t_topic AND d.state = 'pending' AND d.attempts = 0));
					RETURN NULL;
				END
				$$`,
				`CREATE TRIGGER apps_webhook_events AFTER UPDATE OF revision, live_version ON apps
				 FOR EACH ROW EXECUTE FUNCTION webhook_content_events()`,
			},
		},
	}
}
