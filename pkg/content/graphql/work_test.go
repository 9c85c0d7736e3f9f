package graphql

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/ratelimit"
)

// TestAnswersChargedToTheirToken: a request costs its token one request,
// and its answer one more for every FieldsPerRequest fields, so that a
// token cannot ask for the largest answers at the rate of the smallest.
func TestAnswersChargedToTheirToken(t *testing.T) {
	clock := time.Unix(1000, 0)
	limiter := ratelimit.New(1, 100, func() time.Time { return clock }) // no refill while the test runs
	e := newEnv(t, Limits{}, limiter)
	var statuses []int
	for range 4 {
		// GraphiQL's introspection answers 5,168 fields: with the
		// request itself, 53 requests' worth, so that two take more
		// than the burst.
		statuses = append(statuses, e.post("app1", graphiQLIntrospection, nil).status)
	}
	if want := []int{200, 200, 429, 429}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	// Another token's budget is its own.
	if a := e.post("org1", `{ handlers(appId: "app-1") { intentId } }`, nil); a.status != http.StatusOK {
		t.Errorf("another token: %d %s", a.status, a.raw)
	}
}

// TestRefusedAnswerChargesWhatWasBuilt: a list refused as it is read is
// never built, so its token pays for the fields answered before it, not
// for those it would have held: one refused request does not put a
// token, which every runtime of an app may share, into debt.
func TestRefusedAnswerChargesWhatWasBuilt(t *testing.T) {
	clock := time.Unix(1000, 0)
	limiter := ratelimit.New(1, 5, func() time.Time { return clock }) // no refill while the test runs
	e := newEnv(t, Limits{MaxCost: 100, ListSize: 1}, limiter)
	manyIntents(t, e, 60)
	// 61 intents of 10 fields: 610, refused as the list is read; the
	// request costs 1 and its one field 0.01, leaving 3.99 requests.
	if a := e.post("app1", `{ intents {`+typenames(10)+` } }`, nil); a.status != 422 {
		t.Fatalf("61 intents of 10 fields, at most 100: %d %.300s", a.status, a.raw)
	}
	var statuses []int
	for range 4 {
		statuses = append(statuses, e.post("app1", `{ __typename }`, nil).status)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(statuses, want) {
		t.Errorf("after the refused request: %v, want %v", statuses, want)
	}
}
