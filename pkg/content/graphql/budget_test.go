package graphql

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestAnswerBudgetShares: while others build answers, an organization
// holds at most its share (half when alone), its apps and tokens equal
// parts of it; what is given back is free again, and a refused charge
// charges nothing.
func TestAnswerBudgetShares(t *testing.T) {
	a1 := spender{"org-a", "app-1", "tok-1"}
	a1b := spender{"org-a", "app-1", "tok-2"}
	a2 := spender{"org-a", "app-2", "tok-3"}
	b := spender{"org-b", "app-b", "tok-b"}
	c := spender{"org-c", "app-c", "tok-c"}
	type step struct {
		s      spender
		n      int64
		give   bool
		refuse string // "" when granted, else described (see describe)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"alone, an organization takes half", []step{
			{s: a1, n: 500},
			{s: a1, n: 1, refuse: "organization share 500"},
			{s: b, n: 500},
		}},
		{"a third organization shares a third", []step{
			{s: a1, n: 300},
			{s: b, n: 300},
			{s: c, n: 334, refuse: "organization share 333"},
			{s: c, n: 333},
			{s: a1, n: 34, refuse: "organization share 333"},
			{s: a1, n: 33},
		}},
		{"two apps split their organization's share", []step{
			{s: a1, n: 200},
			{s: a2, n: 251, refuse: "app share 250"},
			{s: a2, n: 250},
		}},
		{"two tokens split their app's share", []step{
			{s: a1, n: 200},
			{s: a1b, n: 251, refuse: "token share 250"},
			{s: a1b, n: 250},
		}},
		{"given back, free again", []step{
			{s: a1, n: 500},
			{s: a1, n: 500, give: true},
			{s: a2, n: 500},
		}},
		{"the process's budget", []step{
			{s: a1, n: 500},
			{s: b, n: 400},
			// A third organization's share is 333, and 100 would fit in it,
			// but only 100 are left.
			{s: c, n: 101, refuse: "process budget 1000"},
			{s: c, n: 100},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bud := newAnswerBudget(1000)
			held := map[spender]int64{}
			for i, st := range tc.steps {
				if st.give {
					bud.give(st.s, st.n)
					held[st.s] -= st.n
					continue
				}
				r := bud.take(st.s, st.n)
				got := ""
				if r != nil {
					got = describe(r)
				} else {
					held[st.s] += st.n
				}
				if got != st.refuse {
					t.Fatalf("step %d: take %d for %v: refused %q, want %q", i, st.n, st.s, got, st.refuse)
				}
			}
			for s, n := range held {
				bud.give(s, n)
			}
			if bud.used != 0 || len(bud.orgs) != 0 {
				t.Errorf("after all was given back, %d bytes used and %d organizations kept", bud.used, len(bud.orgs))
			}
		})
	}
}

// describe is which share a refusal names, and its limit.
func describe(r *budgetRefusal) string {
	if r.process {
		return fmt.Sprintf("process budget %d", r.limit)
	}
	return fmt.Sprintf("%s share %d", r.share, r.limit)
}

// TestReaderAnswersAreSmall is the attack of a web page's visitor with
// the page's runtime token: aliases of an entity's document, each about
// a megabyte, answered 11 MB before. A token that cannot write content
// gets at most GRAPHQL_MAX_READER_ANSWER_BYTES, refused while resolving;
// an author's token still gets the whole answer; and the bytes built are
// charged to the token's rate.
func TestReaderAnswersAreSmall(t *testing.T) {
	// The clock stands still: no tokens come back while the test runs.
	frozen := time.Now()
	limiter := ratelimit.New(1000, 2000, func() time.Time { return frozen })
	e := newEnv(t, Limits{}, limiter)
	size := largeEntity(t, e, "BIG")
	e.addToken("runtime", tenancy.RuntimeScopes)
	query := aliases(8, `entity(entityId: "BIG") { document }`)

	var a answer
	alloc := allocated(func() { a = e.post("runtime", query, nil) })
	want := fmt.Sprintf("the answer is larger than %d bytes (GRAPHQL_MAX_READER_ANSWER_BYTES, for tokens without content:write), counted while resolving a", DefaultMaxReaderAnswerBytes)
	if a.status != http.StatusUnprocessableEntity || len(a.Errors) != 1 || !strings.Contains(a.Errors[0].Message, want) {
		t.Fatalf("runtime token: %d %.500s", a.status, a.raw)
	}
	if alloc > 16<<20 {
		t.Errorf("refusing it allocated %d MiB", alloc>>20)
	}
	if a := e.post("app1", query, nil); a.status != http.StatusOK || len(a.raw) < 8*size {
		t.Fatalf("management token: %d, %d bytes %.300s", a.status, len(a.raw), a.raw)
	}

	// What a refused answer built (about a megabyte) costs about 1,000
	// requests: two of them spend the burst of 2,000, and the third is
	// answered 429.
	refused := 0
	for range 10 {
		a := e.post("runtime", query, nil)
		if a.status == http.StatusTooManyRequests {
			break
		}
		if a.status != http.StatusUnprocessableEntity {
			t.Fatalf("%d %.300s", a.status, a.raw)
		}
		refused++
	}
	if refused < 1 || refused > 3 {
		t.Errorf("the rate limit answered 429 after %d refused answers of a megabyte, want 1 or 2", refused)
	}
}
