package contentapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// bigBundle is app-1 with n documents, whose index takes a while to build,
// and app-2 with one.
func bigBundle(n int) string {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`{"appId":"app-1","id":"d%d","title":"Guide %d to wheels, brakes and gears","document":"Section %d explains how the %d-speed hub, the disc brake pads and the tubeless tyres of model %d are serviced, adjusted and replaced at home or in the workshop."}`, i, i, i, i%11, i))
	}
	return `{"organizations":[{"id":"org-1","name":"One"}],
 "apps":[{"appId":"app-1","organizationId":"org-1","name":"App one"},{"appId":"app-2","organizationId":"org-1","name":"App two"}],
 "documents":[` + strings.Join(docs, ",") + `,{"appId":"app-2","id":"x","title":"Parking","document":"Free parking behind the store."}]}`
}

// TestIndexBuildsChargedToTheirToken is the attack of a token that changes
// content and asks a question, over and over, from several connections:
// each question makes the server build the app's index again, work the
// request rate limit alone does not see. The builds are charged to the
// token, which is soon answered 429, while another app's token is not.
func TestIndexBuildsChargedToTheirToken(t *testing.T) {
	e := newEnvWith(t, bigBundle(3000), map[string]tenancy.Token{
		"attacker": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.AllScopes},
		"other":    {OrganizationID: "org-1", AppID: "app-2", Scopes: tenancy.RuntimeScopes},
	}, ServiceConfig{RateLimitRPS: 1000, RateLimitBurst: 2000})
	var (
		n, limited atomic.Int64
		retry      atomic.Value
		stop       = make(chan struct{})
		once       sync.Once
		wg         sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"query":"mutation { addIntent(intent: {intentId: \"I%d_%d\"}) { intentId } }"}`, g, i)
				e.do(http.MethodPost, "/cms/graphql", body, "Authorization", "Bearer "+e.tokens["attacker"], "Content-Type", "application/json")
				r := e.get("/cms/search?question=disc+brake+pads", "attacker")
				n.Add(1)
				if r.status == http.StatusTooManyRequests {
					limited.Add(1)
					retry.Store(r.header.Get("Retry-After"))
					once.Do(func() { close(stop) })
					return
				}
				if r.status != http.StatusOK {
					t.Errorf("search: %d %s", r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Fatalf("%d changes and questions in 60 s, none refused: index builds are not charged", n.Load())
	}
	// Counted as requests alone (with their answers), the pairs would
	// need hundreds to spend a burst of 2,000.
	if n.Load() > 200 {
		t.Errorf("the first 429 came after %d changes and questions: not the builds' charge", n.Load())
	}
	if ra, _ := retry.Load().(string); ra == "" || ra == "0" {
		t.Errorf("429 without a Retry-After: %q", ra)
	}
	t.Logf("first 429 after %d changes and questions", n.Load())
	// The token's own limit is spent; another app's token is not touched.
	r := e.get("/cms/search?question=parking", "other")
	var body struct {
		Documents []json.RawMessage `json:"documents"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); r.status != http.StatusOK || err != nil || len(body.Documents) != 1 {
		t.Errorf("another app's search: %d %s", r.status, r.body)
	}
}

// TestIndexBuildsChargedToWhoChangedContent: the builds an editor's
// changes cause are charged to the editor's token, not to the runtime
// token whose reads happen to need them, which every visitor of a page
// shares.
func TestIndexBuildsChargedToWhoChangedContent(t *testing.T) {
	e := newEnvWith(t, bigBundle(3000), map[string]tenancy.Token{
		"editor":  {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.AllScopes},
		"runtime": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.RuntimeScopes},
	}, ServiceConfig{RateLimitRPS: 1000, RateLimitBurst: 2000})
	editorLimited := false
	for i := 0; i < 200 && !editorLimited; i++ {
		r := e.do(http.MethodPost, "/cms/graphql", fmt.Sprintf(`{"query":"mutation { addIntent(intent: {intentId: \"E%d\"}) { intentId } }"}`, i),
			"Authorization", "Bearer "+e.tokens["editor"], "Content-Type", "application/json")
		switch r.status {
		case http.StatusTooManyRequests:
			editorLimited = true
			continue
		case http.StatusOK:
		default:
			t.Fatalf("change %d: %d %s", i, r.status, r.body)
		}
		if r := e.get("/cms/search?question=disc+brake+pads", "runtime"); r.status != http.StatusOK {
			t.Fatalf("the runtime's question after change %d: %d %s", i, r.status, r.body)
		}
	}
	if !editorLimited {
		t.Error("200 changes, each rebuilt by a question, never limited the editor")
	}
}
