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
	}
}
