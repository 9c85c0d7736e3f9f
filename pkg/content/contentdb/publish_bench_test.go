package contentdb

// What publishing costs, and what reading the live version costs beside
// the draft, for an app of 10,000 FAQs, on each engine:
//
//	go test -run '^$' -bench 'Benchmark(Publish|ReadLive)$' -benchtime 20x -count 3 ./pkg/content/contentdb/

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
)

const benchFAQs = 10_000

// withFAQs gives the app benchFAQs FAQs, in one import, and turns
// publishing on.
func withFAQs(b *testing.B, s *DB) {
	b.Helper()
	withApp(b, s)
	withFAQsT(b, s)
}

// withFAQsT is withFAQs for an app that exists.
func withFAQsT(b testing.TB, s *DB) {
	bn := &content.Bundle{}
	for i := range benchFAQs {
		bn.Records = append(bn.Records, content.Record{AppID: "app", Kind: content.KindFAQ, ID: fmt.Sprint("faq-", i),
			Doc: json.RawMessage(fmt.Sprintf(`{"answer":"Answer %d, a sentence or two of it.","id":"faq-%d","questions":["Question %d?"]}`, i, i, i))})
	}
	if _, err := s.Import(benchCtx(b.Context()), bn, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := s.SetPublishing(benchCtx(b.Context()), "app", true); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPublish changes one FAQ of the draft and publishes: a version
// of 10,000 records.
func BenchmarkPublish(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withFAQs(b, s)
			ctx := benchCtx(b.Context())
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				if _, err := s.UpdateRecord(ctx, "app", content.KindFAQ, "faq-0", 0, func(r content.Record) (content.Record, error) {
					r.Doc = json.RawMessage(fmt.Sprintf(`{"answer":"Changed %d.","id":"faq-0","questions":["Question 0?"]}`, i))
					return r, nil
				}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if _, published, err := s.Publish(ctx, "app"); err != nil || !published {
					b.Fatal(published, err)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

// BenchmarkReadLive reads the app's 10,000 FAQs from its draft and from
// its live version, as an index build does.
func BenchmarkReadLive(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			withFAQs(b, s)
			_, live, err := s.Live(b.Context(), "app")
			if err != nil {
				b.Fatal(err)
			}
			for _, read := range []struct {
				name string
				list func() ([]content.Record, error)
			}{
				{"draft", func() ([]content.Record, error) { return s.ListRecords(b.Context(), "app", content.KindFAQ) }},
				{"live", func() ([]content.Record, error) { return s.VersionRecords(b.Context(), "app", live, content.KindFAQ) }},
			} {
				b.Run(read.name, func(b *testing.B) {
					var took []time.Duration
					for b.Loop() {
						start := time.Now()
						recs, err := read.list()
						if err != nil || len(recs) != benchFAQs {
							b.Fatal(len(recs), err)
						}
						took = append(took, time.Since(start))
					}
					reportQuantiles(b, took)
				})
			}
		})
	}
}
