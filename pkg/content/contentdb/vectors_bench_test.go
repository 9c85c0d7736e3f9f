package contentdb

// The benchmarks of stored vectors, for each backend:
//
//	go test -run '^$' -bench 'Vectors(SQLite|Postgres)$' ./pkg/content/contentdb/

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// numberedVectors returns n vectors of dim random values, keyed by the
// SHA-256 of their number.
func numberedVectors(n, dim int) (map[[32]byte][]float32, [][32]byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	vs := make(map[[32]byte][]float32, n)
	keys := make([][32]byte, n)
	for i := range n {
		keys[i] = sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i)))
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vs[keys[i]] = v
	}
	return vs, keys
}

// withApp creates organization org and app app.
func withApp(tb testing.TB, s *DB) {
	tb.Helper()
	ctx := tb.Context()
	now := time.Now()
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", CreatedAt: now}); err != nil {
		tb.Fatal(err)
	}
	if err := s.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: now, UpdatedAt: now}); err != nil {
		tb.Fatal(err)
	}
}

// openWithApp opens a new SQLite file with organization org and app app.
func openWithApp(tb testing.TB) *DB {
	tb.Helper()
	s := openDB(tb, filepath.Join(tb.TempDir(), "content.db"))
	withApp(tb, s)
	return s
}

// BenchmarkLoadVectorsSQLite loads an app's 30,000 vectors of 512
// dimensions in one call, as a restarted api does for an app of that size;
// MB/s counts the vectors' bytes.
func BenchmarkLoadVectorsSQLite(b *testing.B) {
	const n, dim = 30_000, 512
	s := openWithApp(b)
	vs, keys := numberedVectors(n, dim)
	if err := s.SaveVectors(b.Context(), "app", "m", vs); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n * dim * 4)
	for b.Loop() {
		got, err := s.LoadVectors(b.Context(), "app", "m", keys)
		if err != nil || len(got) != n {
			b.Fatalf("LoadVectors = %d vectors, %v", len(got), err)
		}
	}
}

// BenchmarkSaveVectorsSQLite saves 30,000 vectors of 512 dimensions in
// one call over the same ones.
func BenchmarkSaveVectorsSQLite(b *testing.B) {
	const n, dim = 30_000, 512
	s := openWithApp(b)
	vs, _ := numberedVectors(n, dim)
	b.SetBytes(n * dim * 4)
	for b.Loop() {
		if err := s.SaveVectors(b.Context(), "app", "m", vs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadVectorsPostgres loads an app's 30,000 vectors of 512
// dimensions in one call, as a new api replica does for an app of that
// size; MB/s counts the vectors' bytes.
func BenchmarkLoadVectorsPostgres(b *testing.B) {
	const n, dim = 30_000, 512
	s := openDB(b, server.NewDatabase(b))
	withApp(b, s)
	vs, keys := numberedVectors(n, dim)
	if err := s.SaveVectors(b.Context(), "app", "m", vs); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n * dim * 4)
	for b.Loop() {
		got, err := s.LoadVectors(b.Context(), "app", "m", keys)
		if err != nil || len(got) != n {
			b.Fatalf("LoadVectors = %d vectors, %v", len(got), err)
		}
	}
}
