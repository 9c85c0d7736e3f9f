// Package clickhouse holds the ClickHouse schema as versioned migrations:
// SQL templates rendered for the server they run on, so that one set of
// files serves current ClickHouse and the old 18.16 server tests use.
package clickhouse

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
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
	// SkipIndexes allows data-skipping indexes of type bloom_filter.
	SkipIndexes bool
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
		SkipIndexes:           v.atLeast(20, 1),
	}
}

// Options are choices of the deployment.
type Options struct {
	// Database the tables live in.
	Database string
	// RetentionDays drops events older than this many days where the
	// server supports TTL; 0 keeps them forever.
	RetentionDays int
	// Cluster, when set, is the name of a cluster in the servers'
	// remote_servers, and the migrations lay the tables out over it:
	// statements run ON CLUSTER; every table is a shard-local
	// Replicated*MergeTree named with LocalSuffix, replicated through
	// ZooKeeper under ReplicationPath (so every server needs the {shard}
	// and {replica} macros); materialized views read and fill the local
	// tables, so each shard aggregates its own rows; and a Distributed
	// table under the single-server name spreads reads over the shards
	// and inserts by the table's sharding key.
	Cluster string
	// Unreplicated renders the cluster layout (local tables and
	// Distributed tables over Cluster) with plain MergeTree engines and
	// without ON CLUSTER: what one server without ZooKeeper can execute.
	Unreplicated bool
	// HistoryDays is how long query_sources keeps the days of asked
	// queries where the server supports TTL, never longer than
	// RetentionDays when that is set; 0 means DefaultHistoryDays. The TTL
	// is fixed when the table is created.
	HistoryDays int
}

// LocalSuffix ends the names of the shard-local tables of a cluster.
const LocalSuffix = "_local"

// ReplicationPath is the ZooKeeper path under which a cluster's
// replicated tables keep their state, one node per shard and table:
// ReplicationPath/<database>/<table>.
const ReplicationPath = "/clickhouse/tables/{shard}"

// ShardingKey spreads the rows of events and quarantine over a cluster's
// shards by their event ID, so every retry of an event lands on the shard
// holding its first copy, where ReplacingMergeTree, FINAL and GROUP BY
// event_id collapse them exactly as on one server. By ID rather than by
// session, rows spread evenly whatever the sessions' sizes, and events
// without a session do not all go to one shard.
const ShardingKey = "cityHash64(event_id)"

// validClusterName matches the cluster names taken: those that need no
// escaping in the backquotes and string literals they go in.
var validClusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// CheckCluster reports whether name can name a cluster.
func CheckCluster(name string) error {
	if name != "" && !validClusterName.MatchString(name) {
		return fmt.Errorf("ClickHouse cluster name %q: want letters, digits, '_', '.' or '-', starting with a letter or '_'", name)
	}
	return nil
}

// layout renders the parts of statements that differ between one server
// and a cluster.
type layout struct {
	db, dbName, cluster string
	replicated          bool
}

func newLayout(o Options) (layout, error) {
	if err := CheckCluster(o.Cluster); err != nil {
		return layout{}, err
	}
	if o.Unreplicated && o.Cluster == "" {
		return layout{}, errors.New("an unreplicated cluster layout needs the cluster's name for its Distributed tables")
	}
	if o.Database == "" {
		o.Database = "default"
	}
	return layout{db: quoteIdent(o.Database), dbName: o.Database, cluster: o.Cluster, replicated: o.Cluster != "" && !o.Unreplicated}, nil
}

// onCluster is the ON CLUSTER clause of a statement.
func (l layout) onCluster() string {
	if !l.replicated {
		return ""
	}
	return " ON CLUSTER `" + l.cluster + "`"
}

// table is the name of the table that holds the rows of name: name itself
// on one server, the shard-local table in a cluster.
func (l layout) table(name string) string {
	if l.cluster == "" {
		return l.db + "." + name
	}
	return l.db + "." + name + LocalSuffix
}

// engine is the table engine of a MergeTree-family table; args are the
// engine's own arguments, after a replicated engine's path and replica.
func (l layout) engine(kind, table string, args ...string) string {
	if l.replicated {
		args = append([]string{quoteString(ReplicationPath + "/" + l.dbName + "/" + table + LocalSuffix), "'{replica}'"}, args...)
		kind = "Replicated" + kind
	}
	if len(args) == 0 {
		return kind
	}
	return kind + "(" + strings.Join(args, ", ") + ")"
}

// countEveryInsert keeps a replicated table from dropping an insert whose
// block equals a recent one. Replicated tables do that to make retries
// harmless, but a counting table fed by a materialized view receives equal
// blocks from distinct writes (the same questions asked again, a batch
// retried under new offsets), and on one server every write counts.
func (l layout) countEveryInsert() string {
	if !l.replicated {
		return ""
	}
	return "SETTINGS replicated_deduplication_window = 0"
}

// distributed is, in a cluster, a statement that follows the one creating
// table's local table: the Distributed table under the name of table.
// Unsharded, it has no sharding key and is only read from.
func (l layout) distributed(table string, sharded bool) string {
	if l.cluster == "" {
		return ""
	}
	args := []string{quoteString(l.cluster), quoteString(l.dbName), quoteString(table + LocalSuffix)}
	if sharded {
		args = append(args, ShardingKey)
	}
	return ";\nCREATE TABLE IF NOT EXISTS " + l.db + "." + table + l.onCluster() + " AS " + l.table(table) +
		"\nENGINE = Distributed(" + strings.Join(args, ", ") + ")\n"
}

// distributedOver is, in a cluster, the statement creating the
// Distributed table name with the columns of local table as's local table,
// reading and writing target's local tables by name, sharded as events.
func (l layout) distributedOver(name, as, target string) string {
	args := []string{quoteString(l.cluster), quoteString(l.dbName), quoteString(target + LocalSuffix), ShardingKey}
	return "CREATE TABLE IF NOT EXISTS " + l.db + "." + name + l.onCluster() + " AS " + l.table(as) +
		"\nENGINE = Distributed(" + strings.Join(args, ", ") + ")"
}

// columnExists is a query returning 1 when the table holding the rows of
// table has column, on the server it runs on.
func (l layout) columnExists(table, column string) string {
	if l.cluster != "" {
		table += LocalSuffix
	}
	return "SELECT count() > 0 FROM system.columns WHERE database = " + quoteString(l.dbName) +
		" AND table = " + quoteString(table) + " AND name = " + quoteString(column)
}

// CreateDatabase is the statement that creates the database.
func CreateDatabase(o Options) (string, error) {
	l, err := newLayout(o)
	if err != nil {
		return "", err
	}
	return "CREATE DATABASE IF NOT EXISTS " + l.db + l.onCluster(), nil
}

// MigrationsTable is the statement that creates the table recording
// applied migrations. In a replicated cluster it is one table replicated
// to every server of every shard, at /clickhouse/tables/all/<database>/
// schema_migrations with the replica name {shard}-{replica}, so that a
// migration recorded through any server is seen through all of them.
func MigrationsTable(o Options) (string, error) {
	l, err := newLayout(o)
	if err != nil {
		return "", err
	}
	engine := "ReplacingMergeTree"
	if l.replicated {
		engine = "ReplicatedReplacingMergeTree(" + quoteString("/clickhouse/tables/all/"+l.dbName+"/schema_migrations") + ", '{shard}-{replica}')"
	}
	return "CREATE TABLE IF NOT EXISTS " + l.db + ".schema_migrations" + l.onCluster() +
		" (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = " + engine + " ORDER BY version", nil
}

// MigrationLock is the statements that take and give back the lock one
// runner holds while it applies a migration that moves a table (one with
// SkipOnce): creating the lock's table fails for every runner but one,
// on one server and, through the distributed DDL queue, on a cluster.
// Such a migration run by several at once could deadlock the 18.x
// servers' table locks (a copy, a rename and a view over one table).
func MigrationLock(o Options, version int) (take, give string, err error) {
	l, err := newLayout(o)
	if err != nil {
		return "", "", err
	}
	table := fmt.Sprintf("%s.schema_migration_lock_%d", l.db, version)
	return "CREATE TABLE " + table + l.onCluster() + " (taken_at DateTime DEFAULT now()) ENGINE = Memory",
		"DROP TABLE IF EXISTS " + table + l.onCluster(), nil
}

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	// SQL is the rendered migration; Statements are its statements, in
	// order, as the native protocol takes them: one at a time.
	SQL        string
	Statements []string
	// SkipOnce, when set, is a query whose single value is 1 once the
	// statements marked in Once have done their work (a table swapped for
	// another, which cannot be done twice); a runner then skips those
	// statements and runs the others. Once holds one flag per statement.
	SkipOnce string
	Once     []bool
}

// Run runs the migration's statements in order with exec, skipping those
// done already: before each statement marked in Once, done reads
// SkipOnce, so that a runner that started before another finished the
// swap does not redo it.
func (m Migration) Run(exec func(statement string) error, done func(query string) (bool, error)) error {
	for i, st := range m.Statements {
		if m.SkipOnce != "" && i < len(m.Once) && m.Once[i] {
			d, err := done(m.SkipOnce)
			if err != nil {
				return fmt.Errorf("migration %d (%s): check whether statement %d is done: %w", m.Version, m.Name, i+1, err)
			}
			if d {
				continue
			}
		}
		if err := exec(st); err != nil {
			return fmt.Errorf("migration %d (%s), statement %d: %w", m.Version, m.Name, i+1, err)
		}
	}
	return nil
}

// onceMark starts a statement that runs only until SkipOnce says done.
const onceMark = "@@once@@"

type params struct {
	DB, Time, Codec, TTL, IfNotExists string
	// OnCluster is the ON CLUSTER clause of a cluster's statements.
	OnCluster string
	// Cluster says the cluster layout is rendered. Its tables are created
	// with every column at once, because ClickHouse 18.x servers can
	// abort while two replicas of a shard run one ALTER ON CLUSTER; the
	// layout being new, no cluster table was made with fewer columns.
	Cluster bool
	// HistoryTTL is the TTL clause of query_sources (and of migration 6's
	// query_users), empty without TTL.
	HistoryTTL string
	// PrivatePattern is PrivatePattern() as an SQL string literal.
	PrivatePattern string
	// SkipIndexes says the server takes bloom-filter skip indexes.
	SkipIndexes bool
	// TimeSource is the type and default of events.event_time_source.
	TimeSource string
	// TimeKey orders events by event_time as a UInt64: milliseconds
	// where the server keeps them, else seconds.
	TimeKey string
	// EventColumns are the columns of events before migration 13, in
	// order, as a list.
	EventColumns string
	// ArrivalRank is events.arrival_rank computed from received_at: the
	// bitwise NOT of its nanoseconds (whole seconds on servers keeping
	// seconds), so that the earliest receipt ranks highest.
	ArrivalRank string
}

// eventColumns are the columns of events before migration 13.
const eventColumns = "event_id, app_id, organization_id, event_time, received_at, type, name, " +
	"session_id, user_id, channel, platform, selected_handler, current_handler, environment, " +
	"request_type, intent_id, raw_query, query_normalized, match_confidence, output_display_text, output_ssml, " +
	"display_count, tag, tags, error_message, error_stack, message, kb_used, kb_documents, kb_faqs, " +
	"event_time_source, runtime_time, token_id, client_network, payload, extra, kafka_partition, kafka_offset"

// ArrivalRank is events.arrival_rank of a copy received at t: the bitwise
// NOT of t in nanoseconds since 1970, so that ReplacingMergeTree, which
// keeps the row of the highest version, keeps the copy received first.
func ArrivalRank(t time.Time) uint64 {
	ns := t.UnixNano()
	if ns < 0 {
		ns = 0
	}
	return ^uint64(ns)
}

// Conditions on an events row that the rollups share, as SQL.
const (
	// turnCondition: the row is a turn, a REQUEST_RESPONSE event.
	turnCondition = "name = 'REQUEST_RESPONSE'"
	// fallbackCondition: the turn's request was not understood, or was
	// an intent request that matched no intent.
	fallbackCondition = "(request_type = 'INPUT_UNKNOWN_REQUEST' OR (request_type = 'INTENT_REQUEST' AND intent_id = ''))"
	// lowConfidenceCondition: the turn matched with a confidence below
	// LowConfidence.
	lowConfidenceCondition = "ifNull(match_confidence, 1) < 0.5"
	// failureCondition: the row reports an error or a failed turn.
	failureCondition = "(type IN ('ERROR', 'LambdaErrorEvent'))"
	// eventRank orders the events of one instant as a turn sends them:
	// a launch (0), other requests (1), the turn and its end (2), errors
	// (3).
	eventRank = "multiIf(name = 'LAUNCH_REQUEST', 0, type = 'REQUEST', 1, " + failureCondition + ", 3, 2)"
	// knowledgeBaseEmptyCondition: the turn asked the knowledge base and
	// it found neither a document nor an FAQ.
	knowledgeBaseEmptyCondition = "(kb_used = 1 AND kb_documents = 0 AND kb_faqs = 0)"
)

// MaxGapThreshold bounds the low-confidence threshold an app's gap inbox
// may set: gap_daily keeps the turns matched below it, in bands of
// GapBand.
const (
	MaxGapThreshold = 0.9
	GapBand         = 0.05
	// MaxGapQueryBytes is the longest question gap_daily keeps.
	MaxGapQueryBytes = 500
)

// LowConfidence is the match confidence below which a turn counts as
// low-confidence in the rollups.
const LowConfidence = 0.5

// TimeSourceReceived and TimeSourceRuntime are the values of
// events.event_time_source, as the Enum8 stores them.
const (
	TimeSourceReceived int8 = 1
	TimeSourceRuntime  int8 = 2
)

// Render returns every migration rendered for the features and options,
// in version order.
func Render(f Features, o Options) ([]Migration, error) {
	l, err := newLayout(o)
	if err != nil {
		return nil, err
	}
	p, ttl, err := renderParams(f, o, l)
	if err != nil {
		return nil, err
	}
	names, err := files.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range names {
		if path.Ext(e.Name()) != ".sql" {
			continue
		}
		m, err := renderFile(e.Name(), l, p, ttl)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations have version %d", out[i].Version)
		}
	}
	return out, nil
}

// renderParams are the values the migrations' templates read for the
// features and options, and ttl, which gives the TTL clause of a table
// by its time column ("" when rows are kept).
func renderParams(f Features, o Options, l layout) (p params, ttl func(column string) string, err error) {
	p = params{DB: l.db, Time: "DateTime('UTC')", OnCluster: l.onCluster(), Cluster: l.cluster != ""}
	if f.DateTime64 {
		p.Time = "DateTime64(3, 'UTC')"
	}
	if f.Codecs {
		p.Codec = " CODEC(ZSTD(3))"
	}
	// ttl drops rows whose time column is older than the retention.
	ttl = func(column string) string {
		if !f.TTL || o.RetentionDays <= 0 {
			return ""
		}
		return fmt.Sprintf("TTL toDateTime(%s) + INTERVAL %d DAY", column, o.RetentionDays)
	}
	p.TTL = ttl("event_time")
	if o.HistoryDays < 0 {
		return params{}, nil, fmt.Errorf("query history of %d days: want 0 (the default, %d) or more", o.HistoryDays, DefaultHistoryDays)
	}
	if f.TTL {
		// Asked queries never outlive the events they come from.
		days := o.HistoryDays
		if days == 0 {
			days = DefaultHistoryDays
		}
		if o.RetentionDays > 0 {
			days = min(days, o.RetentionDays)
		}
		p.HistoryTTL = fmt.Sprintf("TTL day + INTERVAL %d DAY", days)
	}
	p.PrivatePattern = quoteString(PrivatePattern())
	p.SkipIndexes = f.SkipIndexes
	p.TimeSource = fmt.Sprintf("Enum8('received' = %d, 'runtime' = %d) DEFAULT if(event_time = received_at, 'received', 'runtime')",
		TimeSourceReceived, TimeSourceRuntime)
	p.TimeKey = "toUInt64(toUnixTimestamp(event_time))"
	p.ArrivalRank = "bitNot(toUInt64(toUnixTimestamp(received_at)) * 1000000000)"
	if f.DateTime64 {
		p.TimeKey = "toUInt64(toUnixTimestamp64Milli(event_time))"
		p.ArrivalRank = "bitNot(toUInt64(toUnixTimestamp64Nano(received_at)))"
	}
	p.EventColumns = eventColumns
	if f.AddColumnIfNotExists {
		p.IfNotExists = " IF NOT EXISTS"
	}
	return p, ttl, nil
}

// renderFile renders the migration file name (NNNN_name.sql) with p.
func renderFile(name string, l layout, p params, ttl func(string) string) (Migration, error) {
	num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
	v, err := strconv.Atoi(num)
	if !ok || err != nil {
		return Migration{}, fmt.Errorf("migration file %s: want NNNN_name.sql", name)
	}
	src, err := files.ReadFile(name)
	if err != nil {
		return Migration{}, err
	}
	skipOnce := ""
	t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"ttl": ttl, "table": l.table, "engine": l.engine, "distributed": l.distributed,
		"distributedOver": l.distributedOver,
		// skipOnceColumn makes the statements marked with skip run only
		// while table lacks column.
		"skipOnceColumn": func(table, column string) string {
			skipOnce = l.columnExists(table, column)
			return ""
		},
		"skip":               func() string { return onceMark },
		"countEveryInsert":   l.countEveryInsert,
		"turn":               func() string { return turnCondition },
		"fallback":           func() string { return fallbackCondition },
		"lowConfidence":      func() string { return lowConfidenceCondition },
		"failure":            func() string { return failureCondition },
		"eventRank":          func() string { return eventRank },
		"knowledgeBaseEmpty": func() string { return knowledgeBaseEmptyCondition },
		"maxGapThreshold":    func() string { return strconv.FormatFloat(MaxGapThreshold, 'f', -1, 64) },
		"maxGapQueryBytes":   func() string { return strconv.Itoa(MaxGapQueryBytes) },
	}).Parse(string(src))
	if err != nil {
		return Migration{}, fmt.Errorf("migration %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return Migration{}, fmt.Errorf("render migration %s: %w", name, err)
	}
	sql := strings.TrimSpace(stripComments(b.String()))
	m := Migration{Version: v, Name: rest, SkipOnce: skipOnce}
	for _, st := range statements(sql) {
		st, once := strings.CutPrefix(st, onceMark)
		if once && skipOnce == "" {
			return Migration{}, fmt.Errorf("migration %s marks a statement to skip but says not when", name)
		}
		m.Statements = append(m.Statements, st)
		m.Once = append(m.Once, once)
	}
	m.SQL = strings.ReplaceAll(sql, onceMark, "")
	return m, nil
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

// quoteString quotes s as an SQL string literal.
func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// quoteIdent quotes a database name with backticks.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
