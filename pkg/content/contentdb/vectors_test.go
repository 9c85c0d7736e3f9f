package contentdb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// server is the package's PostgreSQL server; each test takes a fresh
// database on it.
var server *devpostgres.Server

func TestMain(m *testing.M) { os.Exit(devpostgres.RunTests(m, &server)) }

// backend is one kind of content database, as a DSN for Open and raw SQL
// for what the store does not offer (corrupting a row, deleting an app).
type backend struct {
	name string
	// newDB returns the DSN of a new, empty database.
	newDB func(t *testing.T) string
	// exec runs one statement with $1... parameters on the database and
	// returns the rows it changed.
	exec func(t *testing.T, dsn, query string, args ...any) int64
	// count runs a SELECT count(*) ... query.
	count func(t *testing.T, dsn, query string, args ...any) int
}

func backends() []backend {
	return []backend{
		{
			name: "sqlite",
			newDB: func(t *testing.T) string {
				return filepath.Join(t.TempDir(), "content.db")
			},
			exec: func(t *testing.T, dsn, query string, args ...any) int64 {
				t.Helper()
				db := rawSQLite(t, dsn)
				res, err := db.ExecContext(t.Context(), query, args...)
				if err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				n, err := res.RowsAffected()
				if err != nil {
					t.Fatal(err)
				}
				return n
			},
			count: func(t *testing.T, dsn, query string, args ...any) int {
				t.Helper()
				var n int
				if err := rawSQLite(t, dsn).QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			},
		},
		{
			name:  "postgres",
			newDB: func(t *testing.T) string { return server.NewDatabase(t) },
			exec: func(t *testing.T, dsn, query string, args ...any) int64 {
				t.Helper()
				tag, err := rawPostgres(t, dsn).Exec(t.Context(), query, args...)
				if err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return tag.RowsAffected()
			},
			count: func(t *testing.T, dsn, query string, args ...any) int {
				t.Helper()
				var n int
				if err := rawPostgres(t, dsn).QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			},
		},
	}
}

// rawSQLite opens the file with the driver directly, foreign keys on as the
// store has them. SQLite numbers $1, $2... in order of appearance.
func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func rawPostgres(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// openStore opens dsn with Open and closes it when the test ends.
func openStore(t *testing.T, dsn string) Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// withApps creates organization org and the apps named.
func withApps(t *testing.T, s Store, apps ...string) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, id := range apps {
		if err := s.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: id, OrganizationID: "org", Name: id, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
}

func hashOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// randomVectors returns n vectors of dim values keyed by the hash of
// prefix and their number, and the keys in that order.
func randomVectors(seed uint64, prefix string, n, dim int) (map[[32]byte][]float32, [][32]byte) {
	rng := rand.New(rand.NewPCG(seed, 0))
	vs := make(map[[32]byte][]float32, n)
	keys := make([][32]byte, n)
	for i := range n {
		keys[i] = hashOf(fmt.Sprintf("%s %d", prefix, i))
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vs[keys[i]] = v
	}
	return vs, keys
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// checkLoaded fails unless got holds exactly want, bit for bit.
func checkLoaded(t *testing.T, got, want map[[32]byte][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("loaded %d vectors, want %d", len(got), len(want))
	}
	bad := 0
	for h, w := range want {
		g, ok := got[h]
		switch {
		case !ok:
			t.Errorf("vector %x missing", h[:4])
		case !sameBits(g, w):
			t.Errorf("vector %x = %v..., want %v...", h[:4], g[:min(4, len(g))], w[:min(4, len(w))])
		default:
			continue
		}
		if bad++; bad == 5 {
			t.Fatal("more differences not shown")
		}
	}
}

// nextMicrosecond waits for the wall clock to pass after (both backends'
// used times are at least microseconds apart then) and returns the time,
// to the microsecond. It waits for the clock, not for other goroutines.
func nextMicrosecond(after time.Time) time.Time {
	for {
		now := time.Now().Truncate(time.Microsecond)
		if now.After(after) {
			return now
		}
		time.Sleep(time.Microsecond)
	}
}

func TestVectors(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b backend)
	}{
		{"RoundTripIsBitExact", testVectorsRoundTrip},
		{"Misses", testVectorsMisses},
		{"ManyKeysInOneCall", testVectorsMany},
		{"AppsAndModelsApart", testVectorsApart},
		{"Prune", testVectorsPrune},
		{"AppDeletionRemovesVectors", testVectorsAppDeletion},
		{"CorruptRowsAbsent", testVectorsCorrupt},
		{"ConcurrentSaves", testVectorsConcurrent},
		{"BadInput", testVectorsBadInput},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) { tt.fn(t, b) })
			}
		})
	}
}

func testVectorsRoundTrip(t *testing.T, b backend) {
	ctx := t.Context()
	dsn := b.newDB(t)
	s := openStore(t, dsn)
	withApps(t, s, "app")
	want, _ := randomVectors(1, "text", 50, 384)
	// Values whose bits a conversion through float64 or text would change.
	want[hashOf("edges")] = []float32{
		0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(0x007fffff), 1.0000001, 0.1, 1e-38,
	}
	want[hashOf("one value")] = []float32{42}
	if err := s.SaveVectors(ctx, "app", "m", want); err != nil {
		t.Fatalf("SaveVectors: %v", err)
	}
	keys := make([][32]byte, 0, len(want))
	for h := range want {
		keys = append(keys, h)
	}
	got, err := s.LoadVectors(ctx, "app", "m", keys)
	if err != nil {
		t.Fatalf("LoadVectors: %v", err)
	}
	checkLoaded(t, got, want)

	// A store opened afresh, as after a restart, reads the same.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(t, dsn).LoadVectors(ctx, "app", "m", keys)
	if err != nil {
		t.Fatalf("LoadVectors after reopening: %v", err)
	}
	checkLoaded(t, again, want)
	// Stored as little-endian float32s, 4 bytes a value.
	one := hashOf("one value")
	if n := b.count(t, dsn, `SELECT count(*) FROM vectors WHERE hash = $1 AND length(vector) = 4 AND vector = $2`,
		one[:], binary.LittleEndian.AppendUint32(nil, math.Float32bits(42))); n != 1 {
		t.Errorf("the stored form of [42] is not 4 little-endian bytes (%d rows match)", n)
	}
}

func testVectorsMisses(t *testing.T, b backend) {
	ctx := t.Context()
	s := openStore(t, b.newDB(t))
	withApps(t, s, "app")
	got, err := s.LoadVectors(ctx, "app", "m", nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("LoadVectors of no hashes = %v, %v; want an empty map", got, err)
	}
	got, err = s.LoadVectors(ctx, "app", "m", [][32]byte{hashOf("a"), hashOf("b")})
	if err != nil || len(got) != 0 {
		t.Fatalf("LoadVectors before any save = %d vectors, %v; want none", len(got), err)
	}
	stored, keys := randomVectors(2, "stored", 10, 8)
	if err := s.SaveVectors(ctx, "app", "m", stored); err != nil {
		t.Fatal(err)
	}
	// Every stored key once or twice, among as many unknown ones.
	ask := append([][32]byte{}, keys...)
	ask = append(ask, keys[:3]...)
	for i := range 10 {
		ask = append(ask, hashOf(fmt.Sprintf("unknown %d", i)))
	}
	got, err = s.LoadVectors(ctx, "app", "m", ask)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, got, stored)
	// An app that does not exist has no vectors; asking is not an error.
	if got, err := s.LoadVectors(ctx, "no-such-app", "m", keys); err != nil || len(got) != 0 {
		t.Errorf("LoadVectors of an unknown app = %d vectors, %v; want none", len(got), err)
	}
	// Saving nothing changes nothing.
	if err := s.SaveVectors(ctx, "app", "m", nil); err != nil {
		t.Errorf("SaveVectors of nothing: %v", err)
	}
}

// testVectorsMany saves, loads and prunes 30,000 vectors, each in one call,
// more keys than either database takes as parameters of one statement.
// The vectors are short to keep the test quick under the race detector
// (which also instruments SQLite, a translation to Go); the benchmarks of
// each backend load 30,000 of 512 dimensions.
func testVectorsMany(t *testing.T, b backend) {
	ctx := t.Context()
	s := openStore(t, b.newDB(t))
	withApps(t, s, "app")
	const n, dim = 30_000, 32
	want, keys := randomVectors(3, "many", n, dim)
	start := time.Now()
	if err := s.SaveVectors(ctx, "app", "m", want); err != nil {
		t.Fatalf("SaveVectors of %d: %v", n, err)
	}
	saved := time.Since(start)
	// Half the keys again as misses: 45,000 hashes in the call.
	for i := range n / 2 {
		keys = append(keys, hashOf(fmt.Sprintf("absent %d", i)))
	}
	start = time.Now()
	got, err := s.LoadVectors(ctx, "app", "m", keys)
	if err != nil {
		t.Fatalf("LoadVectors of %d: %v", len(keys), err)
	}
	loaded := time.Since(start)
	checkLoaded(t, got, want)
	start = time.Now()
	pruned, err := s.PruneVectors(ctx, "app", "m", nextMicrosecond(time.Now()))
	if err != nil || pruned != n {
		t.Fatalf("PruneVectors of everything = %d, %v; want %d", pruned, err, n)
	}
	t.Logf("%d vectors of %d dimensions: save %v, load (%d hashes) %v, prune %v",
		n, dim, saved.Round(time.Millisecond), len(keys), loaded.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if got, err := s.LoadVectors(ctx, "app", "m", keys[:n]); err != nil || len(got) != 0 {
		t.Errorf("after pruning everything LoadVectors = %d vectors, %v; want none", len(got), err)
	}
}

// testVectorsApart checks that the same hash under another app or model is
// another vector: one app never reads another's.
func testVectorsApart(t *testing.T, b backend) {
	ctx := t.Context()
	s := openStore(t, b.newDB(t))
	withApps(t, s, "app-a", "app-b")
	h := hashOf("the same text")
	owners := []struct{ app, model string }{
		{"app-a", "m1"}, {"app-a", "m2"}, {"app-b", "m1"}, {"app-b", "m2"},
	}
	for i, o := range owners {
		if err := s.SaveVectors(ctx, o.app, o.model, map[[32]byte][]float32{h: {float32(i), 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// Only app-a, m1 has this one.
	only := hashOf("app-a's own text")
	if err := s.SaveVectors(ctx, "app-a", "m1", map[[32]byte][]float32{only: {7}}); err != nil {
		t.Fatal(err)
	}
	for i, o := range owners {
		got, err := s.LoadVectors(ctx, o.app, o.model, [][32]byte{h, only})
		if err != nil {
			t.Fatal(err)
		}
		want := map[[32]byte][]float32{h: {float32(i), 1}}
		if i == 0 {
			want[only] = []float32{7}
		}
		if len(got) != len(want) || !sameBits(got[h], want[h]) || !sameBits(got[only], want[only]) {
			t.Errorf("%s, %s: loaded %v, want %v", o.app, o.model, got, want)
		}
	}
	// A model name that is a prefix of another, or an app ID differing in
	// case, is another owner.
	for _, o := range []struct{ app, model string }{{"app-a", "m"}, {"app-a", "m1 "}, {"APP-A", "m1"}} {
		if got, err := s.LoadVectors(ctx, o.app, o.model, [][32]byte{h, only}); err != nil || len(got) != 0 {
			t.Errorf("%q, %q: loaded %d vectors, %v; want none", o.app, o.model, len(got), err)
		}
	}
}

func testVectorsPrune(t *testing.T, b backend) {
	ctx := t.Context()
	s := openStore(t, b.newDB(t))
	withApps(t, s, "app", "other")
	old, oldKeys := randomVectors(4, "old", 20, 16)
	kept, keptKeys := randomVectors(5, "kept", 10, 16)
	all := map[[32]byte][]float32{}
	for _, m := range []map[[32]byte][]float32{old, kept} {
		for h, v := range m {
			all[h] = v
		}
	}
	for _, o := range []struct{ app, model string }{{"app", "m"}, {"app", "other-model"}, {"other", "m"}} {
		if err := s.SaveVectors(ctx, o.app, o.model, all); err != nil {
			t.Fatal(err)
		}
	}
	mark := nextMicrosecond(time.Now())
	nextMicrosecond(mark)
	// Loading marks kept used after mark; saving again would too.
	if got, err := s.LoadVectors(ctx, "app", "m", keptKeys[:5]); err != nil || len(got) != 5 {
		t.Fatalf("LoadVectors = %d, %v", len(got), err)
	}
	if err := s.SaveVectors(ctx, "app", "m", map[[32]byte][]float32{keptKeys[5]: kept[keptKeys[5]]}); err != nil {
		t.Fatal(err)
	}
	wantKept := map[[32]byte][]float32{}
	for _, h := range keptKeys[:6] {
		wantKept[h] = kept[h]
	}
	pruned, err := s.PruneVectors(ctx, "app", "m", mark)
	if err != nil || pruned != len(all)-len(wantKept) {
		t.Fatalf("PruneVectors = %d, %v; want %d", pruned, err, len(all)-len(wantKept))
	}
	got, err := s.LoadVectors(ctx, "app", "m", append(oldKeys, keptKeys...))
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, got, wantKept)
	if n, err := s.PruneVectors(ctx, "app", "m", mark); err != nil || n != 0 {
		t.Errorf("PruneVectors again = %d, %v; want 0", n, err)
	}
	// The other model of the app and the other app kept everything.
	for _, o := range []struct{ app, model string }{{"app", "other-model"}, {"other", "m"}} {
		got, err := s.LoadVectors(ctx, o.app, o.model, append(oldKeys, keptKeys...))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(all) {
			t.Errorf("%s, %s: %d vectors after pruning app, m; want %d", o.app, o.model, len(got), len(all))
		}
	}
	// An app without vectors prunes none.
	if n, err := s.PruneVectors(ctx, "no-such-app", "m", time.Now()); err != nil || n != 0 {
		t.Errorf("PruneVectors of an unknown app = %d, %v; want 0", n, err)
	}
}

// testVectorsAppDeletion deletes an app row, as an operator would (no
// command deletes apps): its vectors go with it, and do not stop it.
func testVectorsAppDeletion(t *testing.T, b backend) {
	ctx := t.Context()
	dsn := b.newDB(t)
	s := openStore(t, dsn)
	withApps(t, s, "gone", "stays")
	vs, keys := randomVectors(6, "text", 30, 8)
	for _, app := range []string{"gone", "stays"} {
		for _, model := range []string{"m1", "m2"} {
			if err := s.SaveVectors(ctx, app, model, vs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := b.exec(t, dsn, `DELETE FROM apps WHERE id = $1`, "gone"); n != 1 {
		t.Fatalf("deleted %d apps", n)
	}
	if n := b.count(t, dsn, `SELECT count(*) FROM vectors WHERE app_id = $1`, "gone"); n != 0 {
		t.Errorf("%d vectors of the deleted app remain", n)
	}
	if n := b.count(t, dsn, `SELECT count(*) FROM vectors WHERE app_id = $1`, "stays"); n != 2*len(vs) {
		t.Errorf("the other app has %d vectors, want %d", n, 2*len(vs))
	}
	if got, err := s.LoadVectors(ctx, "gone", "m1", keys); err != nil || len(got) != 0 {
		t.Errorf("LoadVectors of the deleted app = %d, %v; want none", len(got), err)
	}
	err := s.SaveVectors(ctx, "gone", "m1", vs)
	if !errors.Is(err, content.ErrNotFound) || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf("SaveVectors for the deleted app = %v; want not found naming it", err)
	}
}

func testVectorsCorrupt(t *testing.T, b backend) {
	ctx := t.Context()
	dsn := b.newDB(t)
	s := openStore(t, dsn)
	withApps(t, s, "app")
	le := func(bits ...uint32) []byte {
		var out []byte
		for _, x := range bits {
			out = binary.LittleEndian.AppendUint32(out, x)
		}
		return out
	}
	corrupt := map[string][]byte{
		"not whole float32s": {1, 2, 3, 4, 5, 6, 7},
		"empty":              {},
		"NaN":                le(0x3f800000, 0x7fc00000),
		"signalling NaN":     le(0x7f800001),
		"+Inf":               le(0x7f800000, 0),
		"-Inf":               le(0, 0xff800000),
	}
	good := map[[32]byte][]float32{hashOf("good"): {1, 2}}
	for name := range corrupt {
		good[hashOf(name)] = []float32{3, 4}
	}
	if err := s.SaveVectors(ctx, "app", "m", good); err != nil {
		t.Fatal(err)
	}
	var keys [][32]byte
	for name, bytes := range corrupt {
		h := hashOf(name)
		keys = append(keys, h)
		if n := b.exec(t, dsn, `UPDATE vectors SET vector = $1 WHERE hash = $2`, bytes, h[:]); n != 1 {
			t.Fatalf("corrupt %s: %d rows", name, n)
		}
	}
	got, err := s.LoadVectors(ctx, "app", "m", append(keys, hashOf("good")))
	if err != nil {
		t.Fatalf("LoadVectors with corrupt rows: %v", err)
	}
	checkLoaded(t, got, map[[32]byte][]float32{hashOf("good"): {1, 2}})
	// Saving again overwrites them.
	fixed := map[[32]byte][]float32{}
	for _, h := range keys {
		fixed[h] = []float32{5, 6, 7}
	}
	if err := s.SaveVectors(ctx, "app", "m", fixed); err != nil {
		t.Fatal(err)
	}
	got, err = s.LoadVectors(ctx, "app", "m", keys)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, got, fixed)
}

// testVectorsConcurrent saves the same keys from two stores on one
// database at once, as two api replicas (or two processes on one SQLite
// file) that embedded the same new content would, while both also load
// them.
func testVectorsConcurrent(t *testing.T, b backend) {
	ctx := t.Context()
	dsn := b.newDB(t)
	stores := []Store{openStore(t, dsn), openStore(t, dsn)}
	withApps(t, stores[0], "app")
	const rounds, n = 3, 1500
	for round := range rounds {
		// The same texts give the same vectors on both; a third of the
		// keys is new in each round, the rest overlaps the last.
		vs, keys := randomVectors(uint64(10+round), "round", n+round*n/3, 64)
		for i := range round * n / 3 {
			delete(vs, keys[i])
		}
		keys = keys[round*n/3:]
		start := make(chan struct{})
		errs := make([]error, 2*len(stores))
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				errs[2*i] = s.SaveVectors(ctx, "app", "m", vs)
			})
			wg.Go(func() {
				<-start
				_, errs[2*i+1] = s.LoadVectors(ctx, "app", "m", keys)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, s := range stores {
			got, err := s.LoadVectors(ctx, "app", "m", keys)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(vs) {
				t.Fatalf("round %d, store %d: %d vectors, want %d", round, i, len(got), len(vs))
			}
			checkLoaded(t, got, vs)
		}
	}
}

func testVectorsBadInput(t *testing.T, b backend) {
	ctx := t.Context()
	s := openStore(t, b.newDB(t))
	withApps(t, s, "app")
	h := hashOf("x")
	tests := []struct {
		name       string
		app, model string
		vectors    map[[32]byte][]float32
		wantErr    []string
	}{
		{"empty app", "", "m", map[[32]byte][]float32{h: {1}}, []string{"empty app"}},
		{"empty model", "app", "", map[[32]byte][]float32{h: {1}}, []string{"empty model"}},
		{"NUL in model", "app", "m\x00", map[[32]byte][]float32{h: {1}}, []string{"model", "NUL"}},
		{"invalid UTF-8 app", "app\xff", "m", map[[32]byte][]float32{h: {1}}, []string{"app", "UTF-8"}},
		{"zero-length vector", "app", "m", map[[32]byte][]float32{h: {}}, []string{`app "app"`, `model "m"`, fmt.Sprintf("%x", h), "no values"}},
		{"nil vector", "app", "m", map[[32]byte][]float32{h: nil}, []string{"no values"}},
		{"NaN", "app", "m", map[[32]byte][]float32{h: {1, float32(math.NaN())}}, []string{"value 1", "NaN", "finite"}},
		{"infinity", "app", "m", map[[32]byte][]float32{h: {float32(math.Inf(-1))}}, []string{"value 0", "-Inf"}},
		{"too many values", "app", "m", map[[32]byte][]float32{h: make([]float32, content.MaxVectorDims+1)}, []string{"65537 values"}},
		{"unknown app", "no-such-app", "m", map[[32]byte][]float32{h: {1}}, []string{`app "no-such-app"`, "not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SaveVectors(ctx, tt.app, tt.model, tt.vectors)
			if err == nil {
				t.Fatal("SaveVectors succeeded")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("SaveVectors error %q does not say %q", err, want)
				}
			}
		})
	}
	// Nothing of a refused save was stored, not even its valid vectors.
	bad := map[[32]byte][]float32{h: {1}, hashOf("y"): {}}
	if err := s.SaveVectors(ctx, "app", "m", bad); err == nil {
		t.Fatal("SaveVectors with one empty vector succeeded")
	}
	if got, err := s.LoadVectors(ctx, "app", "m", [][32]byte{h}); err != nil || len(got) != 0 {
		t.Errorf("after a refused save LoadVectors = %v, %v; want nothing", got, err)
	}
	for _, o := range []struct{ app, model, want string }{{"", "m", "empty app"}, {"app", "", "empty model"}, {"app", "m\x00", "NUL"}} {
		if _, err := s.LoadVectors(ctx, o.app, o.model, [][32]byte{h}); err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("LoadVectors(%q, %q) = %v; want an error saying %q", o.app, o.model, err, o.want)
		}
		if _, err := s.PruneVectors(ctx, o.app, o.model, time.Now()); err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("PruneVectors(%q, %q) = %v; want an error saying %q", o.app, o.model, err, o.want)
		}
	}
	if _, err := s.PruneVectors(ctx, "app", "m", time.Time{}); err == nil || !strings.Contains(err.Error(), "zero time") {
		t.Errorf("PruneVectors with the zero time = %v; want an error", err)
	}
}
