package contentdb

// What keeping history costs writes, and what reading it costs, on each
// engine (run before and after a change in one sitting, and compare):
//
//	go test -run '^$' -bench 'Benchmark(Update|ReplaceValues|ImportEval|ReadRevisions)$' -benchtime 20x -count 5 ./pkg/content/contentdb/

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/graphql"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// benchEngines opens a new database of each engine.
var benchEngines = []struct {
	name string
	open func(b *testing.B) *DB
}{
	{"sqlite", func(b *testing.B) *DB { return openDB(b, filepath.Join(b.TempDir(), "content.db")) }},
	{"postgres", func(b *testing.B) *DB { return openDB(b, server.NewDatabase(b)) }},
}

// reportQuantiles reports the median and 99th percentile of the
// operations' times.
func reportQuantiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkUpdate changes one handler, as a GraphQL update does.
func BenchmarkUpdate(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withApp(b, s)
			ctx := benchCtx(b.Context())
			if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindHandler, ID: "H", Doc: []byte(`{"intentId":"H","name":"0"}`)}); err != nil {
				b.Fatal(err)
			}
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				if err := benchUpdate(ctx, s, "H", fmt.Appendf(nil, `{"intentId":"H","name":"%d"}`, i)); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

// BenchmarkReplaceValues writes an entity's 10,000 values over another
// 10,000, as a catalogue refresh (replaceEntityValues) does.
func BenchmarkReplaceValues(b *testing.B) {
	docs := [2][]byte{valuesDoc(10_000, "a"), valuesDoc(10_000, "b")}
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withApp(b, s)
			ctx := benchCtx(b.Context())
			if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindEntity, ID: "E", Doc: docs[0]}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(docs[0])))
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				if err := benchUpdate(ctx, s, "E", docs[i%2]); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

// valuesDoc is an entity of n values, each with a canonical ID and two
// synonyms, which tag makes differ from another tag's.
func valuesDoc(n int, tag string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"entityId":"E","values":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"canonicalId":"sku-%06d","name":"product %d %s","synonyms":["item %d","article %d"]}`, i, i, tag, i, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// BenchmarkImportEval imports the search evaluation's content into an
// empty database.
func BenchmarkImportEval(b *testing.B) {
	f, err := bundle.ReadFile("../knowledge/testdata/eval/content.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				b.StopTimer()
				s := e.open(b)
				b.StartTimer()
				start := time.Now()
				if _, err := s.Import(benchCtx(b.Context()), &f.Bundle, nil); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

// BenchmarkReadRevisions reads the newest 50 of a record's 1,000
// revisions, as an author's history page does.
func BenchmarkReadRevisions(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withApp(b, s)
			ctx := contenttest.Acting(b.Context())
			if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindHandler, ID: "H", Doc: []byte(`{"intentId":"H"}`)}); err != nil {
				b.Fatal(err)
			}
			for i := range 999 {
				if err := benchUpdate(ctx, s, "H", fmt.Appendf(nil, `{"intentId":"H","name":"revision %d","content":{"H":[{"outputSpeech":"Hello, this is revision %d."}]}}`, i, i)); err != nil {
					b.Fatal(err)
				}
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				revs, err := s.Revisions(ctx, "app", content.KindHandler, "H", 0, 50)
				if err != nil || len(revs) != 50 {
					b.Fatalf("Revisions = %d, %v", len(revs), err)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

// benchCtx and benchUpdate are the write calls the benchmarks make.
func benchCtx(ctx context.Context) context.Context { return contenttest.Acting(ctx) }

func benchUpdate(ctx context.Context, s *DB, id string, doc []byte) error {
	kind := content.KindHandler
	if id == "E" {
		kind = content.KindEntity
	}
	_, err := s.UpdateRecord(ctx, "app", kind, id, 0, func(r content.Record) (content.Record, error) {
		r.Doc = doc
		return r, nil
	})
	return err
}

// BenchmarkCatalogueHistory is a catalogue refresh of an entity of 10,000
// values every 15 minutes for 30 days (2,880 refreshes), each changing 100
// of the values, as prices and stock do. It reports the bytes the
// database holds for the entity and its history: after the 30 days, then
// once retention has pruned all but the newest 10 revisions (what is left
// of revisions past CONTENT_HISTORY_RETENTION).
//
//	go test -run '^$' -bench CatalogueHistory -benchtime 1x -timeout 30m ./pkg/content/contentdb/
func BenchmarkCatalogueHistory(b *testing.B) {
	const refreshes, values, changed = 2880, 10_000, 100
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			for b.Loop() {
				s := e.open(b)
				withApp(b, s)
				ctx := contenttest.Acting(b.Context())
				before := storedBytes(b, s)
				version := make([]int, values)
				doc := func() []byte {
					var sb strings.Builder
					sb.WriteString(`{"entityId":"E","values":[`)
					for i := range values {
						if i > 0 {
							sb.WriteByte(',')
						}
						fmt.Fprintf(&sb, `{"canonicalId":"sku-%06d","name":"product %d","synonyms":["item %d"],"price":"%d.99"}`, i, i, i, 10+version[i])
					}
					sb.WriteString(`]}`)
					return []byte(sb.String())
				}
				first := doc()
				if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindEntity, ID: "E", Doc: first}); err != nil {
					b.Fatal(err)
				}
				for r := range refreshes {
					for j := range changed {
						version[(r*changed+j*97)%values]++
					}
					if err := benchUpdate(ctx, s, "E", doc()); err != nil {
						b.Fatal(err)
					}
				}
				after := storedBytes(b, s) - before
				if s.db.Engine() == sqldb.Postgres {
					// The record's own dead versions, which vacuum
					// reclaims with or without history, aside.
					var revs int64
					if err := s.db.SQL().QueryRowContext(b.Context(), `SELECT pg_total_relation_size('revisions')`).Scan(&revs); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(revs)/(1<<20), "MiB-of-revisions-after-30-days")
				}
				p, err := s.PruneHistory(ctx, time.Now().Add(time.Second), content.DefaultKeepRevisions)
				if err != nil {
					b.Fatal(err)
				}
				if s.db.Engine() == sqldb.Postgres {
					// What pruning freed, and the record's dead versions,
					// are reused by later writes once vacuumed; compacted
					// here to measure what is left.
					if _, err := s.db.SQL().ExecContext(b.Context(), `VACUUM FULL revisions, records`); err != nil {
						b.Fatal(err)
					}
				}
				pruned := storedBytes(b, s) - before
				b.ReportMetric(float64(len(first)), "doc-bytes")
				b.ReportMetric(float64(after)/(1<<20), "MiB-after-30-days")
				b.ReportMetric(float64(after)/refreshes/1024, "KiB-per-refresh")
				b.ReportMetric(float64(pruned)/(1<<20), "MiB-after-pruning")
				b.ReportMetric(float64(p.Revisions), "revisions-pruned")
			}
		})
	}
}

// storedBytes is what the database holds: on SQLite its file's pages in
// use (free pages, kept for reuse, aside) once the write-ahead log is
// checkpointed; on PostgreSQL the tables', indexes' and TOAST's bytes.
func storedBytes(b *testing.B, s *DB) int64 {
	b.Helper()
	var n int64
	q := `SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())`
	if s.db.Engine() == sqldb.Postgres {
		if err := s.db.SQL().QueryRowContext(b.Context(), `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
			JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = 'public' AND c.relkind = 'r'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	if _, err := s.db.SQL().ExecContext(b.Context(), `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	var pages, size int64
	if err := s.db.SQL().QueryRowContext(b.Context(), q).Scan(&pages, &size); err != nil {
		b.Fatal(err)
	}
	return pages * size
}

// BenchmarkGraphQLUpdate sends updateHandler mutations over HTTP to the
// GraphQL endpoint on each engine, as an author's tool does: the whole
// request, from the token's check to the answer.
func BenchmarkGraphQLUpdate(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withApp(b, s)
			ctx := benchCtx(b.Context())
			if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindHandler, ID: "H", Doc: []byte(`{"intentId":"H"}`)}); err != nil {
				b.Fatal(err)
			}
			secret, id, err := auth.NewToken()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.CreateToken(ctx, tenancy.Token{ID: id, Hash: auth.HashToken(secret), OrganizationID: "org", AppID: "app", Scopes: tenancy.AllScopes, CreatedAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
			authn, err := auth.NewAuthenticator(s, auth.Options{})
			if err != nil {
				b.Fatal(err)
			}
			h, err := graphql.New(graphql.Limits{}, s, authn, nil, func(string, string) {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				body := fmt.Sprintf(`{"query":"mutation { updateHandler(handlerId: \"H\", handler: {name: \"%d\"}) { intentId } }"}`, i)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
				if resp.StatusCode != http.StatusOK || strings.Contains(string(got), `"errors"`) {
					b.Fatalf("%d %s", resp.StatusCode, got)
				}
			}
			reportQuantiles(b, took)
		})
	}
}
