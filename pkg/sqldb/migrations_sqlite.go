package sqldb

// sqliteMigrations returns the schema history of a SQLite database.
func sqliteMigrations() []Migration {
	return []Migration{
		{
			Version: 1,
			Name:    "organizations, apps and tokens",
			Stmts: []string{
				`CREATE TABLE organizations (
					id         TEXT PRIMARY KEY,
					name       TEXT NOT NULL,
					created_at TEXT NOT NULL
				) STRICT`,
				// doc holds descriptive app fields added later, so they do not
				// each need a migration.
				`CREATE TABLE apps (
					id              TEXT PRIMARY KEY,
					organization_id TEXT NOT NULL REFERENCES organizations (id),
					name            TEXT NOT NULL,
					doc             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(doc)),
					created_at      TEXT NOT NULL,
					updated_at      TEXT NOT NULL,
					-- Parent key for tokens: an app token must name the app's
					-- own organization.
					UNIQUE (id, organization_id)
				) STRICT`,
				`CREATE INDEX apps_by_organization ON apps (organization_id, created_at, id)`,
				`CREATE TABLE tokens (
					id              TEXT PRIMARY KEY,
					hash            BLOB NOT NULL,
					organization_id TEXT NOT NULL REFERENCES organizations (id),
					app_id          TEXT,
					name            TEXT NOT NULL DEFAULT '',
					created_at      TEXT NOT NULL,
					revoked_at      TEXT,
					FOREIGN KEY (app_id, organization_id) REFERENCES apps (id, organization_id)
				) STRICT`,
				`CREATE INDEX tokens_by_organization ON tokens (organization_id, created_at, id)`,
				`CREATE INDEX tokens_by_app ON tokens (app_id, created_at, id) WHERE app_id IS NOT NULL`,
			},
		},
		{
			Version: 2,
			Name:    "content records, channel keys and app revisions",
			Stmts: []string{
				// revision moves on every change of the app or its records,
				// so readers can tell when what they cached is stale.
				`ALTER TABLE apps ADD COLUMN revision INTEGER NOT NULL DEFAULT 0`,
				`CREATE TABLE channel_keys (
					key        TEXT PRIMARY KEY,
					app_id     TEXT NOT NULL REFERENCES apps (id),
					channel_id TEXT NOT NULL
				) STRICT`,
				`CREATE INDEX channel_keys_by_app ON channel_keys (app_id)`,
				// One table for every kind: each is a JSON document looked up
				// by app, kind and ID; location is pulled out for filters.
				`CREATE TABLE records (
					app_id     TEXT NOT NULL REFERENCES apps (id),
					kind       TEXT NOT NULL,
					id         TEXT NOT NULL,
					doc        TEXT NOT NULL CHECK (json_valid(doc)),
					location   TEXT,
					created_at TEXT NOT NULL,
					updated_at TEXT NOT NULL,
					PRIMARY KEY (app_id, kind, id)
				) STRICT`,
			},
		},
		{
			Version: 3,
			Name:    "token scopes",
			Stmts: []string{
				// Tokens made before scopes keep what they could do; new
				// tokens are always written with their scopes.
				`ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'content:read,content:write,events:write'`,
			},
		},
		{
			Version: 4,
			Name:    "stored vectors",
			Stmts: []string{
				// Sentence-embedding vectors of an app's content by content
				// hash, so that a restart or a new revision embeds only
				// what is new. vector is little-endian float32s. used_at
				// has a fixed width and comes before vector, so that
				// marking a row used rewrites it in place and leaves the
				// overflow pages of a long vector as they are. The rows
				// are a cache of the app's content and go with it.
				`CREATE TABLE vectors (
					app_id  TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					model   TEXT NOT NULL,
					hash    BLOB NOT NULL CHECK (length(hash) = 32),
					used_at TEXT NOT NULL,
					vector  BLOB NOT NULL,
					PRIMARY KEY (app_id, model, hash)
				) STRICT`,
			},
		},
		{
			Version: 5,
			Name:    "revisions and the audit log",
			Stmts: []string{
				// One entry for every operation that changes an app, its
				// content or its tokens (app_id NULL: an organization's
				// token). Who is the token or the local user the service
				// was given, never what a request says.
				`CREATE TABLE audit (
					id              INTEGER PRIMARY KEY AUTOINCREMENT,
					at              TEXT NOT NULL,
					organization_id TEXT NOT NULL,
					app_id          TEXT,
					operation       TEXT NOT NULL,
					subject         TEXT NOT NULL DEFAULT '',
					token_id        TEXT NOT NULL DEFAULT '',
					token_name      TEXT NOT NULL DEFAULT '',
					local_user      TEXT NOT NULL DEFAULT '',
					client_net      TEXT NOT NULL DEFAULT '',
					user_agent      TEXT NOT NULL DEFAULT '',
					request_id      TEXT NOT NULL DEFAULT '',
					created         INTEGER NOT NULL DEFAULT 0,
					updated         INTEGER NOT NULL DEFAULT 0,
					deleted         INTEGER NOT NULL DEFAULT 0,
					unchanged       INTEGER NOT NULL DEFAULT 0
				) STRICT`,
				`CREATE INDEX audit_by_app ON audit (app_id, id)`,
				`CREATE INDEX audit_by_organization ON audit (organization_id, id)`,
				`CREATE INDEX audit_by_time ON audit (at)`,
				// Restoring an app to a time before its history was
				// pruned would miss states: refused from this time back.
				`ALTER TABLE apps ADD COLUMN history_pruned_before TEXT`,
				// A record's revision is the app's revision when it last
				// changed: unique among the record's states, and ordered as
				// the app's changes are. The table is made again to add it
				// and to check less of doc: json_valid parsed every
				// document written, which the store has parsed already, and
				// with each write kept twice it was a third of a large
				// record's write.
				`CREATE TABLE records_v5 (
					app_id     TEXT NOT NULL REFERENCES apps (id),
					kind       TEXT NOT NULL,
					id         TEXT NOT NULL,
					doc        TEXT NOT NULL CHECK (substr(doc, 1, 1) = '{'),
					location   TEXT,
					created_at TEXT NOT NULL,
					updated_at TEXT NOT NULL,
					revision   INTEGER NOT NULL DEFAULT 0,
					PRIMARY KEY (app_id, kind, id)
				) STRICT`,
				`INSERT INTO records_v5 (app_id, kind, id, doc, location, created_at, updated_at, revision)
				 SELECT r.app_id, r.kind, r.id, r.doc, r.location, r.created_at, r.updated_at, (SELECT revision FROM apps WHERE apps.id = r.app_id)
				 FROM records r`,
				`DROP TABLE records`,
				`ALTER TABLE records_v5 RENAME TO records`,
				// Every state a record (kind 'app': the app's name and
				// fields) has had, a deletion keeping its last one. The
				// triggers below write them, so no path can change content
				// without its revision and audit entry in the same
				// transaction.
				`CREATE TABLE revisions (
					app_id     TEXT NOT NULL,
					kind       TEXT NOT NULL,
					id         TEXT NOT NULL,
					revision   INTEGER NOT NULL,
					deleted    INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
					doc        TEXT NOT NULL,
					location   TEXT,
					changed_at TEXT NOT NULL,
					audit_id   INTEGER NOT NULL,
					PRIMARY KEY (app_id, kind, id, revision)
				) STRICT`,
				// No index beside the key: each would be written with
				// every change, and what reads revisions reads them by
				// record (retention finds the audit entries no revision
				// names with one pass over them).
				// What a database holds when it is upgraded is its first
				// revision, made by the upgrade.
				`INSERT INTO audit (at, organization_id, app_id, operation, local_user)
				 SELECT strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now'), organization_id, id, 'upgrade', 'schema upgrade' FROM apps`,
				`INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
				 SELECT r.app_id, r.kind, r.id, r.revision, r.doc, r.location, r.updated_at,
				        (SELECT max(a.id) FROM audit a WHERE a.app_id = r.app_id)
				 FROM records r`,
				`INSERT INTO revisions (app_id, kind, id, revision, doc, changed_at, audit_id)
				 SELECT p.id, 'app', p.id, p.revision, json_set(p.doc, '$.name', p.name), p.updated_at,
				        (SELECT max(a.id) FROM audit a WHERE a.app_id = p.id)
				 FROM apps p`,
				// A write names its audit entry by writing it first: SQLite
				// has one writer at a time, so the app's newest entry is
				// the writing transaction's; without one, audit_id is NULL
				// and the change fails. A write that reuses a revision the
				// record has (one that did not move it) fails on the key;
				// an import naming a record twice takes back its first
				// revision before writing it again.
				`CREATE TRIGGER records_kept_on_insert AFTER INSERT ON records BEGIN
					INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
					VALUES (NEW.app_id, NEW.kind, NEW.id, NEW.revision, NEW.doc, NEW.location, NEW.updated_at,
						(SELECT max(id) FROM audit WHERE app_id = NEW.app_id));
				END`,
				`CREATE TRIGGER records_kept_on_update AFTER UPDATE OF doc, location, revision ON records BEGIN
					INSERT INTO revisions (app_id, kind, id, revision, doc, location, changed_at, audit_id)
					VALUES (NEW.app_id, NEW.kind, NEW.id, NEW.revision, NEW.doc, NEW.location, NEW.updated_at,
						(SELECT max(id) FROM audit WHERE app_id = NEW.app_id));
				END`,
				// A deletion is the app's revision as moved by the write.
				`CREATE TRIGGER records_kept_on_delete AFTER DELETE ON records BEGIN
					INSERT INTO revisions (app_id, kind, id, revision, deleted, doc, location, changed_at, audit_id)
					SELECT OLD.app_id, OLD.kind, OLD.id, (SELECT revision FROM apps WHERE id = OLD.app_id), 1, OLD.doc, OLD.location,
						COALESCE(a.at, OLD.updated_at), a.id
					FROM (SELECT 1) LEFT JOIN audit a ON a.id = (SELECT max(id) FROM audit WHERE app_id = OLD.app_id);
				END`,
				// An app is written once or twice an import: its own
				// triggers keep their checks.
				`CREATE TRIGGER apps_kept_on_insert AFTER INSERT ON apps BEGIN
					SELECT RAISE(ABORT, 'a change to an app needs its audit entry') WHERE NOT EXISTS (SELECT 1 FROM audit WHERE app_id = NEW.id);
					INSERT INTO revisions (app_id, kind, id, revision, doc, changed_at, audit_id)
					VALUES (NEW.id, 'app', NEW.id, NEW.revision, json_set(NEW.doc, '$.name', NEW.name), NEW.updated_at,
						(SELECT max(id) FROM audit WHERE app_id = NEW.id));
				END`,
				`CREATE TRIGGER apps_kept_on_update AFTER UPDATE OF name, doc ON apps
				 WHEN OLD.name IS NOT NEW.name OR OLD.doc IS NOT NEW.doc BEGIN
					SELECT RAISE(ABORT, 'a change to an app needs its audit entry') WHERE NOT EXISTS (SELECT 1 FROM audit WHERE app_id = NEW.id);
					DELETE FROM revisions WHERE app_id = NEW.id AND kind = 'app' AND id = NEW.id AND revision = NEW.revision
						AND audit_id = (SELECT max(id) FROM audit WHERE app_id = NEW.id);
					INSERT INTO revisions (app_id, kind, id, revision, doc, changed_at, audit_id)
					VALUES (NEW.id, 'app', NEW.id, NEW.revision, json_set(NEW.doc, '$.name', NEW.name), NEW.updated_at,
						(SELECT max(id) FROM audit WHERE app_id = NEW.id));
				END`,
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
					app_id     TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					group_id   TEXT NOT NULL,
					state      TEXT NOT NULL CHECK (state IN ('resolved', 'dismissed')),
					reason     TEXT NOT NULL DEFAULT '',
					wordings   TEXT NOT NULL,
					users      INTEGER NOT NULL,
					decided_at TEXT NOT NULL,
					audit_id   INTEGER NOT NULL,
					PRIMARY KEY (app_id, group_id)
				) STRICT`,
				// An app's gap inbox settings; an app without a row has
				// the defaults.
				`CREATE TABLE gap_settings (
					app_id         TEXT PRIMARY KEY REFERENCES apps (id) ON DELETE CASCADE,
					low_confidence REAL NOT NULL,
					regrow_factor  REAL NOT NULL
				) STRICT`,
			},
		},
		{
			Version: 7,
			Name:    "drafts and published versions",
			Stmts: []string{
				// The version of an app's content its runtimes read; NULL:
				// the app does not publish, and they read its records.
				`ALTER TABLE apps ADD COLUMN live_version INTEGER`,
				// Each published state of an app's content: the draft as
				// it was at revision, numbered from 1. Versions are never
				// changed; rolling back points live_version at an earlier
				// one.
				`CREATE TABLE versions (
					app_id       TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					version      INTEGER NOT NULL,
					revision     INTEGER NOT NULL,
					published_at TEXT NOT NULL,
					audit_id     INTEGER NOT NULL,
					records      INTEGER NOT NULL,
					PRIMARY KEY (app_id, version)
				) STRICT`,
				// A version's records, each the revision it published:
				// the documents are the revisions', which retention keeps
				// while a version names them.
				`CREATE TABLE version_records (
					app_id     TEXT NOT NULL,
					version    INTEGER NOT NULL,
					kind       TEXT NOT NULL,
					id         TEXT NOT NULL,
					revision   INTEGER NOT NULL,
					created_at TEXT NOT NULL,
					PRIMARY KEY (app_id, version, kind, id),
					FOREIGN KEY (app_id, version) REFERENCES versions (app_id, version) ON DELETE CASCADE
				) STRICT`,
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
					app_id          TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					id              TEXT NOT NULL,
					url             TEXT NOT NULL,
					topics          TEXT NOT NULL,
					error_rate      INTEGER NOT NULL DEFAULT 0,
					secret          TEXT NOT NULL,
					previous_secret TEXT NOT NULL DEFAULT '',
					previous_until  TEXT,
					created_at      TEXT NOT NULL,
					PRIMARY KEY (app_id, id)
				) STRICT`,
				// The outbox: every message to an endpoint, written in the
				// transaction of what it tells, sent and retried from here
				// (so that nothing is lost when a process stops), and kept
				// with its outcome as the delivery log.
				`CREATE TABLE webhook_deliveries (
					id              INTEGER PRIMARY KEY AUTOINCREMENT,
					app_id          TEXT NOT NULL,
					webhook_id      TEXT NOT NULL,
					topic           TEXT NOT NULL,
					payload         TEXT NOT NULL,
					created_at      TEXT NOT NULL,
					-- When it was queued, or queued again: it is retried for a
					-- while from then.
					queued_at       TEXT NOT NULL,
					state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
					attempts        INTEGER NOT NULL DEFAULT 0,
					-- Moves with every claim and redelivery: an attempt records
					-- its outcome only if it still holds the delivery.
					lease           INTEGER NOT NULL DEFAULT 0,
					next_attempt_at TEXT NOT NULL,
					last_status     INTEGER NOT NULL DEFAULT 0,
					last_error      TEXT NOT NULL DEFAULT '',
					FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
				) STRICT`,
				`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`,
				`CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (app_id, webhook_id, id)`,
				// Every attempt at a delivery, for the log.
				`CREATE TABLE webhook_attempts (
					delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
					attempt     INTEGER NOT NULL,
					at          TEXT NOT NULL,
					status      INTEGER NOT NULL,
					error       TEXT NOT NULL,
					duration_ms INTEGER NOT NULL,
					PRIMARY KEY (delivery_id, attempt)
				) STRICT`,
				// What the watched topics (gaps.opened, errors.rate) told
				// each endpoint, so that it is told once: by group, by
				// minute.
				`CREATE TABLE webhook_told (
					app_id     TEXT NOT NULL,
					webhook_id TEXT NOT NULL,
					topic      TEXT NOT NULL,
					key        TEXT NOT NULL,
					told_at    TEXT NOT NULL,
					PRIMARY KEY (app_id, webhook_id, topic, key),
					FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
				) STRICT`,
				// What the content topics tell is written by the database
				// itself, in the transaction of the change, as on
				// PostgreSQL (see its migration 8): content.published, then
				// content.changed. A message ever claimed is not one a
				// change joins.
				`CREATE TRIGGER apps_live_webhook_events AFTER UPDATE OF live_version ON apps
				 WHEN OLD.live_version IS NOT NEW.live_version AND NEW.live_version IS NOT NULL BEGIN
					INSERT INTO webhook_deliveries (app_id, webhook_id, topic, payload, created_at, queued_at, next_attempt_at)
					SELECT w.app_id, w.id, 'content.published', json_object('type', 'content.published', 'timestamp', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'data', json_object('appId', NEW.id, 'version', NEW.live_version)),
						strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now')
					FROM webhooks w WHERE w.app_id = NEW.id AND instr(',' || w.topics || ',', ',' || 'content.published' || ',') > 0;
				END`,
				`CREATE TRIGGER apps_changed_webhook_events AFTER UPDATE OF revision, live_version ON apps
				 WHEN NEW.live_version IS NULL AND (OLD.live_version IS NOT NULL OR OLD.revision IS NOT NEW.revision) BEGIN
					UPDATE webhook_deliveries SET payload = json_object('type', 'content.changed', 'timestamp', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'data', json_object('appId', NEW.id, 'revision', NEW.revision))
						WHERE app_id = NEW.id AND topic = 'content.changed' AND state = 'pending' AND attempts = 0;
					INSERT INTO webhook_deliveries (app_id, webhook_id, topic, payload, created_at, queued_at, next_attempt_at)
					SELECT w.app_id, w.id, 'content.changed', json_object('type', 'content.changed', 'timestamp', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'data', json_object('appId', NEW.id, 'revision', NEW.revision)),
						strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now')
					FROM webhooks w WHERE w.app_id = NEW.id AND instr(',' || w.topics || ',', ',' || 'content.changed' || ',') > 0
						AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
							WHERE d.app_id = w.app_id AND d.webhook_id = w.id AND d.topic = 'content.changed' AND d.state = 'pending' AND d.attempts = 0);
				END`,
			},
		},
	}
}
