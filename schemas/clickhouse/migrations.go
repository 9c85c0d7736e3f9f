// Package clickhouse holds the ClickHouse schema as versioned migrations:
// SQL templates rendered for the server they run on, so that one set of
// files serves current ClickHouse and the old 18.16 server tests use.
package clickhouse

import (
	"bytes"
	"embed"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

//go:embed *.sql
var files embed.FS

// Features says what the server supports; the templates use it.
type Features struct {
	// DateTime64 is DateTime64(3, 'UTC'); without it times keep seconds.
	DateTime64 bool
	// Codecs allows per-column compression codecs.
	Codecs bool
	// TTL allows table retention.
	TTL bool
	// LowCardinalitySetting says LowCardinality columns need
	// allow_experimental_low_cardinality_type=1 on this server.
	LowCardinalitySetting bool
	// AddColumnIfNotExists allows ALTER TABLE ADD COLUMN IF NOT EXISTS;
	// without it, a column that exists already fails the statement with
	// ErrColumnExists, which the migration runner takes as done.
	AddColumnIfNotExists bool
}

// ErrColumnExists is the server's error code for ADD COLUMN of a column
// that exists.
const ErrColumnExists = 44

// Version is a server version such as 23.8 or 18.16.
type Version struct{ Major, Minor int }

// ParseVersion reads the output of SELECT version(), like "18.16.1".
func ParseVersion(s string) (Version, error) {
	parts := strings.SplitN(strings.TrimSpace(s), ".", 3)
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("server version %q: want major.minor", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("server version %q: want major.minor", s)
	}
	return Version{major, minor}, nil
}

func (v Version) atLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// FeaturesOf returns what a server version supports.
func FeaturesOf(v Version) Features {
	return Features{
		DateTime64:            v.atLeast(20, 1),
		Codecs:                v.atLeast(20, 1),
		TTL:                   v.atLeast(20, 1),
		LowCardinalitySetting: !v.atLeast(19, 9),
		AddColumnIfNotExists:  v.atLeast(20, 1),
	}
}

// Options are choices of the deployment.
type Options struct {
	// Database the tables live in.
	Database string
	// RetentionDays drops events older than this many days where the
	// server supports TTL; 0 keeps them forever.
	RetentionDays int
}

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	// SQL is the rendered migration; Statements are its statements, in
	// order, as the native protocol takes them: one at a time.
	SQL        string
	Statements []string
}

type params struct {
	DB, Time, Codec, TTL, IfNotExists string
}

// Render returns every migration rendered for the features and options,
// in version order.
func Render(f Features, o Options) ([]Migration, error) {
	if o.Database == "" {
		o.Database = "default"
	}
	p := params{DB: quoteIdent(o.Database), Time: "DateTime('UTC')"}
	if f.DateTime64 {
		p.Time = "DateTime64(3, 'UTC')"
	}
	if f.Codecs {
		p.Codec = " CODEC(ZSTD(3))"
	}
	// ttl drops rows whose time column is older than the retention.
	ttl := func(column string) string {
		if !f.TTL || o.RetentionDays <= 0 {
			return ""
		}
		return fmt.Sprintf("TTL toDateTime(%s) + INTERVAL %d DAY", column, o.RetentionDays)
	}
	p.TTL = ttl("event_time")
	if f.AddColumnIfNotExists {
		p.IfNotExists = " IF NOT EXISTS"
	}
	names, err := files.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range names {
		name := e.Name()
		if path.Ext(name) != ".sql" {
			continue
		}
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", name)
		}
		src, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{"ttl": ttl}).Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, p); err != nil {
			return nil, fmt.Errorf("render migration %s: %w", name, err)
		}
		sql := strings.TrimSpace(stripComments(b.String()))
		out = append(out, Migration{Version: v, Name: rest, SQL: sql, Statements: statements(sql)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations have version %d", out[i].Version)
		}
	}
	return out, nil
}

// statements splits a migration at the semicolons that end its lines.
func statements(sql string) []string {
	var out []string
	for _, s := range strings.Split(sql, ";\n") {
		if s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), ";")); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// stripComments drops whole-line "--" comments, which old servers do not
// always accept before a statement sent over the native protocol.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// quoteIdent quotes a database name with backticks.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
