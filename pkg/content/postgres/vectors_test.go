package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// testVectors returns n vectors of dim random values.
func testVectors(n, dim int) (map[[32]byte][]float32, [][32]byte) {
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

func withApp(tb testing.TB, s *Store) {
	tb.Helper()
	ctx := tb.Context()
	now := time.Now()
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: now}); err != nil {
		tb.Fatal(err)
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: now, UpdatedAt: now}); err != nil {
		tb.Fatal(err)
	}
}

// TestVectorsInEveryQueryMode saves, loads and prunes vectors in each of
// pgx's query modes, which a DSN may choose (simple_protocol behind a
// transaction-mode pooler): the byte arrays go as bytea[] in all of them.
func TestVectorsInEveryQueryMode(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			s := openDSN(t, server.NewDatabase(t)+"&default_query_exec_mode="+mode)
			withApp(t, s)
			want, keys := testVectors(1200, 8) // more than one chunk
			if err := s.SaveVectors(ctx, "app", "m", want); err != nil {
				t.Fatalf("SaveVectors: %v", err)
			}
			got, err := s.LoadVectors(ctx, "app", "m", append(keys, [32]byte{}))
			if err != nil {
				t.Fatalf("LoadVectors: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("loaded %d vectors, want %d", len(got), len(want))
			}
			for h, w := range want {
				for i := range w {
					if math.Float32bits(got[h][i]) != math.Float32bits(w[i]) {
						t.Fatalf("vector %x value %d = %v, want %v", h[:4], i, got[h][i], w[i])
					}
				}
			}
			n, err := s.PruneVectors(ctx, "app", "m", time.Now().Add(time.Second))
			if err != nil || n != len(want) {
				t.Errorf("PruneVectors = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}

// BenchmarkLoadVectors loads an app's 30,000 vectors of 512 dimensions in
// one call, as a new api replica does for an app of that size; MB/s counts
// the vectors' bytes.
func BenchmarkLoadVectors(b *testing.B) {
	const n, dim = 30_000, 512
	s, err := Open(b.Context(), server.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	withApp(b, s)
	vs, keys := testVectors(n, dim)
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
