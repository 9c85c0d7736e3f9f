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
	}
}
