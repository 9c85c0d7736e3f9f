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
	limiter := ratelimit.New(1, 60, func() time.Time { return clock }) // no refill while the test runs
	e := newEnv(t, Limits{}, limiter)
	var statuses []int
	for range 4 {
		// GraphiQL's introspection answers 2,741 fields: 28 requests' worth.
		statuses = append(statuses, e.post("app1", graphiQLIntrospection, nil).status)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	// Another token's budget is its own.
	if a := e.post("org1", `{ handlers(appId: "app-1") { intentId } }`, nil); a.status != http.StatusOK {
		t.Errorf("another token: %d %s", a.status, a.raw)
	}
}
