package sqlite

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// benchVectors returns n vectors of dim random values.
func benchVectors(n, dim int) (map[[32]byte][]float32, [][32]byte) {
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

// openWithApp opens a new file with organization org and app app.
func openWithApp(tb testing.TB) *Store {
	tb.Helper()
	ctx := tb.Context()
	s, err := Open(ctx, tb.TempDir()+"/content.db")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	now := time.Now()
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: now}); err != nil {
		tb.Fatal(err)
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: now, UpdatedAt: now}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkLoadVectors loads an app's 30,000 vectors of 512 dimensions in
// one call, as a restarted api does for an app of that size; MB/s counts
// the vectors' bytes.
func BenchmarkLoadVectors(b *testing.B) {
	const n, dim = 30_000, 512
	s := openWithApp(b)
	vs, keys := benchVectors(n, dim)
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

// BenchmarkSaveVectors saves 30,000 vectors of 512 dimensions in one call
// over the same ones.
func BenchmarkSaveVectors(b *testing.B) {
	const n, dim = 30_000, 512
	s := openWithApp(b)
	vs, _ := benchVectors(n, dim)
	b.SetBytes(n * dim * 4)
	for b.Loop() {
		if err := s.SaveVectors(b.Context(), "app", "m", vs); err != nil {
			b.Fatal(err)
		}
	}
}
